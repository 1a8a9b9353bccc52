#include "engine/ops/timer_ops.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "engine/blob.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::StringArg;
using ::jobgraph::ops_test::TensorOf;
using ::testing::ElementsAre;

TEST(TimerInstanceTest, BeginGetEnd) {
  TimerInstance timer("t");
  EXPECT_FALSE(timer.running());
  EXPECT_EQ(timer.ElapsedNanos().status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(timer.Begin().ok());
  EXPECT_TRUE(timer.running());
  EXPECT_EQ(timer.Begin().code(), absl::StatusCode::kFailedPrecondition);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  absl::StatusOr<int64_t> elapsed = timer.ElapsedNanos();
  ASSERT_TRUE(elapsed.ok());
  EXPECT_GE(*elapsed, 2'000'000);
  absl::StatusOr<int64_t> total = timer.End();
  ASSERT_TRUE(total.ok());
  EXPECT_GE(*total, *elapsed);
  EXPECT_FALSE(timer.running());
  EXPECT_EQ(timer.End().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TimerOpsTest, BeginGetAndEnd) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("TimerBegin", {}, {"t"},
                           {StringArg("counter_name", "read_time")}),
                    &ws)
                  .ok());
  const Blob* blob = ws.GetBlob("t");
  ASSERT_TRUE(blob->IsType<TimerInstance>());
  EXPECT_EQ(blob->TypeName(), "TimerInstance*");
  EXPECT_EQ(blob->Get<TimerInstance>().name(), "read_time");
  EXPECT_TRUE(blob->Get<TimerInstance>().running());

  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(RunOp(MakeOp("TimerGet", {"t"}, {"ns"}), &ws).ok());
  const Tensor& ns = TensorOf(ws, "ns");
  EXPECT_EQ(ns.dtype(), INT64);
  EXPECT_THAT(ns.shape(), ElementsAre());
  EXPECT_GE(ns.scalar<int64_t>(), 1'000'000);

  ASSERT_TRUE(RunOp(MakeOp("TimerGetAndEnd", {"t"}, {"total"}), &ws).ok());
  const Tensor& total = TensorOf(ws, "total");
  EXPECT_EQ(total.dtype(), INT64);
  EXPECT_THAT(total.shape(), ElementsAre(1));
  EXPECT_GE(total.scalar<int64_t>(), TensorOf(ws, "ns").scalar<int64_t>());
  EXPECT_FALSE(blob->Get<TimerInstance>().running());
}

TEST(TimerOpsTest, CounterNameDefaultsToOutputName) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("TimerBegin", {}, {"my_timer"}), &ws).ok());
  EXPECT_EQ(ws.GetBlob("my_timer")->Get<TimerInstance>().name(), "my_timer");
}

TEST(TimerOpsTest, BeginAfterEndRestarts) {
  Workspace ws;
  auto begin = CreateOp(MakeOp("TimerBegin", {}, {"t"}), &ws);
  ASSERT_TRUE(begin.ok()) << begin.status();
  auto end = CreateOp(MakeOp("TimerEnd", {"t"}, {}), &ws);
  ASSERT_TRUE(end.ok()) << end.status();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*begin)->Run().ok());
    ASSERT_TRUE((*end)->Run().ok());
  }
  EXPECT_FALSE(ws.GetBlob("t")->Get<TimerInstance>().running());
}

TEST(TimerOpsTest, Misuse) {
  Workspace ws;
  auto begin = CreateOp(MakeOp("TimerBegin", {}, {"t"}), &ws);
  ASSERT_TRUE(begin.ok()) << begin.status();
  ASSERT_TRUE((*begin)->Run().ok());
  absl::Status s = (*begin)->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(std::string(s.message()),
            "op TimerBegin( -> t): timer 't' is already running");

  ASSERT_TRUE(RunOp(MakeOp("TimerEnd", {"t"}, {}), &ws).ok());
  s = RunOp(MakeOp("TimerEnd", {"t"}, {}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(std::string(s.message()),
            "op TimerEnd(t -> ): timer 't' is not running (TimerBegin it "
            "first)");
  s = RunOp(MakeOp("TimerGet", {"t"}, {"ns"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  s = RunOp(MakeOp("TimerGetAndEnd", {"t"}, {"ns"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST(TimerOpsTest, NonTimerInputIsFailedPrecondition) {
  Workspace ws;
  ws.SetTensor("t", Tensor::Scalar<int64_t>(0));
  absl::Status s = RunOp(MakeOp("TimerGet", {"t"}, {"ns"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(std::string(s.message()),
            "op TimerGet(t -> ns): input 't' holds Tensor, not a timer "
            "(create it with TimerBegin)");
}

TEST(TimerOpsTest, TimerBeginReplacesANonTimerBlob) {
  Workspace ws;
  ws.SetTensor("t", Tensor::Scalar<int64_t>(0));
  ASSERT_TRUE(RunOp(MakeOp("TimerBegin", {}, {"t"}), &ws).ok());
  EXPECT_TRUE(ws.GetBlob("t")->IsType<TimerInstance>());
}

}  // namespace
}  // namespace jobgraph

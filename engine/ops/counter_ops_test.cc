#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::IntArg;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t Count(const Workspace& ws) {
  return ws.GetBlob("counter")->Get<Counter>().Retrieve();
}

TEST(CounterOpsTest, CreateCounterStoresACounter) {
  Workspace ws;
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 3)}),
            &ws)
          .ok());
  const Blob* blob = ws.GetBlob("counter");
  ASSERT_TRUE(blob->IsType<Counter>());
  EXPECT_EQ(blob->TypeName(), "std::unique_ptr<Counter<int64_t>>");
  EXPECT_EQ(Count(ws), 3);
}

TEST(CounterOpsTest, CreateCounterDefaultsToZero) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("CreateCounter", {}, {"counter"}), &ws).ok());
  EXPECT_EQ(Count(ws), 0);
}

TEST(CounterOpsTest, NegativeInitCountIsAnError) {
  Workspace ws;
  auto op = CreateOp(
      MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", -1)}),
      &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(op.status().message()),
            "op CreateCounter( -> counter): init_count must be >= 0, got -1");
  ASSERT_TRUE(RunOp(MakeOp("CreateCounter", {}, {"counter"}), &ws).ok());
  op = CreateOp(
      MakeOp("ResetCounter", {"counter"}, {}, {IntArg("init_count", -5)}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CounterOpsTest, CountDownSequence) {
  Workspace ws;
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 3)}),
            &ws)
          .ok());
  auto count_down = CreateOp(MakeOp("CountDown", {"counter"}, {"done"}), &ws);
  ASSERT_TRUE(count_down.ok()) << count_down.status();
  std::vector<bool> done;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*count_down)->Run().ok());
    const Tensor& t = TensorOf(ws, "done");
    EXPECT_EQ(t.dtype(), BOOL);
    EXPECT_THAT(t.shape(), ElementsAre());
    done.push_back(t.scalar<bool>());
  }
  EXPECT_THAT(done, ElementsAre(false, false, false, true, true));
  EXPECT_EQ(Count(ws), -2);

  ASSERT_TRUE(RunOp(MakeOp("RetrieveCount", {"counter"}, {"count"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "count").dtype(), INT64);
  EXPECT_THAT(TensorOf(ws, "count").shape(), ElementsAre());
  EXPECT_EQ(TensorOf(ws, "count").scalar<int64_t>(), -2);
}

TEST(CounterOpsTest, CountUpReturnsOldValue) {
  Workspace ws;
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 7)}),
            &ws)
          .ok());
  auto count_up = CreateOp(MakeOp("CountUp", {"counter"}, {"old"}), &ws);
  ASSERT_TRUE(count_up.ok()) << count_up.status();
  ASSERT_TRUE((*count_up)->Run().ok());
  EXPECT_EQ(TensorOf(ws, "old").dtype(), INT64);
  EXPECT_EQ(TensorOf(ws, "old").scalar<int64_t>(), 7);
  ASSERT_TRUE((*count_up)->Run().ok());
  EXPECT_EQ(TensorOf(ws, "old").scalar<int64_t>(), 8);
  EXPECT_EQ(Count(ws), 9);
}

TEST(CounterOpsTest, ResetCounterOutputsPreviousValue) {
  Workspace ws;
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 2)}),
            &ws)
          .ok());
  ASSERT_TRUE(RunOp(MakeOp("CountDown", {"counter"}, {"done"}), &ws).ok());
  ASSERT_TRUE(RunOp(MakeOp("ResetCounter", {"counter"}, {"previous"},
                           {IntArg("init_count", 10)}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "previous").dtype(), INT64);
  EXPECT_EQ(TensorOf(ws, "previous").scalar<int64_t>(), 1);
  EXPECT_EQ(Count(ws), 10);
  // Without an output, and with the default init_count.
  ASSERT_TRUE(RunOp(MakeOp("ResetCounter", {"counter"}, {}), &ws).ok());
  EXPECT_EQ(Count(ws), 0);
}

TEST(CounterOpsTest, CheckCounterDone) {
  Workspace ws;
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 1)}),
            &ws)
          .ok());
  auto check = CreateOp(MakeOp("CheckCounterDone", {"counter"}, {"done"}), &ws);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_TRUE((*check)->Run().ok());
  EXPECT_FALSE(TensorOf(ws, "done").scalar<bool>());
  ASSERT_TRUE(RunOp(MakeOp("CountDown", {"counter"}, {"ignored"}), &ws).ok());
  ASSERT_TRUE((*check)->Run().ok());
  EXPECT_TRUE(TensorOf(ws, "done").scalar<bool>());
  EXPECT_EQ(Count(ws), 0) << "CheckCounterDone must not change the count";
}

TEST(CounterOpsTest, CreateCounterRunAgainStartsOver) {
  Workspace ws;
  auto create = CreateOp(
      MakeOp("CreateCounter", {}, {"counter"}, {IntArg("init_count", 2)}), &ws);
  ASSERT_TRUE(create.ok()) << create.status();
  ASSERT_TRUE((*create)->Run().ok());
  ASSERT_TRUE(RunOp(MakeOp("CountUp", {"counter"}, {"old"}), &ws).ok());
  EXPECT_EQ(Count(ws), 3);
  ASSERT_TRUE((*create)->Run().ok());
  EXPECT_EQ(Count(ws), 2);
}

TEST(CounterOpsTest, NonCounterInputIsFailedPrecondition) {
  Workspace ws;
  ws.SetTensor("counter", Tensor::Scalar<int64_t>(3));
  ws.CreateBlob("empty");
  for (const std::string type : {"CountDown", "CountUp", "RetrieveCount",
                                 "CheckCounterDone", "ResetCounter"}) {
    absl::Status s = RunOp(MakeOp(type, {"counter"}, {"out"}), &ws);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(std::string(s.message()),
              "op " + type +
                  "(counter -> out): input 'counter' holds Tensor, not a "
                  "counter (create it with CreateCounter)");
  }
  absl::Status s = RunOp(MakeOp("CountDown", {"empty"}, {"out"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("input 'empty' holds uninitialized"));
}

TEST(CounterOpsTest, WrongArityFailsAtCreation) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("CreateCounter", {}, {"counter"}), &ws).ok());
  auto op = CreateOp(MakeOp("CountDown", {"counter"}, {}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  op = CreateOp(MakeOp("CreateCounter", {"counter"}, {"c2"}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jobgraph

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "engine/blob.h"
#include "engine/net.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

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

TEST(CopyOpTest, DeepCopies) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2}));
  ASSERT_TRUE(RunOp(MakeOp("Copy", {"x"}, {"y"}), &ws).ok());
  EXPECT_TRUE(TensorOf(ws, "y").BitwiseEquals(TensorOf(ws, "x")));
  ws.GetBlob("x")->GetMutable<Tensor>()->mutable_data<int64_t>()[0] = 9;
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "y")), ElementsAre(1, 2, 3, 4));
}

TEST(CopyOpTest, CopiesStrings) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<std::string>({"a", "bc"}));
  ws.SetTensor("y", Tensor::FromVector<std::string>({"old", "old"}));
  ASSERT_TRUE(RunOp(MakeOp("Copy", {"x"}, {"y"}), &ws).ok());
  EXPECT_THAT(Values<std::string>(TensorOf(ws, "y")), ElementsAre("a", "bc"));
}

TEST(CopyOpTest, ReusesStorageAndFollowsShapeChanges) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<float>({1, 2}));
  auto op = CreateOp(MakeOp("Copy", {"x"}, {"y"}), &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE((*op)->Run().ok());
  const void* storage = TensorOf(ws, "y").raw_data();
  ws.GetBlob("x")->GetMutable<Tensor>()->mutable_data<float>()[1] = 5;
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_EQ(TensorOf(ws, "y").raw_data(), storage);
  EXPECT_THAT(Values<float>(TensorOf(ws, "y")), ElementsAre(1, 5));
  ws.SetTensor("x", Tensor::FromVector<int32_t>({7, 8, 9}));
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_EQ(TensorOf(ws, "y").dtype(), INT32);
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "y")), ElementsAre(7, 8, 9));
}

TEST(CopyOpTest, ToItselfIsANoOp) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({4}));
  ASSERT_TRUE(RunOp(MakeOp("Copy", {"x"}, {"x"}), &ws).ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "x")), ElementsAre(4));
}

// How a PRIVATE task publishes a result: the output names a blob of the
// root workspace, so the copy lands there and outlives the child.
TEST(CopyOpTest, WritesThroughToParentWorkspace) {
  Workspace root(nullptr, "root");
  root.SetTensor("result", Tensor::Scalar<int64_t>(0));
  {
    Workspace child(&root, "task");
    child.SetTensor("local", Tensor::Scalar<int64_t>(42));
    NetDef net;
    net.set_name("publish");
    *net.add_op() = MakeOp("Copy", {"local"}, {"result"});
    auto built = Net::Create(net, &child);
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_TRUE((*built)->Run().ok());
  }
  EXPECT_EQ(TensorOf(root, "result").scalar<int64_t>(), 42);
  EXPECT_FALSE(root.HasBlob("local"));
}

TEST(CopyOpTest, NonTensorInputIsFailedPrecondition) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("CreateCounter", {}, {"c"}), &ws).ok());
  absl::Status s = RunOp(MakeOp("Copy", {"c"}, {"y"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'c' holds"));
}

TEST(IsEmptyOpTest, ChecksElementCount) {
  Workspace ws;
  ws.SetTensor("empty", Tensor(FLOAT, {0}));
  ws.SetTensor("three", Tensor(INT64, {3}));
  ws.SetTensor("scalar", Tensor::Scalar<int32_t>(0));
  ws.SetTensor("empty2d", Tensor(STRING, {2, 0}));
  ASSERT_TRUE(RunOp(MakeOp("IsEmpty", {"empty"}, {"a"}), &ws).ok());
  ASSERT_TRUE(RunOp(MakeOp("IsEmpty", {"three"}, {"b"}), &ws).ok());
  ASSERT_TRUE(RunOp(MakeOp("IsEmpty", {"scalar"}, {"c"}), &ws).ok());
  ASSERT_TRUE(RunOp(MakeOp("IsEmpty", {"empty2d"}, {"d"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "a").dtype(), BOOL);
  EXPECT_THAT(TensorOf(ws, "a").shape(), ElementsAre());
  EXPECT_TRUE(TensorOf(ws, "a").scalar<bool>());
  EXPECT_FALSE(TensorOf(ws, "b").scalar<bool>());
  EXPECT_FALSE(TensorOf(ws, "c").scalar<bool>());
  EXPECT_TRUE(TensorOf(ws, "d").scalar<bool>());
}

TEST(PrintOpTest, PrintsToStdout) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({1, 2, 3}));
  testing::internal::CaptureStdout();
  absl::Status s =
      RunOp(MakeOp("Print", {"x"}, {}, {IntArg("to_stdout", 1)}), &ws);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out, "x: int64[3] {1, 2, 3}\n");
}

TEST(PrintOpTest, LimitsElementsAndDescribesOtherBlobs) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({1, 2, 3}));
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"c"}, {IntArg("init_count", 4)}), &ws)
          .ok());
  ws.CreateBlob("nothing");
  testing::internal::CaptureStdout();
  ASSERT_TRUE(RunOp(MakeOp("Print", {"x"}, {},
                           {IntArg("to_stdout", 1), IntArg("limit", 2)}),
                    &ws)
                  .ok());
  ASSERT_TRUE(
      RunOp(MakeOp("Print", {"c"}, {}, {IntArg("to_stdout", 1)}), &ws).ok());
  ASSERT_TRUE(
      RunOp(MakeOp("Print", {"nothing"}, {}, {IntArg("to_stdout", 1)}), &ws)
          .ok());
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            "x: int64[3] {1, 2, ... (3 in all)}\n"
            "c: std::unique_ptr<Counter<int64_t>> {4}\n"
            "nothing: uninitialized\n");
}

TEST(PrintOpTest, LogsByDefault) {
  Workspace ws;
  ws.SetTensor("x", Tensor::Scalar<bool>(true));
  testing::internal::CaptureStdout();
  ASSERT_TRUE(RunOp(MakeOp("Print", {"x"}, {}), &ws).ok());
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
}

TEST(PrintOpTest, NegativeLimitIsAnError) {
  Workspace ws;
  ws.SetTensor("x", Tensor::Scalar<bool>(true));
  auto op = CreateOp(MakeOp("Print", {"x"}, {}, {IntArg("limit", -1)}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jobgraph

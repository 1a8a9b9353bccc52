#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;

TEST(LogicOpsTest, AndOrElementwise) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<bool>({false, false, true, true}));
  ws.SetTensor("b", Tensor::FromVector<bool>({false, true, false, true}));
  ASSERT_TRUE(RunOp(MakeOp("And", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<bool>(TensorOf(ws, "c")),
              ElementsAre(false, false, false, true));
  ASSERT_TRUE(RunOp(MakeOp("Or", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<bool>(TensorOf(ws, "c")),
              ElementsAre(false, true, true, true));
}

TEST(LogicOpsTest, BroadcastsBothWays) {
  Workspace ws;
  ws.SetTensor("v", Tensor::FromVector<bool>({false, true}));
  ws.SetTensor("t", Tensor::Scalar<bool>(true));
  ASSERT_TRUE(RunOp(MakeOp("And", {"v", "t"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<bool>(TensorOf(ws, "c")), ElementsAre(false, true));
  ASSERT_TRUE(RunOp(MakeOp("Or", {"t", "v"}, {"c"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(2));
  EXPECT_THAT(Values<bool>(TensorOf(ws, "c")), ElementsAre(true, true));
}

// NetBuilder.stop_if: Or(stop, cond -> stop).
TEST(LogicOpsTest, OrAccumulatesIntoStopBlob) {
  Workspace ws;
  ws.SetTensor("stop", Tensor::Scalar<bool>(false));
  ws.SetTensor("cond", Tensor::Scalar<bool>(false));
  auto op = ops_test::CreateOp(MakeOp("Or", {"stop", "cond"}, {"stop"}), &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_FALSE(TensorOf(ws, "stop").scalar<bool>());
  ws.SetTensor("cond", Tensor::Scalar<bool>(true));
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_TRUE(TensorOf(ws, "stop").scalar<bool>());
  ws.SetTensor("cond", Tensor::Scalar<bool>(false));
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_TRUE(TensorOf(ws, "stop").scalar<bool>());
}

TEST(LogicOpsTest, Not) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<bool>({true, false}, {1, 2}));
  ASSERT_TRUE(RunOp(MakeOp("Not", {"a"}, {"b"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "b").shape(), ElementsAre(1, 2));
  EXPECT_THAT(Values<bool>(TensorOf(ws, "b")), ElementsAre(false, true));
  ASSERT_TRUE(RunOp(MakeOp("Not", {"a"}, {"a"}), &ws).ok());
  EXPECT_THAT(Values<bool>(TensorOf(ws, "a")), ElementsAre(false, true));
}

TEST(LogicOpsTest, NonBoolInputsAreAnError) {
  Workspace ws;
  ws.SetTensor("b", Tensor::Scalar<bool>(true));
  ws.SetTensor("i", Tensor::Scalar<int32_t>(1));
  absl::Status s = RunOp(MakeOp("And", {"b", "i"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            "op And(b, i -> c): input 'i' is int32; And takes bool tensors");
  s = RunOp(MakeOp("Not", {"i"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            "op Not(i -> c): input 'i' is int32; Not takes bool tensors");
}

TEST(LogicOpsTest, MismatchedShapesAreAnError) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<bool>({true, false}));
  ws.SetTensor("b", Tensor::FromVector<bool>({true, false, true}));
  absl::Status s = RunOp(MakeOp("Or", {"a", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace jobgraph

#include <cstdint>
#include <limits>
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

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(MathOpsTest, ElementwiseEveryType) {
  Workspace ws;
  ws.SetTensor("i32a", Tensor::FromVector<int32_t>({1, 2, 3}));
  ws.SetTensor("i32b", Tensor::FromVector<int32_t>({10, 20, 30}));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"i32a", "i32b"}, {"c"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "c").dtype(), INT32);
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "c")), ElementsAre(11, 22, 33));

  ws.SetTensor("i64a", Tensor::FromVector<int64_t>({7, -7}));
  ws.SetTensor("i64b", Tensor::FromVector<int64_t>({2, 2}));
  ASSERT_TRUE(RunOp(MakeOp("Sub", {"i64a", "i64b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "c")), ElementsAre(5, -9));
  ASSERT_TRUE(RunOp(MakeOp("Mul", {"i64a", "i64b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "c")), ElementsAre(14, -14));
  // Integer division truncates toward zero, as in C++ and Caffe2.
  ASSERT_TRUE(RunOp(MakeOp("Div", {"i64a", "i64b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "c")), ElementsAre(3, -3));

  ws.SetTensor("fa", Tensor::FromVector<float>({1.5f, 3.0f}));
  ws.SetTensor("fb", Tensor::FromVector<float>({0.5f, 4.0f}));
  ASSERT_TRUE(RunOp(MakeOp("Div", {"fa", "fb"}, {"c"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "c").dtype(), FLOAT);
  EXPECT_THAT(Values<float>(TensorOf(ws, "c")), ElementsAre(3.0f, 0.75f));

  ws.SetTensor("da", Tensor::FromVector<double>({0.25, 1.0}));
  ws.SetTensor("db", Tensor::FromVector<double>({0.5, -2.0}));
  ASSERT_TRUE(RunOp(MakeOp("Mul", {"da", "db"}, {"c"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "c").dtype(), DOUBLE);
  EXPECT_THAT(Values<double>(TensorOf(ws, "c")), ElementsAre(0.125, -2.0));

  ws.SetTensor("ua", Tensor::FromVector<uint8_t>({250, 3}));
  ws.SetTensor("ub", Tensor::FromVector<uint8_t>({10, 4}));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"ua", "ub"}, {"c"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "c").dtype(), UINT8);
  EXPECT_THAT(Values<uint8_t>(TensorOf(ws, "c")), ElementsAre(4, 7));
}

TEST(MathOpsTest, FloatDivisionByZeroIsInfinity) {
  Workspace ws;
  ws.SetTensor("a", Tensor::Scalar<double>(1.0));
  ws.SetTensor("b", Tensor::Scalar<double>(0.0));
  ASSERT_TRUE(RunOp(MakeOp("Div", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "c").scalar<double>(),
            std::numeric_limits<double>::infinity());
}

TEST(MathOpsTest, BroadcastsScalarOnTheRight) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2}));
  ws.SetTensor("b", Tensor::Scalar<int64_t>(10));
  ASSERT_TRUE(RunOp(MakeOp("Mul", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(2, 2));
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "c")), ElementsAre(10, 20, 30, 40));
}

TEST(MathOpsTest, BroadcastsShapeOneOnTheLeft) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<float>({10}));
  ws.SetTensor("b", Tensor::FromVector<float>({1, 2, 4}));
  ASSERT_TRUE(RunOp(MakeOp("Sub", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(3));
  EXPECT_THAT(Values<float>(TensorOf(ws, "c")), ElementsAre(9, 8, 6));
  ASSERT_TRUE(RunOp(MakeOp("Div", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<float>(TensorOf(ws, "c")), ElementsAre(10, 5, 2.5));
}

TEST(MathOpsTest, SingleElementOperandsTakeTheLongerShape) {
  Workspace ws;
  ws.SetTensor("scalar", Tensor::Scalar<int32_t>(2));
  ws.SetTensor("one", Tensor::FromVector<int32_t>({3}));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"scalar", "one"}, {"c"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(1));
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "c")), ElementsAre(5));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"one", "scalar"}, {"d"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "d").shape(), ElementsAre(1));
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "d")), ElementsAre(5));
}

TEST(MathOpsTest, EmptyTensorPlusScalarIsEmpty) {
  Workspace ws;
  ws.SetTensor("a", Tensor(INT64, {0}));
  ws.SetTensor("b", Tensor::Scalar<int64_t>(1));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"a", "b"}, {"c"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(0));
}

// The checkpoint test's pipeline: total = Const([100]); total += val.
TEST(MathOpsTest, AddIntoFirstInputAccumulates) {
  Workspace ws;
  ws.SetTensor("total", Tensor::FromVector<int64_t>({100}));
  ws.SetTensor("val", Tensor::FromVector<int64_t>({1}));
  auto op = CreateOp(MakeOp("Add", {"total", "val"}, {"total"}), &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  const void* storage = TensorOf(ws, "total").raw_data();
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "total")), ElementsAre(101));
  ws.SetTensor("val", Tensor::FromVector<int64_t>({2}));
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_THAT(TensorOf(ws, "total").shape(), ElementsAre(1));
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "total")), ElementsAre(103));
  EXPECT_EQ(TensorOf(ws, "total").raw_data(), storage)
      << "in-place Add reallocated its output";
}

TEST(MathOpsTest, OutputMayBeTheSecondInput) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int32_t>({10, 20}));
  ws.SetTensor("b", Tensor::FromVector<int32_t>({1, 2}));
  ASSERT_TRUE(RunOp(MakeOp("Sub", {"a", "b"}, {"b"}), &ws).ok());
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "b")), ElementsAre(9, 18));
}

TEST(MathOpsTest, OutputMayBeTheBroadcastInput) {
  // The result has the other input's shape, so the aliased scalar input must
  // be read before its storage is replaced.
  Workspace ws;
  ws.SetTensor("s", Tensor::Scalar<double>(1.5));
  ws.SetTensor("v", Tensor::FromVector<double>({1, 2, 3}));
  ASSERT_TRUE(RunOp(MakeOp("Mul", {"s", "v"}, {"s"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "s").shape(), ElementsAre(3));
  EXPECT_THAT(Values<double>(TensorOf(ws, "s")), ElementsAre(1.5, 3.0, 4.5));
  EXPECT_THAT(Values<double>(TensorOf(ws, "v")), ElementsAre(1, 2, 3));
}

TEST(MathOpsTest, BothInputsTheSameBlob) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({3, 4}));
  ASSERT_TRUE(RunOp(MakeOp("Mul", {"x", "x"}, {"x"}), &ws).ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "x")), ElementsAre(9, 16));
}

TEST(MathOpsTest, ReusesOutputStorage) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<float>({1, 2}));
  ws.SetTensor("b", Tensor::FromVector<float>({3, 4}));
  auto op = CreateOp(MakeOp("Add", {"a", "b"}, {"c"}), &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE((*op)->Run().ok());
  const void* storage = TensorOf(ws, "c").raw_data();
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_EQ(TensorOf(ws, "c").raw_data(), storage);
  EXPECT_THAT(Values<float>(TensorOf(ws, "c")), ElementsAre(4, 6));
}

TEST(MathOpsTest, SignedOverflowWraps) {
  Workspace ws;
  const int32_t max = std::numeric_limits<int32_t>::max();
  const int32_t min = std::numeric_limits<int32_t>::min();
  ws.SetTensor("a", Tensor::FromVector<int32_t>({max, min}));
  ws.SetTensor("one", Tensor::Scalar<int32_t>(1));
  ws.SetTensor("minus_one", Tensor::Scalar<int32_t>(-1));
  ASSERT_TRUE(RunOp(MakeOp("Add", {"a", "one"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "c")), ElementsAre(min, min + 1));
  // min / -1 would trap on x86; it wraps to min like min * -1.
  ASSERT_TRUE(RunOp(MakeOp("Div", {"a", "minus_one"}, {"c"}), &ws).ok());
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "c")), ElementsAre(-max, min));
}

TEST(MathOpsTest, IntegerDivisionByZeroIsAnErrorAndLeavesOutputAlone) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int64_t>({6, 8}));
  ws.SetTensor("b", Tensor::FromVector<int64_t>({3, 0}));
  absl::Status s = RunOp(MakeOp("Div", {"a", "b"}, {"a"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            "op Div(a, b -> a): integer division by zero: element 1 of 'b' "
            "is 0");
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "a")), ElementsAre(6, 8));

  ws.SetTensor("zero", Tensor::Scalar<uint8_t>(0));
  ws.SetTensor("u", Tensor::FromVector<uint8_t>({1}));
  s = RunOp(MakeOp("Div", {"u", "zero"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(MathOpsTest, MismatchedTypesAreAnError) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int64_t>({1}));
  ws.SetTensor("b", Tensor::FromVector<float>({1}));
  absl::Status s = RunOp(MakeOp("Add", {"a", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            "op Add(a, b -> c): inputs must have the same type, but 'a' is "
            "int64 and 'b' is float");
}

TEST(MathOpsTest, MismatchedShapesAreAnError) {
  Workspace ws;
  ws.SetTensor("a", Tensor(FLOAT, {2, 3}));
  ws.SetTensor("b", Tensor(FLOAT, {3}));
  absl::Status s = RunOp(MakeOp("Mul", {"a", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              StartsWith("op Mul(a, b -> c): shapes [2,3] of 'a' and [3] of "
                         "'b' do not match"));
}

TEST(MathOpsTest, UnsupportedTypesAreAnError) {
  Workspace ws;
  ws.SetTensor("s", Tensor::FromVector<std::string>({"x"}));
  ws.SetTensor("b", Tensor::FromVector<bool>({true}));
  absl::Status s = RunOp(MakeOp("Add", {"s", "s"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Add does not support string tensors"));
  s = RunOp(MakeOp("Mul", {"b", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Mul does not support bool tensors"));
}

TEST(MathOpsTest, NonTensorInputIsFailedPrecondition) {
  Workspace ws;
  ws.SetTensor("a", Tensor::Scalar<int64_t>(1));
  ws.CreateBlob("text")->Reset(std::make_unique<std::string>("hi"));
  absl::Status s = RunOp(MakeOp("Add", {"a", "text"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'text'"));
}

TEST(MathOpsTest, WrongArityFailsAtCreation) {
  Workspace ws;
  ws.SetTensor("a", Tensor::Scalar<int64_t>(1));
  auto op = CreateOp(MakeOp("Add", {"a"}, {"c"}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(op.status().message()),
            "op Add(a -> c): expects 2 input(s), got 1");
}

}  // namespace
}  // namespace jobgraph

#include <cstdint>
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

using ::jobgraph::ops_test::DoubleArg;
using ::jobgraph::ops_test::DoublesArg;
using ::jobgraph::ops_test::FloatArg;
using ::jobgraph::ops_test::FloatsArg;
using ::jobgraph::ops_test::IntArg;
using ::jobgraph::ops_test::IntsArg;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::StringArg;
using ::jobgraph::ops_test::StringsArg;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConstantFillTest, DefaultsToFloatZeroScalar) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"y"}), &ws).ok());
  const Tensor& y = TensorOf(ws, "y");
  EXPECT_EQ(y.dtype(), FLOAT);
  EXPECT_THAT(y.shape(), ElementsAre());
  EXPECT_THAT(Values<float>(y), ElementsAre(0.0f));
}

TEST(ConstantFillTest, FillsEveryDtype) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"f"},
                           {IntsArg("shape", {2, 2}), FloatArg("value", 1.5f)}),
                    &ws)
                  .ok());
  EXPECT_THAT(TensorOf(ws, "f").shape(), ElementsAre(2, 2));
  EXPECT_THAT(Values<float>(TensorOf(ws, "f")),
              ElementsAre(1.5f, 1.5f, 1.5f, 1.5f));

  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"d"},
                           {IntsArg("shape", {2}), IntArg("dtype", DOUBLE),
                            DoubleArg("value", 0.1)}),
                    &ws)
                  .ok());
  EXPECT_THAT(Values<double>(TensorOf(ws, "d")), ElementsAre(0.1, 0.1));

  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"i32"},
                           {IntsArg("shape", {3}), IntArg("dtype", INT32),
                            IntArg("value", -7)}),
                    &ws)
                  .ok());
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "i32")), ElementsAre(-7, -7, -7));

  ASSERT_TRUE(
      RunOp(MakeOp("ConstantFill", {}, {"i64"},
                   {IntArg("dtype", INT64), IntArg("value", int64_t{1} << 40)}),
            &ws)
          .ok());
  EXPECT_EQ(TensorOf(ws, "i64").dtype(), INT64);
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "i64")),
              ElementsAre(int64_t{1} << 40));

  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"b"},
                           {IntArg("dtype", BOOL), IntArg("value", 1)}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "b").dtype(), BOOL);
  EXPECT_THAT(Values<bool>(TensorOf(ws, "b")), ElementsAre(true));

  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"u8"},
                           {IntsArg("shape", {2}), IntArg("dtype", UINT8),
                            IntArg("value", 255)}),
                    &ws)
                  .ok());
  EXPECT_THAT(Values<uint8_t>(TensorOf(ws, "u8")), ElementsAre(255, 255));

  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"s"},
                           {IntsArg("shape", {2}), IntArg("dtype", STRING),
                            StringArg("value", "abc")}),
                    &ws)
                  .ok());
  EXPECT_THAT(Values<std::string>(TensorOf(ws, "s")),
              ElementsAre("abc", "abc"));
}

TEST(ConstantFillTest, IntegralFloatValueFillsIntTensor) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {}, {"y"},
                           {IntArg("dtype", INT64), FloatArg("value", 3.0f)}),
                    &ws)
                  .ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "y")), ElementsAre(3));
}

TEST(ConstantFillTest, TakesShapeFromInput) {
  Workspace ws;
  ws.SetTensor("x", Tensor(DOUBLE, {2, 3}));
  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {"x"}, {"y"},
                           {IntArg("dtype", INT32), IntArg("value", 4)}),
                    &ws)
                  .ok());
  const Tensor& y = TensorOf(ws, "y");
  EXPECT_EQ(y.dtype(), INT32);
  EXPECT_THAT(y.shape(), ElementsAre(2, 3));
  EXPECT_THAT(Values<int32_t>(y), ElementsAre(4, 4, 4, 4, 4, 4));
}

TEST(ConstantFillTest, InPlaceChangesTypeKeepingShape) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<float>({1, 2}));
  ASSERT_TRUE(RunOp(MakeOp("ConstantFill", {"x"}, {"x"},
                           {IntArg("dtype", INT64), IntArg("value", 9)}),
                    &ws)
                  .ok());
  EXPECT_THAT(TensorOf(ws, "x").shape(), ElementsAre(2));
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "x")), ElementsAre(9, 9));
}

TEST(ConstantFillTest, RerunRestoresValueAfterInPlaceChange) {
  Workspace ws;
  auto op =
      ops_test::CreateOp(MakeOp("ConstantFill", {}, {"y"},
                                {IntArg("dtype", INT64), IntArg("value", 5)}),
                         &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE((*op)->Run().ok());
  Tensor* y = ws.GetBlob("y")->GetMutable<Tensor>();
  const void* storage = y->raw_data();
  y->mutable_data<int64_t>()[0] = 100;
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "y")), ElementsAre(5));
  EXPECT_EQ(TensorOf(ws, "y").raw_data(), storage) << "storage was not reused";
}

TEST(ConstantFillTest, Errors) {
  Workspace ws;
  ws.SetTensor("x", Tensor(FLOAT, {1}));
  struct Case {
    OperatorDef def;
    absl::StatusCode code;
    std::string substr;
  };
  const std::vector<Case> cases = {
      {MakeOp("ConstantFill", {}, {"y"}, {IntsArg("shape", {2, -1})}),
       absl::StatusCode::kInvalidArgument, "negative dimension"},
      {MakeOp("ConstantFill", {}, {"y"}, {IntArg("dtype", FLOAT16)}),
       absl::StatusCode::kInvalidArgument, "unsupported dtype"},
      {MakeOp("ConstantFill", {}, {"y"},
              {IntArg("dtype", INT32), IntArg("value", int64_t{1} << 31)}),
       absl::StatusCode::kInvalidArgument, "does not fit in int32"},
      {MakeOp("ConstantFill", {}, {"y"},
              {IntArg("dtype", UINT8), IntArg("value", -1)}),
       absl::StatusCode::kInvalidArgument, "does not fit in uint8"},
      {MakeOp("ConstantFill", {}, {"y"},
              {IntArg("dtype", INT64), FloatArg("value", 1.5f)}),
       absl::StatusCode::kInvalidArgument, "not an integer"},
      {MakeOp("ConstantFill", {"x"}, {"y"}, {IntsArg("shape", {1})}),
       absl::StatusCode::kInvalidArgument, "not both"},
      {MakeOp("ConstantFill", {"x"}, {"y"}, {IntArg("input_as_shape", 1)}),
       absl::StatusCode::kUnimplemented, "input_as_shape"},
      {MakeOp("ConstantFill", {"x", "x"}, {"y"}),
       absl::StatusCode::kInvalidArgument, "expects 0 to 1 input(s), got 2"},
      {MakeOp("ConstantFill", {}, {}), absl::StatusCode::kInvalidArgument,
       "expects 1 output(s), got 0"},
  };
  for (const Case& c : cases) {
    absl::Status s = RunOp(c.def, &ws);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(std::string(s.message()), StartsWith("op ConstantFill(")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.substr)) << s;
  }
}

TEST(GivenTensorFillTest, EveryDtype) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("GivenTensorFill", {}, {"f"},
                           {FloatsArg("values", {1.5f, -2.0f})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "f").dtype(), FLOAT);
  EXPECT_THAT(TensorOf(ws, "f").shape(), ElementsAre(2));
  EXPECT_THAT(Values<float>(TensorOf(ws, "f")), ElementsAre(1.5f, -2.0f));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorDoubleFill", {}, {"d"},
                           {DoublesArg("values", {0.1, 0.2})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "d").dtype(), DOUBLE);
  EXPECT_THAT(Values<double>(TensorOf(ws, "d")), ElementsAre(0.1, 0.2));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorIntFill", {}, {"i32"},
                           {IntsArg("values", {-1, 2147483647})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "i32").dtype(), INT32);
  EXPECT_THAT(Values<int32_t>(TensorOf(ws, "i32")),
              ElementsAre(-1, 2147483647));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorInt64Fill", {}, {"i64"},
                           {IntsArg("values", {100, int64_t{1} << 50})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "i64").dtype(), INT64);
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "i64")),
              ElementsAre(100, int64_t{1} << 50));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorBoolFill", {}, {"b"},
                           {IntsArg("values", {1, 0, 1})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "b").dtype(), BOOL);
  EXPECT_THAT(Values<bool>(TensorOf(ws, "b")), ElementsAre(true, false, true));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorUInt8Fill", {}, {"u8"},
                           {IntsArg("values", {0, 255})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "u8").dtype(), UINT8);
  EXPECT_THAT(Values<uint8_t>(TensorOf(ws, "u8")), ElementsAre(0, 255));

  ASSERT_TRUE(RunOp(MakeOp("GivenTensorStringFill", {}, {"s"},
                           {StringsArg("values", {"a", "", "ccc"})}),
                    &ws)
                  .ok());
  EXPECT_EQ(TensorOf(ws, "s").dtype(), STRING);
  EXPECT_THAT(Values<std::string>(TensorOf(ws, "s")),
              ElementsAre("a", "", "ccc"));
}

TEST(GivenTensorFillTest, ExplicitShape) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("GivenTensorInt64Fill", {}, {"y"},
                           {IntsArg("shape", {2, 3}),
                            IntsArg("values", {0, 1, 2, 3, 4, 5})}),
                    &ws)
                  .ok());
  EXPECT_THAT(TensorOf(ws, "y").shape(), ElementsAre(2, 3));
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "y")),
              ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(GivenTensorFillTest, EmptyShapeArgumentMeansScalar) {
  // Net.Const(5) emits shape=() and values=[5].
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("GivenTensorInt64Fill", {}, {"y"},
                           {IntsArg("shape", {}), IntsArg("values", {5})}),
                    &ws)
                  .ok());
  EXPECT_THAT(TensorOf(ws, "y").shape(), ElementsAre());
  EXPECT_EQ(TensorOf(ws, "y").scalar<int64_t>(), 5);
}

TEST(GivenTensorFillTest, NoValuesIsEmptyTensor) {
  Workspace ws;
  ASSERT_TRUE(RunOp(MakeOp("GivenTensorFill", {}, {"y"}), &ws).ok());
  EXPECT_THAT(TensorOf(ws, "y").shape(), ElementsAre(0));
}

TEST(GivenTensorFillTest, RerunRestoresValues) {
  Workspace ws;
  auto op = ops_test::CreateOp(
      MakeOp("GivenTensorInt64Fill", {}, {"total"}, {IntsArg("values", {100})}),
      &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE((*op)->Run().ok());
  ws.GetBlob("total")->GetMutable<Tensor>()->mutable_data<int64_t>()[0] = 1;
  ASSERT_TRUE((*op)->Run().ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "total")), ElementsAre(100));
}

TEST(GivenTensorFillTest, Errors) {
  Workspace ws;
  struct Case {
    OperatorDef def;
    std::string substr;
  };
  const std::vector<Case> cases = {
      {MakeOp("GivenTensorFill", {}, {"y"},
              {IntsArg("shape", {2, 2}), FloatsArg("values", {1, 2, 3})}),
       "shape [2,2] holds 4 element(s) but 'values' has 3"},
      {MakeOp("GivenTensorStringFill", {}, {"y"},
              {IntsArg("shape", {}), StringsArg("values", {})}),
       "shape [] holds 1 element(s) but 'values' has 0"},
      {MakeOp("GivenTensorIntFill", {}, {"y"},
              {IntsArg("values", {0, int64_t{1} << 32})}),
       "values[1] 4294967296 does not fit in int32"},
      {MakeOp("GivenTensorUInt8Fill", {}, {"y"}, {IntsArg("values", {256})}),
       "values[0] 256 does not fit in uint8"},
      {MakeOp("GivenTensorBoolFill", {}, {"y"}, {IntsArg("values", {1, 2})}),
       "values[1] is 2; a bool must be 0 or 1"},
      {MakeOp("GivenTensorInt64Fill", {}, {"y"},
              {IntsArg("shape", {-1}), IntsArg("values", {1})}),
       "negative dimension"},
  };
  for (const Case& c : cases) {
    absl::Status s = RunOp(c.def, &ws);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()),
                StartsWith("op " + c.def.type() + "("))
        << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.substr)) << s;
  }
}

}  // namespace
}  // namespace jobgraph

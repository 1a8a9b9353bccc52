#include "engine/operator.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/counter.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::DoubleArg;
using ::jobgraph::ops_test::IntArg;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::NoOp;
using ::jobgraph::ops_test::StringArg;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;

TEST(PrepareOutputTest, KeepsStorageWhenTypeAndShapeMatch) {
  Tensor t(INT64, {2, 3});
  const void* storage = t.raw_data();
  PrepareOutput(&t, INT64, {2, 3});
  EXPECT_EQ(t.raw_data(), storage);
  PrepareOutput(&t, INT64, {3, 2});
  EXPECT_THAT(t.shape(), ElementsAre(3, 2));
  PrepareOutput(&t, FLOAT, {3, 2});
  EXPECT_EQ(t.dtype(), FLOAT);
}

TEST(PrepareOutputTest, ShapeMayPointIntoTheOutput) {
  Tensor t(INT64, {4, 5});
  PrepareOutput(&t, BOOL, t.shape());
  EXPECT_EQ(t.dtype(), BOOL);
  EXPECT_THAT(t.shape(), ElementsAre(4, 5));
}

TEST(SetScalarTest, MakesScalar) {
  Tensor t;
  SetScalar<int64_t>(&t, 5);
  EXPECT_THAT(t.shape(), ElementsAre());
  EXPECT_EQ(t.scalar<int64_t>(), 5);
  const void* storage = t.raw_data();
  SetScalar<int64_t>(&t, 6);
  EXPECT_EQ(t.raw_data(), storage);
  EXPECT_EQ(t.scalar<int64_t>(), 6);
}

TEST(CopyTensorTest, CopiesEveryKind) {
  Tensor dst;
  CopyTensor(Tensor::FromVector<std::string>({"a", "b"}), &dst);
  EXPECT_THAT(Values<std::string>(dst), ElementsAre("a", "b"));
  CopyTensor(Tensor::FromVector<double>({1.5}), &dst);
  EXPECT_THAT(Values<double>(dst), ElementsAre(1.5));
  const void* storage = dst.raw_data();
  CopyTensor(Tensor::FromVector<double>({2.5}), &dst);
  EXPECT_EQ(dst.raw_data(), storage);
  EXPECT_THAT(Values<double>(dst), ElementsAre(2.5));
  CopyTensor(Tensor(INT32, {0}), &dst);
  EXPECT_EQ(dst.numel(), 0);
  CopyTensor(dst, &dst);
  EXPECT_EQ(dst.dtype(), INT32);
}

TEST(ArityTest, Messages) {
  Workspace ws;
  ws.SetTensor("a", Tensor());
  NoOp op(MakeOp("NoOp", {"a"}, {"x", "y"}), &ws);
  EXPECT_TRUE(op.CheckArity(1, 1, 0, 2).ok());
  absl::Status s = op.CheckArity(2, 3, 0, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            "op NoOp(a -> x, y): expects 2 to 3 input(s), got 1");
  s = op.CheckArity(1, 1, 1, 1);
  EXPECT_EQ(std::string(s.message()),
            "op NoOp(a -> x, y): expects 1 output(s), got 2");
  EXPECT_TRUE(
      op.CheckArity(0, OperatorBase::kUnbounded, 2, OperatorBase::kUnbounded)
          .ok());
  EXPECT_EQ(
      std::string(op.CheckArity(0, 1, 3, OperatorBase::kUnbounded).message()),
      "op NoOp(a -> x, y): expects at least 3 output(s), got 2");
}

TEST(ArityTest, InPlace) {
  Workspace ws;
  ws.SetTensor("a", Tensor());
  ws.SetTensor("b", Tensor());
  NoOp op(MakeOp("NoOp", {"a", "b"}, {"b"}), &ws);
  EXPECT_TRUE(op.CheckInPlace(0, 1).ok());
  EXPECT_EQ(std::string(op.CheckInPlace(0, 0).message()),
            "op NoOp(a, b -> b): output 0 ('b') must be input 0 ('a'): the "
            "op updates it in place");
}

TEST(ArgTest, RequiredAndRangeChecked) {
  Workspace ws;
  NoOp op(MakeOp("NoOp", {}, {},
                 {StringArg("path", "/tmp/x"), IntArg("n", 0),
                  DoubleArg("rate", -0.5), IntArg("big", 7)}),
          &ws);
  EXPECT_EQ(*op.GetRequiredStringArg("path", "the file"), "/tmp/x");
  absl::StatusOr<std::string> missing = op.GetRequiredStringArg("db", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(missing.status().message()),
            "op NoOp( -> ): argument 'db' is required");
  EXPECT_EQ(std::string(op.GetRequiredStringArg("db", "the database path")
                            .status()
                            .message()),
            "op NoOp( -> ): argument 'db' (the database path) is required");

  EXPECT_EQ(*op.GetPositiveArg<int64_t>("big", 1), 7);
  EXPECT_EQ(*op.GetPositiveArg<int64_t>("absent", 3), 3);
  EXPECT_EQ(std::string(op.GetPositiveArg<int64_t>("n", 1).status().message()),
            "op NoOp( -> ): argument 'n' must be positive, got 0");
  EXPECT_FALSE(op.GetPositiveArg<double>("rate", 1).ok());
  EXPECT_EQ(*op.GetNonNegativeArg<int64_t>("n", 1), 0);
  EXPECT_EQ(
      std::string(op.GetNonNegativeArg<double>("rate", 1).status().message()),
      "op NoOp( -> ): rate must be >= 0, got -0.5");
}

TEST(InputTest, TypedInputsNameTheBlob) {
  Workspace ws;
  ws.SetTensor("f", Tensor(FLOAT, {2, 3}));
  ws.SetTensor("b", Tensor::FromVector<bool>({true}));
  ws.CreateBlob("c")->Reset(std::make_unique<Counter>(1));
  NoOp op(MakeOp("NoOp", {"f", "b", "c"}, {}), &ws);
  EXPECT_TRUE(op.Input(0, FLOAT, 2).ok());
  EXPECT_TRUE(op.Input(0, FLOAT).ok());
  absl::StatusOr<const Tensor*> t = op.Input(0, FLOAT, 1);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(t.status().message()),
            "op NoOp(f, b, c -> ): input 'f' must be a 1-D tensor of float, "
            "got float[2,3] {0, 0, 0, 0, ... (6 in all)}");
  EXPECT_TRUE(op.ScalarInput(1, BOOL).ok());
  EXPECT_EQ(op.ScalarInput(0, FLOAT).status().code(),
            absl::StatusCode::kInvalidArgument);
  t = op.Input(2);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(t.status().message()),
            "op NoOp(f, b, c -> ): input 'c' holds "
            "std::unique_ptr<Counter<int64_t>>, not a Tensor");
  EXPECT_TRUE(op.InputAs<Counter>(2, "counter", "CreateCounter").ok());
  absl::StatusOr<Counter*> c = op.InputAs<Counter>(0, "counter", "X");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(c.status().message()),
            "op NoOp(f, b, c -> ): input 'f' holds Tensor, not a counter "
            "(create it with X)");
}

TEST(ErrorTest, AnnotateKeepsTheCode) {
  Workspace ws;
  NoOp op(MakeOp("NoOp", {}, {"y"}), &ws);
  EXPECT_TRUE(op.Annotate(absl::OkStatus()).ok());
  EXPECT_EQ(op.Annotate(absl::NotFoundError("gone")),
            absl::NotFoundError("op NoOp( -> y): gone"));
  EXPECT_EQ(op.Annotate(absl::DataLossError("bad"), "cursor 'c'"),
            absl::DataLossError("op NoOp( -> y): cursor 'c': bad"));
}

}  // namespace
}  // namespace jobgraph

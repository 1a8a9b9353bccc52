#include "engine/ops/op_util.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/operator.h"
#include "engine/ops/test_util.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace ops_internal {
namespace {

using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;

// An op that is never registered, only constructed, to give the helpers an
// OperatorBase for messages.
class NoOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override { return absl::OkStatus(); }
};

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

TEST(BroadcastShapesTest, Rules) {
  Workspace ws;
  ws.SetTensor("a", Tensor());
  ws.SetTensor("b", Tensor());
  NoOp op(MakeOp("NoOp", {"a", "b"}, {}), &ws);
  const Tensor v23(FLOAT, {2, 3});
  const Tensor v3(FLOAT, {3});
  const Tensor scalar(FLOAT, {});
  const Tensor one(FLOAT, {1});
  const Tensor one11(FLOAT, {1, 1});

  absl::StatusOr<Broadcast> bc = BroadcastShapes(op, v23, v23);
  ASSERT_TRUE(bc.ok());
  EXPECT_FALSE(bc->a_is_scalar);
  EXPECT_FALSE(bc->b_is_scalar);
  EXPECT_THAT(bc->shape, ElementsAre(2, 3));

  bc = BroadcastShapes(op, v23, scalar);
  ASSERT_TRUE(bc.ok());
  EXPECT_TRUE(bc->b_is_scalar);
  EXPECT_THAT(bc->shape, ElementsAre(2, 3));

  bc = BroadcastShapes(op, one, v3);
  ASSERT_TRUE(bc.ok());
  EXPECT_TRUE(bc->a_is_scalar);
  EXPECT_THAT(bc->shape, ElementsAre(3));

  bc = BroadcastShapes(op, scalar, one11);
  ASSERT_TRUE(bc.ok());
  EXPECT_TRUE(bc->a_is_scalar);
  EXPECT_THAT(bc->shape, ElementsAre(1, 1));

  bc = BroadcastShapes(op, one, scalar);
  ASSERT_TRUE(bc.ok());
  EXPECT_TRUE(bc->b_is_scalar);
  EXPECT_THAT(bc->shape, ElementsAre(1));

  bc = BroadcastShapes(op, v23, v3);
  EXPECT_EQ(bc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bc.status().message()),
            "op NoOp(a, b -> ): shapes [2,3] of 'a' and [3] of 'b' do not "
            "match, and neither has a single element to broadcast");
}

TEST(ArityTest, Messages) {
  Workspace ws;
  ws.SetTensor("a", Tensor());
  NoOp op(MakeOp("NoOp", {"a"}, {"x", "y"}), &ws);
  EXPECT_TRUE(CheckNumInputs(op, 1, 1).ok());
  EXPECT_TRUE(CheckNumOutputs(op, 0, 2).ok());
  absl::Status s = CheckNumInputs(op, 2, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            "op NoOp(a -> x, y): expects 2 to 3 input(s), got 1");
  s = CheckNumOutputs(op, 1, 1);
  EXPECT_EQ(std::string(s.message()),
            "op NoOp(a -> x, y): expects 1 output(s), got 2");
}

}  // namespace
}  // namespace ops_internal
}  // namespace jobgraph

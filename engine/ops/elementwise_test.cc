#include "engine/ops/elementwise.h"

#include <string>

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
using ::jobgraph::ops_test::NoOp;
using ::testing::ElementsAre;

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

}  // namespace
}  // namespace ops_internal
}  // namespace jobgraph

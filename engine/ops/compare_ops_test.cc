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

using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Runs `type`(a, b -> c) and returns c's elements.
std::vector<bool> Compare(Workspace& ws, const std::string& type) {
  absl::Status s = RunOp(MakeOp(type, {"a", "b"}, {"c"}), &ws);
  EXPECT_TRUE(s.ok()) << s;
  const Tensor& c = TensorOf(ws, "c");
  EXPECT_EQ(c.dtype(), BOOL);
  return Values<bool>(c);
}

TEST(CompareOpsTest, AllComparisonsElementwise) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int64_t>({1, 2, 3}));
  ws.SetTensor("b", Tensor::FromVector<int64_t>({2, 2, 2}));
  EXPECT_THAT(Compare(ws, "LT"), ElementsAre(true, false, false));
  EXPECT_THAT(Compare(ws, "LE"), ElementsAre(true, true, false));
  EXPECT_THAT(Compare(ws, "GT"), ElementsAre(false, false, true));
  EXPECT_THAT(Compare(ws, "GE"), ElementsAre(false, true, true));
  EXPECT_THAT(Compare(ws, "EQ"), ElementsAre(false, true, false));
  EXPECT_THAT(Compare(ws, "NE"), ElementsAre(true, false, true));
}

TEST(CompareOpsTest, EveryArithmeticType) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<uint8_t>({1, 200}));
  ws.SetTensor("b", Tensor::FromVector<uint8_t>({2, 100}));
  EXPECT_THAT(Compare(ws, "LT"), ElementsAre(true, false));
  ws.SetTensor("a", Tensor::FromVector<int32_t>({-1, 5}));
  ws.SetTensor("b", Tensor::FromVector<int32_t>({-1, 4}));
  EXPECT_THAT(Compare(ws, "GE"), ElementsAre(true, true));
  ws.SetTensor("a", Tensor::FromVector<float>({0.5f, 1.5f}));
  ws.SetTensor("b", Tensor::FromVector<float>({1.0f, 1.0f}));
  EXPECT_THAT(Compare(ws, "GT"), ElementsAre(false, true));
  ws.SetTensor("a", Tensor::FromVector<double>({0.1, 0.2}));
  ws.SetTensor("b", Tensor::FromVector<double>({0.1, 0.3}));
  EXPECT_THAT(Compare(ws, "EQ"), ElementsAre(true, false));
}

TEST(CompareOpsTest, BroadcastsBothWays) {
  // NetBuilder's loop: stop_if(iter >= iters), both scalars.
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<int64_t>({1, 5, 9}));
  ws.SetTensor("b", Tensor::Scalar<int64_t>(5));
  EXPECT_THAT(Compare(ws, "GE"), ElementsAre(false, true, true));
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(3));
  ws.SetTensor("a", Tensor::FromVector<int64_t>({5}));
  ws.SetTensor("b", Tensor::FromVector<int64_t>({1, 5, 9}));
  EXPECT_THAT(Compare(ws, "GE"), ElementsAre(true, true, false));
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre(3));
}

TEST(CompareOpsTest, ScalarsGiveScalar) {
  Workspace ws;
  ws.SetTensor("a", Tensor::Scalar<int64_t>(3));
  ws.SetTensor("b", Tensor::Scalar<int64_t>(3));
  EXPECT_THAT(Compare(ws, "GE"), ElementsAre(true));
  EXPECT_THAT(TensorOf(ws, "c").shape(), ElementsAre());
}

TEST(CompareOpsTest, EqualityOnStringsAndBools) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<std::string>({"x", "yy", ""}));
  ws.SetTensor("b", Tensor::FromVector<std::string>({"x", "y", ""}));
  EXPECT_THAT(Compare(ws, "EQ"), ElementsAre(true, false, true));
  EXPECT_THAT(Compare(ws, "NE"), ElementsAre(false, true, false));
  ws.SetTensor("b", Tensor::Scalar<std::string>("yy"));
  EXPECT_THAT(Compare(ws, "EQ"), ElementsAre(false, true, false));

  ws.SetTensor("a", Tensor::FromVector<bool>({true, false}));
  ws.SetTensor("b", Tensor::Scalar<bool>(false));
  EXPECT_THAT(Compare(ws, "EQ"), ElementsAre(false, true));
}

TEST(CompareOpsTest, OrderingOfStringsOrBoolsIsAnError) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<std::string>({"x"}));
  ws.SetTensor("b", Tensor::FromVector<std::string>({"y"}));
  absl::Status s = RunOp(MakeOp("LT", {"a", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()),
            "op LT(a, b -> c): LT does not support string tensors");
  ws.SetTensor("a", Tensor::FromVector<bool>({true}));
  ws.SetTensor("b", Tensor::FromVector<bool>({true}));
  s = RunOp(MakeOp("GE", {"a", "b"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(CompareOpsTest, OutputMayBeAnInputOfAnotherType) {
  Workspace ws;
  ws.SetTensor("a", Tensor::FromVector<double>({1.0, 2.0}));
  ws.SetTensor("b", Tensor::Scalar<double>(1.5));
  ASSERT_TRUE(RunOp(MakeOp("LT", {"a", "b"}, {"a"}), &ws).ok());
  EXPECT_EQ(TensorOf(ws, "a").dtype(), BOOL);
  EXPECT_THAT(Values<bool>(TensorOf(ws, "a")), ElementsAre(true, false));
}

TEST(CompareOpsTest, Errors) {
  Workspace ws;
  ws.SetTensor("i", Tensor::FromVector<int64_t>({1, 2}));
  ws.SetTensor("f", Tensor::FromVector<float>({1, 2}));
  ws.SetTensor("i3", Tensor::FromVector<int64_t>({1, 2, 3}));
  absl::Status s = RunOp(MakeOp("EQ", {"i", "f"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("'i' is int64 and 'f' is float"));
  s = RunOp(MakeOp("GT", {"i", "i3"}, {"c"}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("shapes [2] of 'i' and [3] of 'i3' do not match"));
}

}  // namespace
}  // namespace jobgraph

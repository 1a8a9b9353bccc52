#include "engine/tensor.h"

#include <cmath>
#include <limits>

#include "engine/blob.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

TEST(Tensor, ScalarHasEmptyShapeAndOneElement) {
  Tensor t = Tensor::Scalar<int64_t>(7);
  EXPECT_EQ(t.dtype(), INT64);
  EXPECT_TRUE(t.shape().empty());
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.scalar<int64_t>(), 7);
}

TEST(Tensor, ConstructorZeroFillsEveryType) {
  for (DataType dtype : {BOOL, UINT8, INT32, INT64, FLOAT, DOUBLE}) {
    Tensor t(dtype, {2, 3});
    EXPECT_EQ(t.numel(), 6);
    EXPECT_EQ(t.nbytes(), 6 * DataTypeSize(dtype));
    const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) ASSERT_EQ(bytes[i], 0);
  }
  Tensor s(STRING, {2});
  EXPECT_EQ(s.data<std::string>()[1], "");
}

TEST(Tensor, CopyIsDeepAndMoveLeavesEmpty) {
  Tensor a = Tensor::FromVector<float>({1.5f, 2.5f});
  Tensor b = a;
  b.mutable_data<float>()[0] = 9.0f;
  EXPECT_EQ(a.data<float>()[0], 1.5f);
  Tensor c = std::move(a);
  EXPECT_EQ(c.numel(), 2);
  EXPECT_EQ(a.numel(), 0);  // NOLINT: checking moved-from state
}

TEST(Tensor, BitwiseEqualsDistinguishesNaNPayloadsAndSignedZero) {
  const float nan1 = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::FromVector<float>({nan1, 0.0f});
  Tensor b = a;
  EXPECT_TRUE(a.BitwiseEquals(b));
  b.mutable_data<float>()[1] = -0.0f;
  EXPECT_FALSE(a.BitwiseEquals(b));
  EXPECT_FALSE(a.BitwiseEquals(Tensor::FromVector<double>({0.0, 0.0})));
}

TEST(Tensor, IotaAndDebugString) {
  Tensor t = Tensor::Iota<int64_t>(20);
  EXPECT_EQ(t.data<int64_t>()[19], 19);
  EXPECT_EQ(Tensor::FromVector<int64_t>({1, 2, 3}).DebugString(),
            "int64[3] {1, 2, 3}");
  EXPECT_EQ(t.DebugString(2), "int64[20] {0, 1, ... (20 in all)}");
  EXPECT_EQ(Tensor::Scalar<bool>(true).DebugString(), "bool[] {true}");
}

TEST(Tensor, EmptyShapes) {
  Tensor t(FLOAT, {3, 0});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_TRUE(t.BitwiseEquals(Tensor(FLOAT, {3, 0})));
  EXPECT_FALSE(t.BitwiseEquals(Tensor(FLOAT, {0, 3})));
}

TEST(Blob, HoldsAnyTypeAndNamesRegisteredTypes) {
  Blob blob;
  EXPECT_FALSE(blob.IsInitialized());
  EXPECT_EQ(blob.TypeName(), "uninitialized");
  *blob.GetMutable<Tensor>() = Tensor::Scalar<int64_t>(3);
  EXPECT_TRUE(blob.IsType<Tensor>());
  EXPECT_EQ(blob.TypeName(), "Tensor");
  blob.GetMutable<std::string>()->assign("hello");
  EXPECT_FALSE(blob.IsType<Tensor>());
  EXPECT_EQ(blob.Get<std::string>(), "hello");
  EXPECT_EQ(blob.TypeName(), "std::string");
  struct Unregistered {};
  blob.GetMutable<Unregistered>();
  EXPECT_THAT(blob.TypeName(), ::testing::HasSubstr("Unregistered"));
  blob.Reset();
  EXPECT_FALSE(blob.IsInitialized());
}

TEST(ShapeStringTest, CommaSeparatedInBrackets) {
  EXPECT_EQ(ShapeString({}), "[]");
  EXPECT_EQ(ShapeString({3, 5}), "[3,5]");
}

}  // namespace
}  // namespace jobgraph

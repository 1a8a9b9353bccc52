#include "engine/tensor.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

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

TEST(TensorShareStorageTest, ShareIsFreeAndAWriteCopiesFirst) {
  Tensor t = Tensor::Iota<int64_t>(1000);
  const void* storage = t.raw_data();
  Tensor snapshot = t.ShareStorage();
  EXPECT_EQ(snapshot.raw_data(), storage);
  EXPECT_TRUE(t.StorageShared());
  EXPECT_TRUE(snapshot.StorageShared());
  // The writer gets its own copy; the snapshot keeps the old values.
  t.mutable_data<int64_t>()[7] = -1;
  EXPECT_NE(t.raw_data(), storage);
  EXPECT_EQ(snapshot.raw_data(), storage);
  EXPECT_EQ(snapshot.data<int64_t>()[7], 7);
  EXPECT_EQ(t.data<int64_t>()[7], -1);
  EXPECT_EQ(t.data<int64_t>()[8], 8);
  EXPECT_FALSE(t.StorageShared());
  EXPECT_FALSE(snapshot.StorageShared());
  // No longer shared: a second write copies nothing.
  const void* own = t.raw_data();
  t.mutable_data<int64_t>()[9] = -2;
  EXPECT_EQ(t.raw_data(), own);
}

TEST(TensorShareStorageTest, EitherSideAndEveryWriteAccessorCopies) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3});
  Tensor snapshot = t.ShareStorage();
  static_cast<float*>(snapshot.raw_mutable_data())[0] = 9;
  EXPECT_EQ(t.data<float>()[0], 1);
  EXPECT_EQ(snapshot.data<float>()[0], 9);

  Tensor strings = Tensor::FromVector<std::string>({"a", "b"});
  Tensor frozen = strings.ShareStorage();
  EXPECT_EQ(frozen.data<std::string>(), strings.data<std::string>());
  strings.mutable_data<std::string>()[1] = "changed";
  EXPECT_EQ(frozen.data<std::string>()[1], "b");
  EXPECT_EQ(strings.data<std::string>()[1], "changed");

  // Reset and moves leave the snapshot alone too.
  Tensor r = Tensor::Iota<int32_t>(4);
  Tensor kept = r.ShareStorage();
  r.Reset(INT32, {2});
  Tensor moved = std::move(r);
  moved.mutable_data<int32_t>()[0] = 5;
  EXPECT_EQ(std::vector<int32_t>(kept.values<int32_t>().begin(),
                                 kept.values<int32_t>().end()),
            (std::vector<int32_t>{0, 1, 2, 3}));
}

// A reader of the snapshot on another thread while the workspace side keeps
// writing: the reader always sees the frozen values and the writer never
// waits for it (run under --config=tsan as well).
TEST(TensorShareStorageTest, ConcurrentReaderSeesOnlyTheSnapshot) {
  Tensor t = Tensor::Iota<int64_t>(1 << 16);
  int64_t expected = 0;
  for (int64_t i = 0; i < (1 << 16); ++i) expected += i;
  for (int round = 0; round < 20; ++round) {
    Tensor snapshot = t.ShareStorage();
    std::thread reader([snapshot = std::move(snapshot), expected] {
      for (int pass = 0; pass < 5; ++pass) {
        int64_t sum = 0;
        for (int64_t v : snapshot.values<int64_t>()) sum += v;
        EXPECT_EQ(sum, expected);
      }
    });
    for (int w = 0; w < 100; ++w) t.mutable_data<int64_t>()[w] += 1;
    reader.join();
    for (int w = 0; w < 100; ++w) t.mutable_data<int64_t>()[w] -= 1;
  }
}

}  // namespace
}  // namespace jobgraph

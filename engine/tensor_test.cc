#include "engine/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
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

// --- Write generations.

constexpr DataType kAllTypes[] = {BOOL,  UINT8,  INT32, INT64,
                                  FLOAT, DOUBLE, STRING};

// Every generation a test has seen: a new one must be neither 0 nor one of
// them.
class Generations {
 public:
  ::testing::AssertionResult Fresh(uint64_t generation) {
    if (generation == 0) {
      return ::testing::AssertionFailure() << "generation 0";
    }
    if (!seen_.insert(generation).second) {
      return ::testing::AssertionFailure()
             << "generation " << generation << " was seen before";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::unordered_set<uint64_t> seen_;
};

TEST(TensorGenerationTest, ConstructorsAndFactoriesTakeFreshGenerations) {
  Generations seen;
  EXPECT_TRUE(seen.Fresh(Tensor().generation()));
  for (DataType dtype : kAllTypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    EXPECT_TRUE(seen.Fresh(Tensor(dtype, {2, 3}).generation()));
    EXPECT_TRUE(seen.Fresh(Tensor(dtype, {}).generation()));
    EXPECT_TRUE(seen.Fresh(Tensor(dtype, {0}).generation()));
    EXPECT_TRUE(seen.Fresh(Tensor::Uninitialized(dtype, {4}).generation()));
    EXPECT_TRUE(seen.Fresh(Tensor::Uninitialized(dtype, {0}).generation()));
    DispatchDataType(dtype, [&](auto zero) {
      using T = decltype(zero);
      EXPECT_TRUE(seen.Fresh(Tensor::Scalar<T>(zero).generation()));
      EXPECT_TRUE(seen.Fresh(Tensor::FromVector<T>({zero, zero}).generation()));
      EXPECT_TRUE(seen.Fresh(Tensor::FromVector<T>({}).generation()));
      if constexpr (!std::is_same_v<T, std::string>) {
        EXPECT_TRUE(seen.Fresh(Tensor::Iota<T>(2).generation()));
      }
    });
  }
}

// mutable_data<T>() for every T, raw_mutable_data() and Reset(): the members
// that can change a tensor (engine/tensor.h lists them).
TEST(TensorGenerationTest, EveryMutatingMemberTakesAFreshGeneration) {
  Generations seen;
  for (DataType dtype : kAllTypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{3}, std::vector<int64_t>{},
          std::vector<int64_t>{2, 0}}) {
      SCOPED_TRACE(ShapeString(shape));
      Tensor t(dtype, shape);
      ASSERT_TRUE(seen.Fresh(t.generation()));
      DispatchDataType(dtype, [&](auto zero) {
        using T = decltype(zero);
        // Each access takes its own, even with nothing in between.
        t.mutable_data<T>();
        EXPECT_TRUE(seen.Fresh(t.generation()));
        t.mutable_data<T>();
        EXPECT_TRUE(seen.Fresh(t.generation()));
      });
      if (dtype != STRING) {
        t.raw_mutable_data();
        EXPECT_TRUE(seen.Fresh(t.generation()));
      }
      t.Reset(dtype, shape);  // the same type and shape
      EXPECT_TRUE(seen.Fresh(t.generation()));
      t.Reset(dtype == FLOAT ? INT32 : FLOAT, {5});
      EXPECT_TRUE(seen.Fresh(t.generation()));
    }
  }
}

TEST(TensorGenerationTest, ConstMembersKeepTheGeneration) {
  for (DataType dtype : kAllTypes) {
    SCOPED_TRACE(DataTypeName(dtype));
    // Non-const tensors: a call that picked a non-const overload would show.
    Tensor t(dtype, {2, 3});
    Tensor scalar(dtype, {});
    const uint64_t generation = t.generation();
    const uint64_t scalar_generation = scalar.generation();
    EXPECT_EQ(t.dtype(), dtype);
    EXPECT_EQ(t.shape().size(), 2u);
    EXPECT_EQ(t.ndim(), 2);
    EXPECT_EQ(t.dim(1), 3);
    EXPECT_EQ(t.numel(), 6);
    t.nbytes();
    t.MemoryBytes();
    EXPECT_FALSE(t.StorageShared());
    EXPECT_TRUE(t.BitwiseEquals(Tensor(dtype, {2, 3})));
    t.DebugString();
    EXPECT_EQ(t.generation(), generation);
    DispatchDataType(dtype, [&](auto zero) {
      using T = decltype(zero);
      EXPECT_NE(t.data<T>(), nullptr);
      EXPECT_EQ(t.values<T>().size(), 6u);
      EXPECT_EQ(scalar.scalar<T>(), zero);
    });
    if (dtype != STRING) {
      EXPECT_NE(t.raw_data(), nullptr);
    }
    {
      // Taking a snapshot or a copy, and dropping it, leaves the source as
      // it was.
      Tensor snapshot = t.ShareStorage();
      Tensor copy(t);
      Tensor assigned;
      assigned = t;
    }
    EXPECT_EQ(t.generation(), generation);
    EXPECT_EQ(scalar.generation(), scalar_generation);
  }
}

TEST(TensorGenerationTest, CopiesAndMovesKeepTheGenerationWithTheContents) {
  Generations seen;
  for (Tensor source : {Tensor::FromVector<float>({1.5f, 2.5f}),
                        Tensor::FromVector<std::string>({"a", "b"})}) {
    SCOPED_TRACE(source.DebugString());
    const uint64_t generation = source.generation();
    ASSERT_TRUE(seen.Fresh(generation));

    Tensor copy(source);
    EXPECT_EQ(copy.generation(), generation);
    EXPECT_TRUE(copy.BitwiseEquals(source));
    Tensor assigned;
    assigned = source;
    EXPECT_EQ(assigned.generation(), generation);

    Tensor moved(std::move(copy));
    EXPECT_EQ(moved.generation(), generation);
    // Emptied: it no longer holds what the generation stands for.
    EXPECT_TRUE(seen.Fresh(copy.generation()));  // NOLINT: moved-from
    Tensor move_assigned;
    move_assigned = std::move(assigned);
    EXPECT_EQ(move_assigned.generation(), generation);
    EXPECT_TRUE(seen.Fresh(assigned.generation()));  // NOLINT: moved-from

    // Writing a copy moves it on and leaves the source's alone.
    if (moved.dtype() == STRING) {
      moved.mutable_data<std::string>()[0] = "changed";
    } else {
      moved.mutable_data<float>()[0] = -1;
    }
    EXPECT_TRUE(seen.Fresh(moved.generation()));
    EXPECT_EQ(source.generation(), generation);
    EXPECT_EQ(move_assigned.generation(), generation);
  }
}

TEST(TensorGenerationTest, ShareStorageKeepsItAndAWriteMovesOnlyThatSide) {
  Generations seen;
  Tensor t = Tensor::Iota<int64_t>(1000);
  ASSERT_TRUE(seen.Fresh(t.generation()));

  // The writer side (mutable_data) unshares and moves on.
  uint64_t shared = t.generation();
  Tensor snapshot = t.ShareStorage();
  EXPECT_EQ(snapshot.generation(), shared);
  t.mutable_data<int64_t>()[0] = -1;
  EXPECT_TRUE(seen.Fresh(t.generation()));
  EXPECT_EQ(snapshot.generation(), shared);
  EXPECT_EQ(snapshot.data<int64_t>()[0], 0);

  // The snapshot side (raw_mutable_data).
  shared = t.generation();
  Tensor other = t.ShareStorage();
  static_cast<int64_t*>(other.raw_mutable_data())[1] = -2;
  EXPECT_TRUE(seen.Fresh(other.generation()));
  EXPECT_EQ(t.generation(), shared);
  EXPECT_EQ(t.data<int64_t>()[1], 1);

  // Reset of a shared tensor.
  shared = t.generation();
  Tensor kept = t.ShareStorage();
  t.Reset(INT64, {1000});
  EXPECT_TRUE(seen.Fresh(t.generation()));
  EXPECT_EQ(kept.generation(), shared);

  // Strings.
  Tensor words = Tensor::FromVector<std::string>({"a", "b"});
  shared = words.generation();
  Tensor frozen = words.ShareStorage();
  EXPECT_EQ(frozen.generation(), shared);
  words.mutable_data<std::string>()[1] = "c";
  EXPECT_TRUE(seen.Fresh(words.generation()));
  EXPECT_EQ(frozen.generation(), shared);
  frozen.mutable_data<std::string>()[0] = "d";
  EXPECT_TRUE(seen.Fresh(frozen.generation()));
}

// Four threads allocating and writing tensors at once, each through more
// than a block of generations, so that blocks are taken while the other
// threads hand out theirs (run under --config=tsan as well).
TEST(TensorGenerationTest, UniqueAcrossThreadsAllocatingAndWriting) {
  constexpr int kThreads = 4;
  constexpr int64_t kWrites = tensor_internal::kGenerationBlock + 1000;
  std::vector<std::vector<uint64_t>> generations(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::vector<uint64_t>& mine = generations[i];
      mine.reserve(kWrites + kWrites / 16 + 1);
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      Tensor t;
      Tensor snapshot;
      for (int64_t w = 0; w < kWrites; ++w) {
        if (w % 16 == 0) {
          t = Tensor(INT64, {4});
          mine.push_back(t.generation());
        } else if (w % 16 == 1) {
          snapshot = t.ShareStorage();  // the next write unshares
        }
        t.mutable_data<int64_t>()[w % 4] = w;
        mine.push_back(t.generation());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<uint64_t> all;
  for (const std::vector<uint64_t>& mine : generations) {
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_NE(all.front(), 0u);
  const auto duplicate = std::adjacent_find(all.begin(), all.end());
  EXPECT_TRUE(duplicate == all.end())
      << "generation " << *duplicate << " was handed out twice";
}

}  // namespace
}  // namespace jobgraph

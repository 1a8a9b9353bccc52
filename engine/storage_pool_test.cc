#include "engine/storage_pool.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/tensor.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool AllZero(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

TEST(StoragePoolTest, AGivenBufferServesTheNextTakeOfItsSize) {
  StoragePool pool;
  void* a = pool.Take(3 * kMiB, /*zero=*/true);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(AllZero(a, 3 * kMiB));  // a fresh mapping
  std::memset(a, 0x5A, 3 * kMiB);
  pool.Give(a, 3 * kMiB);
  EXPECT_EQ(pool.stats().held_bytes, 3 * kMiB);
  EXPECT_EQ(pool.stats().held_buffers, 1u);

  // Another size in pages: not from the pool.
  void* b = pool.Take(2 * kMiB, /*zero=*/false);
  EXPECT_NE(b, a);
  // The same size in pages (3 MiB less a few bytes): the buffer given back,
  // its old contents kept when zeros were not asked for.
  void* c = pool.Take(3 * kMiB - 100, /*zero=*/false);
  EXPECT_EQ(c, a);
  EXPECT_EQ(static_cast<uint8_t*>(c)[0], 0x5A);
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  pool.Give(c, 3 * kMiB - 100);
  // And zeroed when they were.
  void* d = pool.Take(3 * kMiB, /*zero=*/true);
  EXPECT_EQ(d, a);
  EXPECT_TRUE(AllZero(d, 3 * kMiB));

  const StoragePool::Stats stats = pool.stats();
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.kept, 2);
  EXPECT_EQ(stats.refused, 0);
  pool.Give(b, 2 * kMiB);
  pool.Give(d, 3 * kMiB);
  EXPECT_EQ(pool.stats().held_bytes, 5 * kMiB);
}

// A full pool keeps the newest buffer and unmaps the ones given back
// longest ago; a buffer larger than the limit is not kept.
TEST(StoragePoolTest, AFullPoolKeepsTheNewestBuffers) {
  StoragePool pool;
  pool.set_limit_bytes(5 * kMiB);
  std::vector<void*> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(pool.Take(2 * kMiB, false));
  void* small = pool.Take(kMiB, false);
  for (void* data : taken) pool.Give(data, 2 * kMiB);
  StoragePool::Stats stats = pool.stats();
  EXPECT_EQ(stats.held_bytes, 4 * kMiB);
  EXPECT_EQ(stats.held_buffers, 2u);
  EXPECT_EQ(stats.kept, 3);
  EXPECT_EQ(stats.evicted, 1);
  EXPECT_EQ(stats.refused, 0);
  EXPECT_EQ(stats.released_bytes, static_cast<int64_t>(2 * kMiB));
  // taken[0] went; the two given back last serve the next Takes, newest
  // first.
  EXPECT_EQ(pool.Take(2 * kMiB, false), taken[2]);
  EXPECT_EQ(pool.Take(2 * kMiB, false), taken[1]);
  pool.Give(taken[1], 2 * kMiB);
  pool.Give(taken[2], 2 * kMiB);
  // 1 MiB more fits beside 4: nothing goes.
  pool.Give(small, kMiB);
  stats = pool.stats();
  EXPECT_EQ(stats.held_bytes, 5 * kMiB);
  EXPECT_EQ(stats.evicted, 1);
  // Larger than the limit: unmapped, and the pool keeps what it had.
  void* huge = pool.Take(6 * kMiB, false);
  pool.Give(huge, 6 * kMiB);
  stats = pool.stats();
  EXPECT_EQ(stats.held_bytes, 5 * kMiB);
  EXPECT_EQ(stats.refused, 1);

  // A limit of 0 turns the pool off: it unmaps what it held, keeps nothing.
  pool.set_limit_bytes(0);
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  EXPECT_EQ(pool.stats().released_bytes, static_cast<int64_t>(7 * kMiB));
  EXPECT_EQ(pool.stats().evicted, 4);
  void* e = pool.Take(2 * kMiB, false);
  pool.Give(e, 2 * kMiB);
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  EXPECT_EQ(pool.stats().refused, 2);
}

// A buffer is unmapped by the second TrimIdle after it was given back,
// unless something took it in between.
TEST(StoragePoolTest, TrimIdleUnmapsWhatALastEpochDidNotReuse) {
  StoragePool pool;
  void* a = pool.Take(kMiB, false);
  void* b = pool.Take(2 * kMiB, false);
  pool.Give(a, kMiB);
  pool.Give(b, 2 * kMiB);
  EXPECT_EQ(pool.TrimIdle(), 0u);  // both given back in this round
  // b is taken and given back again: idle since this round only.
  void* b2 = pool.Take(2 * kMiB, false);
  ASSERT_EQ(b2, b);
  pool.Give(b2, 2 * kMiB);
  EXPECT_EQ(pool.TrimIdle(), kMiB);  // a: idle for a whole round
  EXPECT_EQ(pool.stats().held_bytes, 2 * kMiB);
  EXPECT_EQ(pool.TrimIdle(), 2 * kMiB);
  EXPECT_EQ(pool.stats().held_bytes, 0u);
  EXPECT_EQ(pool.stats().held_buffers, 0u);
  EXPECT_EQ(pool.stats().released_bytes, static_cast<int64_t>(3 * kMiB));
}

// Lowering the limit unmaps the buffers given back longest ago first.
TEST(StoragePoolTest, ALowerLimitUnmapsTheOldestFirst) {
  StoragePool pool;
  void* old_one = pool.Take(kMiB, false);
  void* new_one = pool.Take(2 * kMiB, false);
  pool.Give(old_one, kMiB);
  pool.TrimIdle();
  pool.Give(new_one, 2 * kMiB);
  pool.set_limit_bytes(2 * kMiB);
  EXPECT_EQ(pool.stats().held_bytes, 2 * kMiB);
  EXPECT_EQ(pool.Take(2 * kMiB, false), new_one);
  EXPECT_EQ(pool.stats().hits, 1);
  pool.Give(new_one, 2 * kMiB);
}

#ifdef __SANITIZE_ADDRESS__
// Under AddressSanitizer a write into an idle buffer (a freed tensor's
// storage) is reported, as when freed storage was unmapped at once.
TEST(StoragePoolDeathTest, AnIdleBufferIsPoisonedUnderAddressSanitizer) {
  StoragePool pool;
  void* data = pool.Take(kMiB, /*zero=*/false);
  pool.Give(data, kMiB);
  EXPECT_DEATH(static_cast<volatile char*>(data)[100] = 1, "use-after-poison");
  // Taken again, it is the caller's to write.
  ASSERT_EQ(pool.Take(kMiB, /*zero=*/true), data);
  static_cast<volatile char*>(data)[100] = 1;
  pool.Give(data, kMiB);
}
#endif

// Tensors take their large storage from the global pool and give it back:
// a tensor of the size of one freed gets its buffer, zeroed; a copy-on-write
// copy freed by the snapshot's end goes back too, and small storage never.
TEST(StoragePoolTest, TensorsUseTheGlobalPool) {
  StoragePool& pool = StoragePool::Global();
  pool.set_limit_bytes(StoragePool::kDefaultLimitBytes);
  const void* first = nullptr;
  {
    Tensor t(FLOAT, {1 << 20});  // 4 MiB
    t.mutable_data<float>()[7] = 1.5f;
    first = t.data<float>();
  }
  const StoragePool::Stats before = pool.stats();
  Tensor again(FLOAT, {1 << 20});
  EXPECT_EQ(again.data<float>(), first);
  EXPECT_EQ(again.data<float>()[7], 0.0f);
  EXPECT_EQ(pool.stats().hits, before.hits + 1);

  // A snapshot shares `again`; the write copies it, and the copy's old
  // storage goes back to the pool when the snapshot lets it go.
  {
    Tensor snapshot = again.ShareStorage();
    again.mutable_data<float>()[0] = 2.0f;
    EXPECT_NE(again.data<float>(), snapshot.data<float>());
  }
  EXPECT_EQ(pool.stats().held_bytes, before.held_bytes);
  EXPECT_EQ(pool.stats().kept, before.kept + 1);

  EXPECT_EQ(pool.stats().misses, before.misses + 1);  // the copy's

  const StoragePool::Stats before_small = pool.stats();
  { Tensor small(FLOAT, {1000}); }
  EXPECT_EQ(pool.stats().hits, before_small.hits);
  EXPECT_EQ(pool.stats().misses, before_small.misses);
  EXPECT_EQ(pool.stats().kept, before_small.kept);
}

}  // namespace
}  // namespace jobgraph

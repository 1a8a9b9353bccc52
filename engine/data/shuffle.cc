#include "engine/data/shuffle.h"

#include <numeric>
#include <utility>

#include "glog/logging.h"

namespace jobgraph {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t EpochSeed(uint64_t seed, int64_t epoch) {
  return Mix64(Mix64(seed) ^ static_cast<uint64_t>(epoch));
}

uint64_t BoundedRandom(std::mt19937_64& rng, uint64_t bound) {
  CHECK_GT(bound, 0u);
  // 2^64 mod bound, computed in 64 bits: (2^64 - bound) mod bound.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

std::vector<int64_t> ShufflePermutation(uint64_t seed, int64_t epoch,
                                        int64_t n) {
  CHECK_GE(n, 0);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::mt19937_64 rng(EpochSeed(seed, epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(BoundedRandom(rng, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace jobgraph

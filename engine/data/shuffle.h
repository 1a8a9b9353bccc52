// The deterministic shuffle behind the shuffling reader: the order of epoch
// `epoch` is a pure function of (seed, epoch, number of rows), identical on
// every run, compiler and platform.
//
// Why not std::shuffle or std::uniform_int_distribution: their algorithms
// are implementation-defined, so libstdc++ and libc++ give different orders
// and a checkpoint taken on one could not be resumed exactly on the other.
// std::mt19937_64's output sequence, by contrast, is fixed by the standard.
// The bound is applied by rejection sampling written out here.
//
// Stateless; thread-safe.

#ifndef JOBGRAPH_ENGINE_DATA_SHUFFLE_H_
#define JOBGRAPH_ENGINE_DATA_SHUFFLE_H_

#include <cstdint>
#include <random>
#include <vector>

namespace jobgraph {

// SplitMix64's finaliser: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x);

// The engine seed for `epoch` of a reader seeded with `seed`. Neighbouring
// seeds and epochs give unrelated streams.
uint64_t EpochSeed(uint64_t seed, int64_t epoch);

// A uniform integer in [0, bound), bound > 0, without modulo bias: values
// below 2^64 mod bound are rejected and redrawn.
uint64_t BoundedRandom(std::mt19937_64& rng, uint64_t bound);

// A permutation of [0, n): Fisher-Yates (Durstenfeld's form, from the last
// position down) driven by std::mt19937_64(EpochSeed(seed, epoch)).
std::vector<int64_t> ShufflePermutation(uint64_t seed, int64_t epoch,
                                        int64_t n);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_SHUFFLE_H_

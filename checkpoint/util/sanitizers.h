// Whether this binary was built with AddressSanitizer or ThreadSanitizer
// (--config=asan, --config=tsan), for the tests whose sweeps are long.
//
// Under a sanitizer every process starts and runs several times slower.
// Sweeps that run the same code path once per crash point or per stop
// point then take every kSweepStride-th point; the uninstrumented run of
// the suite (the README's test command, .ci/run's first phase) takes every
// point, and the sanitizers still see every kind of point. Constants only;
// nothing here is state.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_SANITIZERS_H_
#define JOBGRAPH_CHECKPOINT_UTIL_SANITIZERS_H_

namespace jobgraph {
namespace testing_util {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// The step between the points a sweep visits: 1 (all of them) unless
// sanitized.
inline constexpr int kSweepStride = kSanitized ? 3 : 1;

}  // namespace testing_util
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_SANITIZERS_H_

// Time helpers for the durations that checkpoint stats report. Functions
// only; thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_TIME_UTIL_H_
#define JOBGRAPH_CHECKPOINT_UTIL_TIME_UTIL_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace jobgraph {

// Whole microseconds from `start` until now.
inline int64_t MicrosSince(absl::Time start) {
  return absl::ToInt64Microseconds(absl::Now() - start);
}

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_TIME_UTIL_H_

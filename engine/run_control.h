// RunControl: how a caller stops a running plan (plan_executor.h) from
// another thread, a signal handler included: lock-free atomics only. The
// caller owns it; a run borrows it.

#ifndef JOBGRAPH_ENGINE_RUN_CONTROL_H_
#define JOBGRAPH_ENGINE_RUN_CONTROL_H_

#include <atomic>
#include <cstdint>

namespace jobgraph {

// Lets a caller stop a running plan from another thread. Borrowed by RunPlan.
struct RunControl {
  // When set, the executor stops at the next point between two nets and
  // RunPlan returns a Cancelled error. This is the safe point used for
  // preemption and for cancelling the other nodes when one node fails.
  // Mutable so that a check through a const pointer can latch a counted
  // stop (stop_at_check).
  mutable std::atomic<bool> stop_requested{false};
  // For tests that place a stop exactly: when >= 0, the check of this
  // control (one at every point between nets, in every thread) that finds it
  // at 0 requests the stop; each check counts it down. -1: off.
  mutable std::atomic<int64_t> stop_at_check{-1};
  // Stops requested on these (borrowed; may be null) apply too.
  const RunControl* parent = nullptr;
  const RunControl* other_parent = nullptr;

  bool StopRequested() const {
    if (stop_requested.load(std::memory_order_relaxed)) return true;
    if (stop_at_check.load(std::memory_order_relaxed) >= 0 &&
        stop_at_check.fetch_sub(1) == 0) {
      stop_requested.store(true);
      return true;
    }
    return (parent != nullptr && parent->StopRequested()) ||
           (other_parent != nullptr && other_parent->StopRequested());
  }
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_RUN_CONTROL_H_

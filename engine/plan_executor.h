// RunPlan: runs a PlanDef's execution steps over a workspace, with Caffe2's
// plan-executor semantics.
//
// - A step has nets or substeps, never both. Without should_stop_blob it runs
//   num_iter iterations (1 when unset); with it, until the blob is true (once
//   with only_once).
// - The stop blob is read after each net, after each sequential substep, and
//   after the concurrent substeps of an iteration have joined; never before
//   the first. A missing or uninitialized stop blob reads as false.
// - Steps without create_workspace are compiled (their nets built, outputs
//   created, the stop blob resolved) before anything in them runs; a step with
//   create_workspace is compiled again in a fresh child workspace every time it
//   runs, and the child is destroyed when the step ends.
// - Concurrent substeps run on their own threads, num_concurrent_instances
//   copies of each. When one fails, its siblings stop at their next iteration
//   boundary and the first error is returned; nothing calls std::terminate.
// - Substeps with run_every_ms are reporters: they run periodically while
//   their parent runs, and once more after the parent's body ends.
//
// Thread-safe as far as the workspace is: RunPlan may be called concurrently
// on different workspaces.

#ifndef JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_
#define JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_

#include <atomic>

#include "absl/status/status.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// Lets a caller stop a running plan from another thread. Borrowed by RunPlan.
struct RunControl {
  // When set, the executor stops at the next point between two nets and
  // RunPlan returns a Cancelled error. This is the safe point used for
  // preemption and for cancelling the other nodes when one node fails.
  std::atomic<bool> stop_requested{false};
  // A stop requested on the parent (borrowed; may be null) applies too.
  const RunControl* parent = nullptr;

  bool StopRequested() const {
    for (const RunControl* c = this; c != nullptr; c = c->parent) {
      if (c->stop_requested.load(std::memory_order_relaxed)) return true;
    }
    return false;
  }
};

// Runs `plan` in `ws`. `control` may be null. An empty plan succeeds.
absl::Status RunPlan(Workspace* ws, const PlanDef& plan,
                     const RunControl* control = nullptr);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_

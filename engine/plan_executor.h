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
// Stopping and continuing (preemption):
// - A stop requested through RunControl takes effect at the next point
//   between two nets, in every thread of the plan. Reporters are not
//   stopped: they run once more when their step stops, and again at its end
//   in the run that continues it, so a reporter that writes blobs sees one
//   extra run per stop (reporters are for logging), and a long reporter
//   delays a stop or a cancellation by its own length.
// - If the state at a stop cannot be saved (a blob of a child workspace
//   whose type has no serializer), the run still stops, and the position's
//   cannot_save says why: it cannot be continued.
// - The stopped run returns a status for which IsStopRequest() is true and,
//   when asked, describes where it was as a PlanPosition: which top-level
//   step, which iteration of each enclosing loop, how many nets or substeps
//   of that iteration had run, which branches of a concurrent step had
//   finished, and the blobs of every live child workspace (create_workspace),
//   serialized. Blobs of the root workspace are not in it: the caller saves
//   those (PlanPosition.root_blob names them).
// - RunPlan with that position, in a workspace holding the same root blobs,
//   continues exactly there: finished parts are skipped, child workspaces are
//   recreated with their blobs, loops resume at their iteration. A position
//   that does not fit the plan (steps renamed, other thread counts) is
//   FailedPrecondition.
//
// Thread-safe as far as the workspace is: RunPlan may be called concurrently
// on different workspaces.

#ifndef JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_
#define JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/run_control.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

struct PlanRunOptions {
  // Stops the run on request (borrowed; may be null).
  const RunControl* control = nullptr;
  // Continue a run that stopped here (borrowed; may be null: from the start).
  const PlanPosition* resume_from = nullptr;
  // When the run stops on request: where it was (borrowed; may be null).
  PlanPosition* stopped_at = nullptr;
};

// Runs `plan` in `ws`. An empty plan succeeds.
absl::Status RunPlan(Workspace* ws, const PlanDef& plan,
                     const PlanRunOptions& options);
absl::Status RunPlan(Workspace* ws, const PlanDef& plan,
                     const RunControl* control = nullptr);

// The Cancelled status of a run that stopped because a stop was requested,
// and the test for it (other Cancelled errors, e.g. from an operator, are not
// stop requests).
absl::Status StopRequestStatus(absl::string_view message);
bool IsStopRequest(const absl::Status& status);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_PLAN_EXECUTOR_H_

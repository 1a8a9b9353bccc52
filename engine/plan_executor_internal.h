// Internal to RunPlan (plan_executor.cc runs steps, plan_executor_compile.cc
// validates and compiles them): the state of one run and the compiled form of
// a step, which compilation builds and execution walks. Not for other users.
//
// Ownership: RunPlan owns the PlanRun and the root NetCache; a StepWrapper
// owns the CompiledStep of a step built once, and a CompiledStep owns its
// child workspace, that workspace's NetCache and its substeps' wrappers.
// Everything else is borrowed from the plan or the workspace and outlives
// the run.
//
// Thread-safety: a PlanRun and a NetCache are shared by the threads of
// concurrent substeps (their mutable parts under their mutexes); a
// CompiledStep is built by one thread and then only read, but for
// got_failure.

#ifndef JOBGRAPH_ENGINE_PLAN_EXECUTOR_INTERNAL_H_
#define JOBGRAPH_ENGINE_PLAN_EXECUTOR_INTERNAL_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/net.h"
#include "engine/plan_executor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace plan_executor_internal {

// The nets built in one workspace during one RunPlan. Steps that name the same
// net in the same workspace share one instance, as in Caffe2. Owned next to
// the workspace it serves and destroyed before it.
struct NetCache {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Net>> nets ABSL_GUARDED_BY(mu);
};

// State shared by every step of one RunPlan.
struct PlanRun {
  std::map<std::string, const NetDef*> net_defs;
  const RunControl* control = nullptr;
  // What reporters run with: the same nets, no stop requests (they report,
  // and run once more at the end whatever stopped the body).
  PlanRun* for_reporters = nullptr;

  // Why the state at a stop could not be saved (the first reason), if so.
  std::mutex mu;
  std::string cannot_save ABSL_GUARDED_BY(mu);
  void NoteCannotSave(const absl::Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (cannot_save.empty()) cannot_save = std::string(why.message());
  }

  bool StopRequested() const {
    return control != nullptr && control->StopRequested();
  }
};

// The continuation test handed down from the ancestors (plan_executor.cc).
struct Continuation;
class StepWrapper;

// A step made ready to run in a workspace: nets built, substeps wrapped, stop
// blob resolved. Member order matters: nets and substeps refer to the child
// workspace, so they are declared (and so destroyed) after it.
struct CompiledStep {
  const ExecutionStep* step = nullptr;
  std::unique_ptr<Workspace> child_ws;
  std::unique_ptr<NetCache> child_cache;
  Workspace* ws = nullptr;
  std::vector<std::unique_ptr<StepWrapper>> recurring;
  std::vector<std::unique_ptr<StepWrapper>> reporters;
  std::vector<Net*> nets;
  Blob* stop_blob = nullptr;
  std::atomic<bool> got_failure{false};
};

// Validates `step` and compiles it in `ws` (in a new child workspace when it
// sets create_workspace), with every substep that is built once compiled too.
absl::StatusOr<std::unique_ptr<CompiledStep>> CompileStep(
    PlanRun* run, const ExecutionStep* step, Workspace* ws, NetCache* cache);

// Wraps a step. Without create_workspace the step is compiled once, when the
// wrapper is prepared (so a whole subtree is built before any of it runs);
// with it, every run compiles afresh in a new child workspace.
class StepWrapper {
 public:
  StepWrapper(PlanRun* run, const ExecutionStep* step, Workspace* ws,
              NetCache* cache)
      : run_(run), step_(step), ws_(ws), cache_(cache) {}

  // In plan_executor_compile.cc.
  absl::Status Prepare();

  const ExecutionStep& step() const { return *step_; }

  // In plan_executor.cc. Reentrant: concurrent instances of one substep run
  // the same wrapper. `resume` (may be null) continues a stopped run;
  // `stopped_at` (may be null) receives the position when this run stops on
  // request.
  absl::Status Run(const Continuation* parent,
                   const StepPosition* resume = nullptr,
                   StepPosition* stopped_at = nullptr);

 private:
  PlanRun* const run_;
  const ExecutionStep* const step_;
  Workspace* const ws_;
  NetCache* const cache_;
  std::unique_ptr<CompiledStep> compiled_;
};

}  // namespace plan_executor_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_PLAN_EXECUTOR_INTERNAL_H_

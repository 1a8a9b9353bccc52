// The compilation half of RunPlan (see plan_executor.h): checks each step's
// fields, builds its nets (shared through the workspace's NetCache), wraps its
// substeps and resolves its stop blob, so that a whole subtree fails or is
// ready before any of it runs. Running the result is plan_executor.cc's.

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/net.h"
#include "engine/plan_executor_internal.h"
#include "engine/status_macros.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace plan_executor_internal {
namespace {

absl::Status ValidateStep(const ExecutionStep& step) {
  if (step.substep_size() > 0 && step.network_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step '", step.name(), "' has both substeps and networks"));
  }
  if (!step.should_stop_blob().empty() && step.has_num_iter()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step '", step.name(), "' sets both num_iter and should_stop_blob"));
  }
  if (step.only_once() && step.should_stop_blob().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step '", step.name(), "' sets only_once without should_stop_blob"));
  }
  if (step.has_num_iter() && step.num_iter() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step '", step.name(), "' has negative num_iter ", step.num_iter()));
  }
  bool has_recurring = false;
  for (const ExecutionStep& sub : step.substep()) {
    has_recurring |= !sub.has_run_every_ms();
  }
  if (!step.should_stop_blob().empty() && step.network_size() == 0 &&
      !has_recurring && !step.only_once()) {
    // Nothing would ever run between the stop checks, so nothing could set
    // the blob: the step would spin for ever.
    return absl::InvalidArgumentError(absl::StrCat(
        "step '", step.name(),
        "' has a should_stop_blob but no nets or substeps to run"));
  }
  if (step.num_concurrent_instances() > 1) {
    // Instances of a substep built once would share its nets, and a net's
    // ops and outputs may be used by one thread at a time only.
    for (const ExecutionStep& sub : step.substep()) {
      if (!sub.has_run_every_ms() && !sub.create_workspace()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "step '", step.name(), "' runs ", step.num_concurrent_instances(),
            " concurrent instances of substep '", sub.name(),
            "', which must set create_workspace so each instance gets its "
            "own workspace and nets"));
      }
    }
  }
  if (step.has_run_every_ms() && step.run_every_ms() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step '", step.name(), "' has run_every_ms ",
                     step.run_every_ms(), "; it must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Net*> GetOrCreateNet(PlanRun* run, const std::string& name,
                                    const ExecutionStep& step, Workspace* ws,
                                    NetCache* cache) {
  auto def = run->net_defs.find(name);
  if (def == run->net_defs.end()) {
    return absl::NotFoundError(
        absl::StrCat("step '", step.name(), "' names net '", name,
                     "', which the plan does not define"));
  }
  std::lock_guard<std::mutex> lock(cache->mu);
  std::unique_ptr<Net>& net = cache->nets[name];
  if (net == nullptr) {
    JG_ASSIGN_OR_RETURN(net, Net::Create(*def->second, ws));
  }
  return net.get();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledStep>> CompileStep(
    PlanRun* run, const ExecutionStep* step, Workspace* ws, NetCache* cache) {
  JG_RETURN_IF_ERROR(ValidateStep(*step));
  auto compiled = std::make_unique<CompiledStep>();
  compiled->step = step;
  compiled->ws = ws;
  if (step->create_workspace()) {
    compiled->child_ws = std::make_unique<Workspace>(
        ws, absl::StrCat(ws->name(), "/", step->name()));
    compiled->child_cache = std::make_unique<NetCache>();
    compiled->ws = compiled->child_ws.get();
    cache = compiled->child_cache.get();
  }
  for (const ExecutionStep& substep : step->substep()) {
    PlanRun* substep_run =
        substep.has_run_every_ms() ? run->for_reporters : run;
    auto wrapper = std::make_unique<StepWrapper>(substep_run, &substep,
                                                 compiled->ws, cache);
    JG_RETURN_IF_ERROR(wrapper->Prepare());
    (substep.has_run_every_ms() ? compiled->reporters : compiled->recurring)
        .push_back(std::move(wrapper));
  }
  for (const std::string& name : step->network()) {
    JG_ASSIGN_OR_RETURN(Net * net,
                        GetOrCreateNet(run, name, *step, compiled->ws, cache));
    compiled->nets.push_back(net);
  }
  if (!step->should_stop_blob().empty()) {
    compiled->stop_blob = compiled->ws->GetBlob(step->should_stop_blob());
    if (compiled->stop_blob == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "should_stop_blob '", step->should_stop_blob(), "' of step '",
          step->name(),
          "' does not exist when the step is built; create it in an earlier "
          "step or in one of this step's nets"));
    }
  }
  return compiled;
}

absl::Status StepWrapper::Prepare() {
  if (step_->create_workspace()) return absl::OkStatus();
  JG_ASSIGN_OR_RETURN(compiled_, CompileStep(run_, step_, ws_, cache_));
  return absl::OkStatus();
}

}  // namespace plan_executor_internal
}  // namespace jobgraph

#include "engine/session.h"

#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<std::vector<NodePlan>> PlanByNode(const TaskGroupDef& group) {
  std::vector<NodePlan> plans;
  std::map<std::string, size_t> index;
  std::vector<std::vector<const TaskDef*>> tasks;
  for (const TaskDef& task : group.task()) {
    auto [it, inserted] = index.emplace(task.node(), plans.size());
    if (inserted) {
      plans.emplace_back();
      plans.back().node = task.node();
      tasks.emplace_back();
    }
    tasks[it->second].push_back(&task);
  }
  for (size_t n = 0; n < plans.size(); ++n) {
    NodePlan& node = plans[n];
    node.plan.set_name(absl::StrCat(group.name(), ":", node.node));
    std::map<std::string, std::string> net_owner;
    std::vector<const ExecutionStep*> steps;
    for (const TaskDef* task : tasks[n]) {
      for (const NetDef& net : task->plan().network()) {
        auto [it, inserted] = net_owner.emplace(net.name(), task->name());
        if (!inserted) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tasks '", it->second, "' and '", task->name(), "' on node '",
              node.node, "' both define net '", net.name(), "'"));
        }
        *node.plan.add_network() = net;
      }
      for (const ExecutionStep& step : task->plan().execution_step()) {
        // Steps with nothing to run are dropped, as Caffe2's AddSubstep does.
        if (step.network_size() > 0 || step.substep_size() > 0) {
          steps.push_back(&step);
        }
      }
      node.outputs.insert(node.outputs.end(), task->output().begin(),
                          task->output().end());
    }
    if (steps.size() == 1) {
      *node.plan.add_execution_step() = *steps[0];
    } else if (steps.size() > 1) {
      ExecutionStep* body = node.plan.add_execution_step();
      body->set_name(node.node + ":body");
      body->set_concurrent_substeps(true);
      for (const ExecutionStep* step : steps) *body->add_substep() = *step;
    }
  }
  return plans;
}

absl::Status Session::Run(const TaskGroup& group) {
  JG_ASSIGN_OR_RETURN(TaskGroupDef def, group.Build());
  return Run(def);
}

absl::StatusOr<Tensor> Session::Fetch(const TaskOutput& output) const {
  if (output.blobs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task output on node '", output.node(), "' names no blob"));
  }
  return FetchBlob(output.node(), output.blobs()[0]);
}

Workspace* LocalSession::NodeWorkspace(absl::string_view node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workspaces_.find(node);
  if (it == workspaces_.end()) {
    it = workspaces_
             .emplace(std::string(node),
                      std::make_unique<Workspace>(nullptr, std::string(node)))
             .first;
  }
  return it->second.get();
}

std::vector<std::string> LocalSession::nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, ws] : workspaces_) names.push_back(name);
  return names;
}

absl::Status LocalSession::Run(const TaskGroupDef& group) {
  JG_ASSIGN_OR_RETURN(std::vector<NodePlan> plans, PlanByNode(group));
  std::vector<Workspace*> workspaces;
  for (const NodePlan& plan : plans) {
    Workspace* ws = NodeWorkspace(plan.node);
    for (const std::string& output : plan.outputs) ws->CreateBlob(output);
    workspaces.push_back(ws);
  }
  auto run_node = [&](size_t i, const RunControl* control) {
    absl::Status s = RunPlan(workspaces[i], plans[i].plan, control);
    if (s.ok()) return s;
    return absl::Status(
        s.code(), absl::StrCat("node '", plans[i].node, "': ", s.message()));
  };
  if (plans.size() == 1) return run_node(0, &control_);

  // A failing node stops the others at their next point between nets.
  RunControl group_control;
  group_control.parent = &control_;
  std::vector<absl::Status> results(plans.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plans.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = run_node(i, &group_control);
      if (!results[i].ok()) group_control.stop_requested.store(true);
    });
  }
  for (std::thread& t : threads) t.join();
  // The failure that caused the others' cancellation is the one to report.
  for (const absl::Status& s : results) {
    if (!s.ok() && !absl::IsCancelled(s)) return s;
  }
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> LocalSession::FetchBlob(absl::string_view node,
                                               absl::string_view blob) const {
  const Workspace* ws = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workspaces_.find(node);
    if (it == workspaces_.end()) {
      std::vector<std::string> known;
      for (const auto& [name, w] : workspaces_) known.push_back(name);
      return absl::NotFoundError(
          absl::StrCat("node '", node,
                       "' has not run anything in this session; known "
                       "nodes: ",
                       known.empty() ? "(none)" : absl::StrJoin(known, ", ")));
    }
    ws = it->second.get();
  }
  JG_ASSIGN_OR_RETURN(const Tensor* tensor, ws->GetTensor(blob));
  return *tensor;
}

}  // namespace jobgraph

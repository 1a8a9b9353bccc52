#include "engine/session.h"

#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/serialization.h"
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

absl::Status Session::Run(const TaskGroup& group, const RunOptions& options) {
  JG_ASSIGN_OR_RETURN(TaskGroupDef def, group.Build());
  return Run(def, options);
}

absl::Status Session::RunHosted(const TaskGroup& group) {
  JG_ASSIGN_OR_RETURN(TaskGroupDef def, group.Build());
  return RunHosted(def);
}

absl::StatusOr<Tensor> Session::Fetch(const TaskOutput& output) const {
  if (output.blobs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task output on node '", output.node(), "' names no blob"));
  }
  return FetchBlob(output.node(), output.blobs()[0]);
}

absl::StatusOr<std::vector<std::string>> Session::AllToAll(
    std::vector<std::string> to_each) const {
  if (to_each.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllToAll needs one piece per rank (1 rank), got ", to_each.size()));
  }
  return to_each;
}

namespace {

class OnSessionChannel : public SideChannel {
 public:
  explicit OnSessionChannel(const Session& session) : session_(session) {}
  int rank() const override { return session_.rank(); }
  int num_ranks() const override { return session_.num_ranks(); }
  absl::StatusOr<std::vector<std::string>> AllToAll(
      std::vector<std::string> to_each) override {
    return session_.AllToAll(std::move(to_each));
  }

 private:
  const Session& session_;
};

}  // namespace

std::unique_ptr<SideChannel> SessionChannel(const Session& session) {
  return std::make_unique<OnSessionChannel>(session);
}

absl::StatusOr<std::unique_ptr<SideChannel>> Session::OpenSideChannel() const {
  if (num_ranks() == 1) return SessionChannel(*this);
  return absl::UnimplementedError(
      "this session gives no side channel for collectives of another thread");
}

absl::Status AgreeOnStatus(const Session& session, const absl::Status& local) {
  if (session.num_ranks() == 1) return local;
  JG_ASSIGN_OR_RETURN(std::vector<int64_t> failed,
                      session.AllReduceSum({local.ok() ? 0 : 1}));
  if (failed[0] == 0) return absl::OkStatus();
  // Someone failed: which rank first, and why.
  JG_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      session.AllGather(EncodeStatus(local)));
  for (size_t rank = 0; rank < all.size(); ++rank) {
    absl::Status s = DecodeStatus(all[rank]);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("rank ", rank, ": ", s.message()));
    }
  }
  return absl::InternalError("a rank reported a failure and then none");
}

absl::StatusOr<bool> AnyRank(const Session& session, bool local) {
  if (session.num_ranks() == 1) return local;
  JG_ASSIGN_OR_RETURN(std::vector<int64_t> count,
                      session.AllReduceSum({local ? 1 : 0}));
  return count[0] > 0;
}

absl::Status OnRankZero(const Session& session,
                        const std::function<absl::Status()>& fn) {
  absl::Status local = session.rank() == 0 ? fn() : absl::OkStatus();
  if (session.num_ranks() == 1) return local;
  // Rank 0's code reaches everyone in the sum; a message only if needed.
  JG_ASSIGN_OR_RETURN(
      std::vector<int64_t> code,
      session.AllReduceSum({session.rank() == 0 ? local.raw_code() : 0}));
  return RankZeroStatus(session, code[0], local);
}

absl::Status RankZeroStatus(const Session& session, int64_t code,
                            const absl::Status& status) {
  if (code == 0) return absl::OkStatus();
  JG_ASSIGN_OR_RETURN(std::string encoded,
                      session.Broadcast(EncodeStatus(status), 0));
  return DecodeStatus(encoded);
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

namespace {

// Reads the position a stopped run left in `ws`.
absl::StatusOr<PlanPosition> ReadPlanPosition(const Workspace* ws,
                                              absl::string_view node) {
  absl::StatusOr<const Tensor*> blob = ws->GetTensor(kPlanPositionBlob);
  PlanPosition position;
  if (!blob.ok() || (*blob)->dtype() != STRING || (*blob)->numel() != 1 ||
      !position.ParseFromString((*blob)->data<std::string>()[0])) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node, "' has no saved plan position to continue from (blob '",
        kPlanPositionBlob, "' is missing or damaged)"));
  }
  return position;
}

// Stores `position` in `ws`, naming the root blobs a checkpoint must hold.
void PutPlanPosition(Workspace* ws, PlanPosition position) {
  ws->RemoveBlob(kPlanPositionBlob);
  for (const std::string& name : ws->LocalBlobNames()) {
    const Blob* blob = ws->GetBlob(name);
    if (blob != nullptr && blob->IsInitialized()) {
      position.add_root_blob(name);
    }
  }
  position.add_root_blob(kPlanPositionBlob);
  Tensor value(STRING, {1});
  value.mutable_data<std::string>()[0] = position.SerializeAsString();
  ws->SetTensor(kPlanPositionBlob, std::move(value));
}

}  // namespace

absl::Status LocalSession::Run(const TaskGroupDef& group,
                               const RunOptions& options) {
  JG_ASSIGN_OR_RETURN(std::vector<NodePlan> plans, PlanByNode(group));
  std::vector<Workspace*> workspaces;
  std::vector<std::optional<PlanPosition>> resume(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    Workspace* ws = NodeWorkspace(plans[i].node);
    if (options.resume) {
      JG_ASSIGN_OR_RETURN(resume[i], ReadPlanPosition(ws, plans[i].node));
    }
    workspaces.push_back(ws);
  }
  // Every node had its position: they are used up now.
  for (size_t i = 0; i < plans.size(); ++i) {
    if (options.resume) workspaces[i]->RemoveBlob(kPlanPositionBlob);
    for (const std::string& output : plans[i].outputs) {
      workspaces[i]->CreateBlob(output);
    }
  }
  // A failing node stops the others at their next point between nets.
  RunControl group_control;
  group_control.parent = &control_;
  // Nodes of a group with collectives could stop on either side of a
  // round: such a group is not stopped in the middle (collectives.h).
  const bool uses_collectives = GroupUsesCollectives(group);
  group_control.other_parent = uses_collectives ? nullptr : options.stop;
  std::unique_ptr<Collectives> own_collectives;
  Collectives* collectives = options.collectives;
  if (uses_collectives && collectives == nullptr) {
    std::vector<std::string> nodes;
    for (const NodePlan& plan : plans) nodes.push_back(plan.node);
    own_collectives =
        std::make_unique<Collectives>(nodes, nodes, nullptr, &control_);
    collectives = own_collectives.get();
  }
  for (Workspace* ws : workspaces) ws->set_collectives(collectives);
  std::vector<absl::Status> results(plans.size());
  std::vector<PlanPosition> stopped_at(plans.size());
  auto run_node = [&](size_t i) {
    PlanRunOptions run_options{
        .control = &group_control,
        .resume_from = resume[i].has_value() ? &*resume[i] : nullptr,
        .stopped_at = &stopped_at[i]};
    absl::Status s = RunPlan(workspaces[i], plans[i].plan, run_options);
    if (!s.ok() && !IsStopRequest(s)) {
      group_control.stop_requested.store(true);
      s = absl::Status(
          s.code(), absl::StrCat("node '", plans[i].node, "': ", s.message()));
      if (collectives != nullptr) {
        collectives->Cancel(absl::CancelledError(absl::StrCat(
            "cancelled because node '", plans[i].node, "' failed")));
      }
    }
    results[i] = std::move(s);
  };
  if (plans.size() == 1) {
    run_node(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < plans.size(); ++i) {
      threads.emplace_back(run_node, i);
    }
    for (std::thread& t : threads) t.join();
  }
  for (Workspace* ws : workspaces) ws->set_collectives(nullptr);
  // The failure that caused the others' cancellation is the one to report.
  bool stopped = false;
  for (const absl::Status& s : results) {
    if (!s.ok() && !IsStopRequest(s)) return s;
    stopped |= IsStopRequest(s);
  }
  if (!stopped) return absl::OkStatus();
  if (control_.StopRequested()) {
    // RequestStop() cancels the session for good: nothing to continue.
    return absl::CancelledError(absl::StrCat(
        "group '", group.name(), "' cancelled: the session was stopped"));
  }
  // Stopped on request: every node keeps where it was, those that had
  // finished included, so the group can be continued on every node.
  for (size_t i = 0; i < plans.size(); ++i) {
    if (results[i].ok()) {
      stopped_at[i].Clear();
      stopped_at[i].set_plan(plans[i].plan.name());
      stopped_at[i].set_finished(true);
    }
    PutPlanPosition(workspaces[i], std::move(stopped_at[i]));
  }
  return StopRequestStatus(
      absl::StrCat("group '", group.name(), "' stopped on request"));
}

void LocalSession::MarkFinished(const std::string& plan_group,
                                const std::vector<std::string>& nodes) {
  for (const std::string& node : nodes) {
    PlanPosition finished;
    finished.set_plan(absl::StrCat(plan_group, ":", node));
    finished.set_finished(true);
    PutPlanPosition(NodeWorkspace(node), std::move(finished));
  }
}

absl::StatusOr<std::vector<BlobSnapshot>> LocalSession::SnapshotBlobs(
    absl::string_view node, const std::vector<std::string>& names) const {
  const Workspace* ws = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workspaces_.find(node);
    if (it == workspaces_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "node '", node, "' has not run anything in this session"));
    }
    ws = it->second.get();
  }
  std::vector<BlobSnapshot> snapshot;
  snapshot.reserve(names.size());
  for (const std::string& name : names) {
    const Blob* blob = ws->GetBlob(name);
    if (blob == nullptr || !blob->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot snapshot blob '", name, "' of node '", node, "': it ",
          blob == nullptr ? "does not exist" : "is uninitialized"));
    }
    auto copy = std::make_unique<Blob>();
    if (blob->IsType<Tensor>()) {
      copy->Reset(std::make_unique<Tensor>(blob->Get<Tensor>().ShareStorage()));
    } else {
      // No sharing for other types: a round trip through the serializer.
      BlobAssembler assembler;
      absl::Status copied = SerializeBlob(
          name, *blob, {}, [&](std::string key, std::string value) {
            return assembler.Add(name, value, copy.get());
          });
      if (copied.ok()) copied = assembler.Finish();
      if (!copied.ok()) {
        return absl::Status(copied.code(),
                            absl::StrCat("cannot snapshot node '", node,
                                         "': ", copied.message()));
      }
    }
    snapshot.push_back({name, std::move(copy)});
  }
  return snapshot;
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

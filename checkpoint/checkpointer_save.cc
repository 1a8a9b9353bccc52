// The Checkpointer's saves: what each kind records and which blobs it
// saves. The pipeline (pipeline/save_pipeline.h) does the rest.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/job_group.h"
#include "engine/status_macros.h"
#include "engine/task.h"

namespace jobgraph {

absl::StatusOr<CheckpointStats> Checkpointer::Impl::SaveEpoch(Session& session,
                                                              int64_t epoch,
                                                              bool full) {
  if (!blobs_fixed_) {
    return Failed(SaveKind::kEpoch, epoch,
                  absl::FailedPreconditionError(absl::StrCat(
                      "cannot save epoch ", epoch,
                      ": the checkpointed blobs are not fixed yet (call "
                      "CaptureBlobNames or Restore first)")));
  }
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) blobs.push_back(state.blobs);
  const SaveRecord record{
      .kind = SaveKind::kEpoch, .epoch = epoch, .full = full};
  absl::StatusOr<CheckpointStats> saved =
      Pipeline(session).Save(&session, record, blobs);
  KeepOutcomes();
  // On hosts, the flush of each commit runs where the commit is agreed
  // (CommitHooks::shared).
  return saved;
}

absl::StatusOr<CheckpointStats> Checkpointer::Impl::SavePreempted(
    Session& session, int64_t epoch, const Preemption& preemption,
    const TaskGroup& stopped) {
  auto failed = [&](absl::Status status) {
    return Failed(SaveKind::kPreemption, epoch, std::move(status));
  };
  if (nodes_.empty()) {
    return failed(absl::FailedPreconditionError(
        "Checkpointer::SavePreempted before Start: the nodes are unknown"));
  }
  // Only checkpointed nodes' state is saved; a group that also runs on
  // another node could not continue from it.
  const std::vector<std::string> checkpointed = NodeNames();
  for (const std::string& node : stopped.used_nodes()) {
    if (std::find(checkpointed.begin(), checkpointed.end(), node) ==
        checkpointed.end()) {
      return failed(absl::FailedPreconditionError(absl::StrCat(
          "node '", node, "' runs tasks in the ",
          JobGroupName(preemption.group()),
          " group but is not checkpointed, so the middle of the group "
          "cannot be saved")));
    }
  }
  // Each node's root-workspace blobs at the stop, as its plan position
  // lists them.
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) {
    absl::StatusOr<Tensor> value =
        session.FetchBlob(state.node, kPlanPositionBlob);
    PlanPosition position;
    if (!value.ok() || value->dtype() != STRING || value->numel() != 1 ||
        !position.ParseFromString(value->data<std::string>()[0])) {
      return failed(absl::FailedPreconditionError(absl::StrCat(
          "node '", state.node, "' holds no plan position of a stopped run (",
          value.ok() ? "damaged" : value.status().message(),
          "); only a run stopped on request can be saved mid-epoch")));
    }
    if (!position.cannot_save().empty()) {
      return failed(absl::FailedPreconditionError(absl::StrCat(
          "the state of node '", state.node,
          "' at the stop cannot be saved: ", position.cannot_save())));
    }
    blobs.emplace_back(position.root_blob().begin(),
                       position.root_blob().end());
  }
  // The run ends here: the checkpoint must be committed before it does.
  const SaveRecord record{
      .kind = SaveKind::kPreemption, .epoch = epoch, .preemption = preemption};
  absl::StatusOr<CheckpointStats> saved =
      Pipeline(session).Save(&session, record, blobs, /*wait=*/true);
  KeepOutcomes();
  // A preempted run may not come back to this host: it exits only once
  // the checkpoint is in the shared directory.
  // (On hosts the flush ran where the commit was agreed, before Save
  // returned.)
  if (saved.ok() && on_hosts()) {
    JG_RETURN_IF_ERROR(std::exchange(hosts_flush_status_, absl::OkStatus()));
  } else if (saved.ok() && tiered()) {
    JG_RETURN_IF_ERROR(DrainToShared());
  }
  return saved;
}

absl::Status Checkpointer::Impl::MarkLoopFinished(
    int64_t epoch, const Preemption& preemption) {
  if (pipeline_ == nullptr) {
    return Failed(SaveKind::kLoopFinished, epoch,
                  absl::FailedPreconditionError(
                      "Checkpointer::MarkLoopFinished outside a run (call "
                      "Start first)"));
  }
  const SaveRecord record{.kind = SaveKind::kLoopFinished,
                          .epoch = epoch,
                          .preemption = preemption};
  absl::StatusOr<CheckpointStats> saved =
      pipeline_->Save(/*session=*/nullptr, record, {}, /*wait=*/true);
  KeepOutcomes();
  if (saved.ok() && on_hosts()) {
    // The mark reached the shared log with its epoch (copied then if it
    // was not) where the commit was agreed.
    return std::exchange(hosts_flush_status_, absl::OkStatus());
  }
  if (saved.ok() && tiered()) return DrainToShared();
  return saved.status();
}

}  // namespace jobgraph

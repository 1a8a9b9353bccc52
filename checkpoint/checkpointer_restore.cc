// The Checkpointer's restore path: blob names, staging, Restore and LoadBlobs
// (see checkpointer.h).

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/time_util.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "glog/logging.h"

namespace jobgraph {

absl::StatusOr<std::vector<std::vector<std::string>>>
Checkpointer::Impl::FetchBlobNames(const Session& session,
                                   absl::string_view prefix) const {
  const std::string blob = absl::StrCat(prefix, kBlobNamesBlob);
  std::vector<std::vector<std::string>> lists;
  for (const NodeState& state : nodes_) {
    absl::StatusOr<Tensor> names = session.FetchBlob(state.node, blob);
    if (!names.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpointed blob list of node '", state.node,
                       "' is not available: ", names.status().message()));
    }
    if (names->dtype() != STRING) {
      return absl::FailedPreconditionError(absl::StrCat(
          "blob '", kBlobNamesBlob, "' of node '", state.node, "' holds ",
          names->DebugString(4), ", not a list of names"));
    }
    std::vector<std::string>& list = lists.emplace_back();
    for (int64_t i = 0; i < names->numel(); ++i) {
      // Saves before the save pipeline left the Save task's byte count in
      // the workspace, and a list captured after one names it; it was never
      // saved, so a checkpoint that lists it does not hold it.
      const std::string& name = names->data<std::string>()[i];
      if (name != "checkpoint_saved_bytes") list.push_back(name);
    }
  }
  return lists;
}

absl::Status Checkpointer::Impl::CaptureBlobNames(Session& session) {
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::CaptureBlobNames before Start: the nodes are unknown");
  }
  TaskGroup group("checkpoint_init", GLOBAL);
  for (const NodeState& state : nodes_) {
    Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_init"});
    // Blobs staged for a restore that never came are not the job's.
    task.net().Op("DropStagedBlobs", {}, {},
                  {MakeArg("prefix", std::string(kStagedBlobPrefix))});
    if (blobs_fixed_) {
      // Reused: the list of the first run, also in a new session.
      task.net().Op("GivenTensorStringFill", {}, {BlobRef(kBlobNamesBlob)},
                    {MakeArg("values", state.blobs),
                     MakeArg("shape", std::vector<int64_t>{static_cast<int64_t>(
                                          state.blobs.size())})});
    } else {
      task.net().Op("GetAllBlobNames", {}, {BlobRef(kBlobNamesBlob)},
                    {MakeArg("include_shared", 0)});
    }
    task.AddOutput(BlobRef(kBlobNamesBlob, state.node));
  }
  JG_RETURN_IF_ERROR(Annotate(session.Run(group), "checkpoint init"));
  JG_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> lists,
                      FetchBlobNames(session, ""));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].blobs = std::move(lists[i]);
  }
  blobs_fixed_ = true;
  return absl::OkStatus();
}

absl::Status Checkpointer::Impl::StageFromCopies(Session& session,
                                                 int64_t epoch,
                                                 bool with_blob_lists,
                                                 bool committed) {
  if (on_hosts()) {
    return StageFromHosts(session, epoch, with_blob_lists, committed);
  }
  const std::vector<std::string> dirs = ReadDirs(epoch);
  absl::Status status;
  for (size_t i = 0; i < dirs.size(); ++i) {
    status = Stage(session, epoch, with_blob_lists, committed, dirs[i]);
    if (status.ok() || !absl::IsDataLoss(status) || i + 1 == dirs.size()) {
      break;
    }
    LOG(WARNING) << "the copy of epoch " << epoch << " in " << dirs[i]
                 << " is damaged, reading the one in " << dirs[i + 1]
                 << " instead: " << status.message();
  }
  return status;
}

absl::Status Checkpointer::Impl::Stage(Session& session, int64_t epoch,
                                       bool with_blob_lists, bool committed,
                                       const std::string& dir) {
  return Stage(session, epoch, with_blob_lists, committed,
               std::vector<std::string>(nodes_.size(), dir));
}

absl::Status Checkpointer::Impl::Stage(Session& session, int64_t epoch,
                                       bool with_blob_lists, bool committed,
                                       const std::vector<std::string>& dirs) {
  CHECK_EQ(dirs.size(), nodes_.size());
  // Names this load in every workspace it stages into (the marker), so that
  // a Restore commits only blobs of this load, never those an earlier one
  // left in another session; unique in the process.
  static std::atomic<int64_t> loads{0};
  const std::string stage = absl::StrCat("epoch ", epoch, " #", ++loads);
  // Each database holds exactly the blobs that were checkpointed, the list
  // itself included, so one pass over it restores the blobs and the list.
  // The Load ops check what a verification would (values, files, node and
  // epoch); the nodes load in parallel. Whatever an earlier Stage left in
  // this session goes first (in a group of its own: an op of the load's net
  // holds the marker blob from the net's creation on), so only this load
  // can be committed.
  DropStaged(session);
  TaskGroup group("checkpoint_load", GLOBAL);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeState& state = nodes_[i];
    Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_load"});
    task.net().Op(
        "Load", {}, {},
        {MakeArg("db", CheckpointDbPath(dirs[i], state.file_name, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1),
         MakeArg("load_all", 1),
         MakeArg("add_prefix", std::string(kStagedBlobPrefix)),
         MakeArg("expected_node", state.file_name),
         MakeArg("expected_epoch", epoch)});
    task.net().Op("GivenTensorStringFill", {},
                  {BlobRef(std::string(kStagedBlobPrefix))},
                  {MakeArg("values", std::vector<std::string>{stage}),
                   MakeArg("shape", std::vector<int64_t>{1})});
  }
  absl::Status status = session.Run(group);
  std::vector<std::vector<std::string>> lists;
  if (status.ok() && with_blob_lists) {
    absl::StatusOr<std::vector<std::vector<std::string>>> fetched =
        FetchBlobNames(session, kStagedBlobPrefix);
    if (fetched.ok()) {
      lists = *std::move(fetched);
    } else {
      status = fetched.status();
    }
  }
  if (status.ok()) {
    // One directory, or (on hosts) each node's own: the report says which.
    const bool one_dir =
        std::all_of(dirs.begin(), dirs.end(),
                    [&](const std::string& d) { return d == dirs.front(); });
    staged_ = Staged{epoch, one_dir ? dirs.front() : std::string(), stage,
                     std::move(lists)};
    return status;
  }
  DropStaged(session);
  // The commit log lists the epoch, so a database missing from it is
  // damage, as verification reports it.
  if (committed && absl::IsNotFound(status)) {
    return absl::DataLossError(absl::StrCat("committed epoch ", epoch,
                                            " is damaged: ", status.message()));
  }
  return status;
}

absl::Status Checkpointer::Impl::RunStagingOp(Session& session,
                                              const std::string& op,
                                              std::vector<Argument> args) {
  args.push_back(MakeArg("prefix", std::string(kStagedBlobPrefix)));
  TaskGroup group(absl::StrCat("checkpoint_", op), GLOBAL);
  for (const NodeState& state : nodes_) {
    group.NewTask(Node(state.node), {.name = op}).net().Op(op, {}, {}, args);
  }
  return session.Run(group);
}

void Checkpointer::Impl::DropStaged(Session& session) {
  staged_.reset();
  // Removing blobs cannot fail but for a session that cannot run at all;
  // what stays is dropped by the next Stage.
  absl::Status status = RunStagingOp(session, "DropStagedBlobs", {});
  LOG_IF(ERROR, !status.ok())
      << "dropping staged checkpoint blobs: " << status.message();
}

absl::Status Checkpointer::Impl::CommitStaged(Session& session,
                                              bool check_only) {
  CHECK(staged_.has_value());
  return RunStagingOp(session, "CommitStagedBlobs",
                      {MakeArg("stage", staged_->stage),
                       MakeArg("check_only", check_only ? 1 : 0)});
}

absl::StatusOr<CheckpointStats> Checkpointer::Impl::Restore(Session& session,
                                                            int64_t epoch) {
  WaitForSaves();
  const absl::Time start = absl::Now();
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::Restore before Start: the nodes are unknown");
  }
  const std::string what = absl::StrCat("cannot resume from epoch ", epoch,
                                        " in ", options_.directory);
  // The log as it is now (the run may have committed since Start); with
  // tiers, both logs merged, which also renews where each epoch's copies
  // are.
  absl::StatusOr<CommitLogRead> read =
      on_hosts() ? ReadHostLogs(session) : ReadStartLog();
  const CommittedEpoch* entry =
      read.ok() ? FindCommittedEpoch(read->log, epoch, FileNames()) : nullptr;
  // What Start(session, ...) staged is used if every node of this session
  // holds it (the staged epoch's session may be another, or gone); checked
  // on every node before any commits, so that none is replaced unless all
  // are. A Stage here puts it on every node, or fails.
  const bool staged_here = staged_.has_value() && staged_->epoch == epoch &&
                           CommitStaged(session, /*check_only=*/true).ok();
  if (!staged_here) {
    JG_RETURN_IF_ERROR(
        Annotate(StageFromCopies(session, epoch, !StoppedInInit(entry),
                                 /*committed=*/entry != nullptr),
                 what));
  }
  absl::Status committed = CommitStaged(session, /*check_only=*/false);
  if (!committed.ok()) {
    DropStaged(session);
    return Annotate(committed, what);
  }
  std::vector<std::vector<std::string>> lists = std::move(staged_->blob_lists);
  const std::string read_from = staged_->dir;
  staged_.reset();
  if (!lists.empty()) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].blobs = std::move(lists[i]);
    }
    blobs_fixed_ = true;
  }
  if (pipeline_ != nullptr && entry != nullptr && blobs_fixed_) {
    // The run's next incremental save may refer to what was just restored.
    std::vector<std::vector<std::string>> blobs;
    for (const NodeState& state : nodes_) blobs.push_back(state.blobs);
    pipeline_->RestoredFrom(session, epoch, blobs);
  }

  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  if (entry != nullptr) stats.bytes = entry->total_bytes();
  stats.read_from = read_from;
  if (on_hosts()) {
    stats.tier_bytes = staged_tier_bytes_;
  } else if (tiered()) {
    LOG(INFO) << "epoch " << epoch << ": read " << stats.bytes << " bytes from "
              << (read_from == local_dir_ ? "the local tier "
                                          : "the shared directory ")
              << read_from;
  }
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::StatusOr<bool> Checkpointer::Impl::LoadBlobs(
    Session& session, const std::vector<std::string>& nodes,
    const std::vector<std::string>& blob_names, int64_t epoch) {
  WaitForSaves();
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  // With a local tier, the nearest copy of the epoch as a resume counts
  // them (both logs merged), else the shared directory.
  std::string dir = options_.directory;
  // (On several hosts: the shared directory, which every rank reads.)
  if (tiered() && !on_hosts() && ReadStartLog().ok()) {
    dir = ReadDirs(epoch).front();
  }
  // Unlike Caffe2, every node's database is checked before anything is
  // loaded, so a missing one leaves every workspace untouched.
  TaskGroup check("checkpoint_db_exists", GLOBAL);
  std::vector<TaskOutput> exists;
  for (const NodeState& state : nodes_) {
    Task& task =
        check.NewTask(Node(state.node), {.name = "checkpoint_db_exists"});
    BlobRef found(
        absl::StrCat("checkpoint_db_exists/", state.file_name, ".", epoch),
        state.node);
    task.net().Op(
        "DBExists", {}, {found},
        {MakeArg("db_name", CheckpointDbPath(dir, state.file_name, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1)});
    exists.push_back(task.AddOutput(found));
  }
  JG_RETURN_IF_ERROR(session.Run(check));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    JG_ASSIGN_OR_RETURN(Tensor present, session.Fetch(exists[i]));
    if (!present.scalar<bool>()) {
      LOG(WARNING) << "checkpoint "
                   << CheckpointDbPath(dir, nodes_[i].file_name, epoch)
                   << " does not exist; loading nothing";
      return false;
    }
  }
  TaskGroup load("checkpoint_partial_load", GLOBAL);
  std::vector<BlobRef> outputs(blob_names.begin(), blob_names.end());
  for (const NodeState& state : nodes_) {
    Task& task =
        load.NewTask(Node(state.node), {.name = "checkpoint_partial_load"});
    task.net().Op(
        "Load", {}, outputs,
        {MakeArg("db", CheckpointDbPath(dir, state.file_name, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1),
         MakeArg("allow_incomplete", 1)});
  }
  JG_RETURN_IF_ERROR(session.Run(load));
  return true;
}

}  // namespace jobgraph

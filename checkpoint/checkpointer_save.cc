// The Checkpointer's save path: the ready round, synchronous, background and
// preemption saves, and the commit (see checkpointer.h and FORMAT.md 3).

#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_internal.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/ops/save_load_ops.h"
#include "engine/collectives.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// After a commit that failed: its new log may be in place all the same
// (say, the directory's fsync failed after the rename). Then the epochs it
// retired are unlisted, and no later commit would see them again: their
// databases are deleted here. Those the log still lists stay.
void DeleteIfUnlisted(const std::string& dir,
                      std::vector<CommittedEpoch> retired,
                      absl::Span<const std::string> nodes) {
  if (retired.empty()) return;
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (!log.ok()) return;
  std::vector<CommittedEpoch> unlisted;
  for (CommittedEpoch& e : retired) {
    if (FindCommittedEpoch(*log, e.epoch(), nodes) == nullptr) {
      unlisted.push_back(std::move(e));
    }
  }
  DeleteRetired(dir, unlisted, /*background=*/true).IgnoreError();
}

}  // namespace

using checkpointer_internal::Annotate;
using checkpointer_internal::MicrosSince;
using checkpointer_internal::PrepareDirectory;
using checkpointer_internal::SaveThread;

absl::Status Checkpointer::PrepareSave(int64_t epoch, bool* agreed) {
  absl::Status local = PrepareDirectory(options_.directory);
  if (local.ok()) local = LockNodes();
  *agreed = MayBeListed(epoch);
  if (!*agreed) return local;
  const bool committer = ranks_ == nullptr || ranks_->rank() == 0;
  int64_t newest = -1;  // of the job's entries left in the log
  if (local.ok() && committer) {
    // Before any database is in place: databases without a commit log are
    // then always damage, never a crash before the first commit.
    local = CreateCommitLogIfMissing(options_.directory, options_.db_type);
    // The log must never list an epoch over databases being replaced.
    if (local.ok()) {
      absl::StatusOr<int64_t> left =
          ForgetEpoch(options_.directory, epoch, FileNames());
      if (left.ok()) newest = *left;
      local = left.status();
    }
  }
  if (ranks_ != nullptr) {
    // The failures and rank 0's newest epoch in one small all-reduce.
    JG_ASSIGN_OR_RETURN(
        std::vector<int64_t> sums,
        ranks_->AllReduceSum({local.ok() ? 0 : 1, committer ? newest + 1 : 0}));
    if (sums[0] > 0) return Agree(local);
    newest = sums[1] - 1;
  }
  JG_RETURN_IF_ERROR(local);
  listed_bound_ = newest;
  return absl::OkStatus();
}

void Checkpointer::NoteCommitAttempt(int64_t epoch, bool committed) {
  if (!listed_bound_.has_value()) return;
  // A commit drops the job's later entries; a failed one may still have
  // listed the epoch (say, the log was renamed in place and then its
  // directory's fsync failed).
  listed_bound_ = committed ? epoch : std::max(*listed_bound_, epoch);
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpoch(Session& session,
                                                        int64_t epoch) {
  if (!blobs_fixed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot save epoch ", epoch,
        ": the checkpointed blobs are not fixed yet (call CaptureBlobNames "
        "or Restore first)"));
  }
  if (options_.async) return SaveEpochInBackground(session, epoch);
  WaitForBackgroundSave();
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) blobs.push_back(state.blobs);
  return SaveAndCommit(session, epoch, blobs, std::nullopt);
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpochInBackground(
    Session& session, int64_t epoch) {
  if (ranks_ != nullptr) return SaveEpochOnRanksInBackground(session, epoch);
  const absl::Time start = absl::Now();
  WaitForBackgroundSave();
  const int64_t waited = MicrosSince(start);
  bool agreed = false;  // one process: the status is the only one
  JG_RETURN_IF_ERROR(PrepareSave(epoch, &agreed));
  JG_ASSIGN_OR_RETURN(std::vector<NodeSnapshot> snapshots,
                      SnapshotHostedNodes(session, epoch));
  const absl::Time snapshot_taken = absl::Now();
  if (save_thread_ == nullptr) {
    save_thread_ = std::make_unique<checkpointer_internal::SaveThread>();
  }
  // std::function needs a copyable callable: the snapshot is shared.
  auto frozen =
      std::make_shared<std::vector<NodeSnapshot>>(std::move(snapshots));
  save_thread_->Start([this, epoch, snapshot_taken,
                       snapshots_ptr =
                           std::move(frozen)]() -> BackgroundSaveResult {
    BackgroundSaveResult result;
    result.epoch = epoch;
    auto save = [&]() -> absl::StatusOr<CheckpointStats> {
      CheckpointStats stats;
      stats.epoch = epoch;
      stats.num_dbs = static_cast<int>(snapshots_ptr->size());
      JG_ASSIGN_OR_RETURN(stats.bytes, WriteSnapshots(*snapshots_ptr, epoch));
      absl::Status committed =
          Commit(CommitLogUpdate::Begin(options_.directory), epoch, stats.bytes,
                 snapshot_taken, std::nullopt);
      NoteCommitAttempt(epoch, committed.ok());
      JG_RETURN_IF_ERROR(committed);
      stats.wall_micros = MicrosSince(snapshot_taken);
      return stats;
    };
    result.stats = save();
    return result;
  });
  return InBackground(epoch, waited, start);
}

CheckpointStats Checkpointer::InBackground(int64_t epoch, int64_t waited,
                                           absl::Time start) const {
  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  stats.in_background = true;
  stats.waited_micros = waited;
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::StatusOr<std::vector<Checkpointer::NodeSnapshot>>
Checkpointer::SnapshotHostedNodes(Session& session, int64_t epoch) const {
  std::vector<NodeSnapshot> snapshots;
  for (const NodeState& state : nodes_) {
    if (!Hosts(state)) continue;
    JG_ASSIGN_OR_RETURN(std::vector<BlobSnapshot> blobs,
                        session.SnapshotBlobs(state.node, state.blobs));
    snapshots.push_back({state.node, DbPathOf(state, epoch), state.file_name,
                         std::move(blobs)});
  }
  return snapshots;
}

absl::StatusOr<int64_t> Checkpointer::WriteSnapshots(
    const std::vector<NodeSnapshot>& snapshots, int64_t epoch) const {
  int64_t total = 0;
  for (const NodeSnapshot& node : snapshots) {
    std::vector<BlobToSave> blobs;
    blobs.reserve(node.blobs.size());
    for (const BlobSnapshot& b : node.blobs) {
      blobs.push_back({b.name, b.blob.get()});
    }
    CheckpointDbOptions db_options;
    db_options.node = node.file_name;
    db_options.epoch = epoch;
    db_options.serialization.chunk_bytes = options_.chunk_bytes;
    absl::StatusOr<int64_t> bytes =
        WriteCheckpointDb(options_.db_type, node.path, blobs, db_options);
    if (!bytes.ok()) {
      return Annotate(bytes.status(), absl::StrCat("node '", node.node, "'"));
    }
    total += *bytes;
  }
  return total;
}

bool Checkpointer::MayBeListed(int64_t epoch) const {
  return !listed_bound_.has_value() || epoch <= *listed_bound_;
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpochOnRanksInBackground(
    Session& session, int64_t epoch) {
  const absl::Time start = absl::Now();
  // The previous save's outcome, agreed on; if every rank wrote it, its
  // commit goes to this save's thread.
  SettleRankSaves(/*drain=*/false);
  const int64_t waited = MicrosSince(start);
  // A save that may take an entry out of the commit log prepares with the
  // other ranks (PrepareSave), and the log it edits must hold the pending
  // commit first. That commit may settle it: it drops the job's later
  // entries, and PrepareSave then has nothing to take out (no exchange).
  absl::Status local;
  if (MayBeListed(epoch)) {
    CommitPendingNow();
    bool agreed = false;
    local = PrepareSave(epoch, &agreed);
    if (agreed) JG_RETURN_IF_ERROR(local);
  }
  // Otherwise the run holds its locks (the save that made the bound known
  // took them), and the directory is checked on the thread, off the job's
  // path. An error from here on is this rank's own: it becomes the outcome
  // of its save, agreed on at the next settling like a failed write.
  std::vector<NodeSnapshot> snapshots;
  if (local.ok()) {
    absl::StatusOr<std::vector<NodeSnapshot>> taken =
        SnapshotHostedNodes(session, epoch);
    if (taken.ok()) {
      snapshots = *std::move(taken);
    } else {
      local = taken.status();
    }
  }
  RankSaveInFlight flight;
  flight.epoch = epoch;
  flight.commit = std::exchange(pending_commit_, std::nullopt);
  flight.commit_report = std::make_shared<ThreadCommit>();
  if (save_thread_ == nullptr) {
    save_thread_ = std::make_unique<checkpointer_internal::SaveThread>();
  }
  auto frozen =
      std::make_shared<std::vector<NodeSnapshot>>(std::move(snapshots));
  const bool committer = ranks_->rank() == 0;
  save_thread_->Start([this, epoch, local, committer, commit = flight.commit,
                       commit_report = flight.commit_report,
                       snapshots_ptr =
                           std::move(frozen)]() -> BackgroundSaveResult {
    // The earlier epoch first: its commit must not wait for this one's
    // databases.
    if (commit.has_value() && committer) {
      commit_report->status = CommitWritten(*commit, &commit_report->micros);
    }
    const absl::Time write_start = absl::Now();
    BackgroundSaveResult result;
    result.epoch = epoch;
    absl::Status ready = local;
    if (ready.ok()) ready = PrepareDirectory(options_.directory);
    if (!ready.ok()) {
      result.stats = ready;
      return result;
    }
    absl::StatusOr<int64_t> bytes = WriteSnapshots(*snapshots_ptr, epoch);
    if (!bytes.ok()) {
      result.stats = bytes.status();
      return result;
    }
    CheckpointStats stats;
    stats.epoch = epoch;
    stats.bytes = *bytes;  // this rank's; the settling adds up all
    stats.write_micros = MicrosSince(write_start);
    result.stats = stats;
    return result;
  });
  in_flight_ = std::move(flight);
  return InBackground(epoch, waited, start);
}

void Checkpointer::SettleRankSaves(bool drain) {
  if (in_flight_.has_value()) {
    RankSaveInFlight flight = *std::move(in_flight_);
    in_flight_.reset();
    std::optional<BackgroundSaveResult> written = save_thread_->Wait();
    CHECK(written.has_value() && written->epoch == flight.epoch)
        << "the save thread lost the save of epoch " << flight.epoch;
    const absl::Status& write = written->stats.status();
    const absl::Status commit = flight.commit_report->status;
    // Three figures in one all-reduce: this rank's write failed, its bytes,
    // and (rank 0) the commit on its thread failed.
    // Open MPI's errors are fatal (MPI_ERRORS_ARE_FATAL): an error here
    // would leave the ranks on different paths, so it must not return.
    absl::StatusOr<std::vector<int64_t>> reduced = ranks_->AllReduceSum(
        {write.ok() ? 0 : 1, write.ok() ? written->stats->bytes : 0,
         commit.ok() ? 0 : 1});
    CHECK(reduced.ok()) << "agreeing on the save of epoch " << flight.epoch
                        << ": " << reduced.status();
    const std::vector<int64_t>& sums = *reduced;
    if (flight.commit.has_value()) {
      const PendingCommit& c = *flight.commit;
      // Rank 0's status, as a commit made at once reports it.
      const absl::Status agreed =
          sums[2] > 0 ? OnCommitter([&] { return commit; }) : absl::OkStatus();
      FinishCommit(c, agreed, flight.commit_report->micros);
    }
    const absl::Status agreed = sums[0] > 0 ? Agree(write) : absl::OkStatus();
    if (!agreed.ok()) {
      finished_.push_back({flight.epoch, agreed});
    } else {
      pending_commit_ =
          PendingCommit{flight.epoch, sums[1], written->stats->write_micros};
      // An upper bound while the commit is in flight (PrepareSave). The
      // run's first save made it known.
      if (listed_bound_.has_value()) {
        listed_bound_ = std::max(*listed_bound_, flight.epoch);
      }
    }
  }
  if (drain) CommitPendingNow();
}

void Checkpointer::CommitPendingNow() {
  if (!pending_commit_.has_value()) return;
  const PendingCommit c = *std::exchange(pending_commit_, std::nullopt);
  int64_t micros = 0;
  const absl::Status committed =
      OnCommitter([&] { return CommitWritten(c, &micros); });
  FinishCommit(c, committed, micros);
}

absl::Status Checkpointer::CommitWritten(const PendingCommit& commit,
                                         int64_t* micros) {
  const absl::Time start = absl::Now();
  // The log records the save's time: the databases' writing, then this
  // commit, without the wait for the epoch boundary between them.
  const absl::Status status = Commit(
      CommitLogUpdate::Begin(options_.directory), commit.epoch, commit.bytes,
      start - absl::Microseconds(commit.write_micros), std::nullopt);
  *micros = MicrosSince(start);
  return status;
}

void Checkpointer::FinishCommit(const PendingCommit& commit,
                                const absl::Status& status,
                                int64_t commit_micros) {
  NoteCommitAttempt(commit.epoch, status.ok());
  BackgroundSaveResult result;
  result.epoch = commit.epoch;
  if (status.ok()) {
    CheckpointStats stats;
    stats.epoch = commit.epoch;
    stats.num_dbs = static_cast<int>(nodes_.size());
    stats.bytes = commit.bytes;
    // This rank's write; rank 0's commit (0 elsewhere: only its status
    // reaches the others).
    stats.write_micros = commit.write_micros;
    stats.commit_micros = commit_micros;
    stats.wall_micros = commit.write_micros + commit_micros;
    result.stats = stats;
  } else {
    result.stats = status;
  }
  finished_.push_back(std::move(result));
}

absl::StatusOr<CheckpointStats> Checkpointer::SavePreempted(
    Session& session, int64_t epoch, const Preemption& preemption) {
  WaitForBackgroundSave();
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::SavePreempted before Start: the nodes are unknown");
  }
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) {
    absl::StatusOr<Tensor> value =
        session.FetchBlob(state.node, kPlanPositionBlob);
    PlanPosition position;
    if (!value.ok() || value->dtype() != STRING || value->numel() != 1 ||
        !position.ParseFromString(value->data<std::string>()[0])) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", state.node, "' holds no plan position of a stopped run (",
          value.ok() ? "damaged" : value.status().message(),
          "); only a run stopped on request can be saved mid-epoch"));
    }
    if (!position.cannot_save().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the state of node '", state.node,
          "' at the stop cannot be saved: ", position.cannot_save()));
    }
    std::vector<std::string> names;
    for (const std::string& name : position.root_blob()) {
      // The byte count of an earlier save describes that save only.
      if (name != kSavedBytesBlob) names.push_back(name);
    }
    blobs.push_back(std::move(names));
  }
  return SaveAndCommit(session, epoch, blobs, preemption);
}

absl::Status Checkpointer::MarkLoopFinished(int64_t epoch,
                                            const Preemption& preemption) {
  WaitForBackgroundSave();
  return OnCommitter([&] {
    return MarkEpochLoopFinished(options_.directory, epoch, FileNames(),
                                 preemption);
  });
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveAndCommit(
    Session& session, int64_t epoch,
    const std::vector<std::vector<std::string>>& blobs,
    const std::optional<Preemption>& preemption) {
  const absl::Time start = absl::Now();
  bool agreed = false;
  const absl::Status ready = PrepareSave(epoch, &agreed);
  if (agreed) JG_RETURN_IF_ERROR(ready);
  // Each rank saves its own nodes and adds up their bytes; the ranks then
  // agree once on everything (readiness, saves, bytes) in one exchange.
  auto local_bytes = [&]() -> absl::StatusOr<int64_t> {
    JG_RETURN_IF_ERROR(ready);
    // The tasks of this rank's nodes only: building (and freeing) a task
    // per node of the job on every rank would cost each rank in proportion
    // to the job's size, on the commit's path.
    TaskGroup group("checkpoint_save", GLOBAL);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeState& state = nodes_[i];
      if (!Hosts(state)) continue;
      std::vector<BlobRef> inputs(blobs[i].begin(), blobs[i].end());
      Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_save"});
      task.net().Op(
          "Save", inputs, {BlobRef(kSavedBytesBlob)},
          {MakeArg("db", DbPathOf(state, epoch)),
           MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1),
           MakeArg("chunk_bytes", options_.chunk_bytes),
           MakeArg("node", state.file_name), MakeArg("epoch", epoch)});
      task.AddOutput(BlobRef(kSavedBytesBlob, state.node));
    }
    JG_RETURN_IF_ERROR(session.RunHosted(group));
    int64_t total = 0;
    for (const NodeState& state : nodes_) {
      if (!Hosts(state)) continue;
      JG_ASSIGN_OR_RETURN(Tensor bytes,
                          session.FetchHostedBlob(state.node, kSavedBytesBlob));
      if (bytes.dtype() != INT64 || bytes.numel() != 1) {
        return absl::InternalError(absl::StrCat(
            "the save of node '", state.node, "' reported ",
            bytes.DebugString(4), " instead of its size in bytes"));
      }
      total += bytes.scalar<int64_t>();
    }
    return total;
  };
  // On several ranks, rank 0 prepares its commit first (locks and reads the
  // log, keeps its previous copy, creates the new log's file), before its
  // own databases: never after the last rank's save, where every rank would
  // wait for it. The commit after the agreement is then the edit, one
  // write and its fsync, the rename and the directory's fsync. Other
  // writers of the directory wait for the lock meanwhile; this job's ranks
  // never take it.
  const bool rank_zero = ranks_ != nullptr && ranks_->rank() == 0;
  absl::StatusOr<CommitLogUpdate> update =
      absl::InternalError("only rank 0 commits");
  if (rank_zero && ready.ok()) {
    update = CommitLogUpdate::Begin(options_.directory);
    if (update.ok()) {
      if (absl::Status prepared = update->Prepare(); !prepared.ok()) {
        update = std::move(prepared);
      }
    }
  }
  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  absl::StatusOr<int64_t> mine = local_bytes();
  const absl::Time written = absl::Now();
  stats.write_micros = absl::ToInt64Microseconds(written - start);
  absl::Time agreed_at = written;
  absl::Status committed;
  if (ranks_ == nullptr) {
    JG_ASSIGN_OR_RETURN(stats.bytes, std::move(mine));
    committed = Commit(CommitLogUpdate::Begin(options_.directory), epoch,
                       stats.bytes, start, preemption);
  } else {
    // Two collectives with rank 0 at the centre: the failures and the bytes
    // reach rank 0 alone; rank 0 commits, through the update it prepared,
    // if no rank failed; its outcome (the failed ranks, the total bytes,
    // its commit's code) reaches every rank.
    JG_ASSIGN_OR_RETURN(
        std::vector<int64_t> sums,
        ranks_->ReduceSumToRoot({mine.ok() ? *mine : 0, mine.ok() ? 0 : 1}, 0));
    agreed_at = absl::Now();
    stats.agree_micros = absl::ToInt64Microseconds(agreed_at - written);
    std::vector<int64_t> outcome = {0, 0, 0};
    if (rank_zero) {
      outcome = {sums[1], sums[0], 0};
      if (sums[1] == 0) {
        // Every rank's databases are durable: the epoch is committed by one
        // rank, for all.
        committed =
            Commit(std::move(update), epoch, sums[0], start, preemption);
        outcome[2] = committed.raw_code();
      }
    }
    JG_ASSIGN_OR_RETURN(outcome, ranks_->BroadcastInts(std::move(outcome), 0));
    if (outcome[0] > 0) {
      // The messages: which rank failed, and why.
      JG_RETURN_IF_ERROR(Agree(mine.status()));
      return absl::InternalError(absl::StrCat("the ranks counted ", outcome[0],
                                              " failed saves of epoch ", epoch,
                                              " but reported none"));
    }
    stats.bytes = outcome[1];
    committed = RankZeroStatus(*ranks_, outcome[2], committed);
  }
  NoteCommitAttempt(epoch, committed.ok());
  JG_RETURN_IF_ERROR(committed);
  stats.commit_micros = MicrosSince(agreed_at);
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::Status Checkpointer::Commit(absl::StatusOr<CommitLogUpdate> update,
                                  int64_t epoch, int64_t bytes,
                                  absl::Time start,
                                  const std::optional<Preemption>& preemption) {
  JG_RETURN_IF_ERROR(update.status());
  EpochCommit commit;
  commit.epoch = epoch;
  commit.nodes = FileNames();
  commit.total_bytes = bytes;
  commit.save_micros = MicrosSince(start);
  commit.preemption = preemption;
  // The epochs that retention retires leave the log in the commit's own
  // write: one write, and a crash never leaves them listed beside the new
  // epoch. Their databases go once the log no longer lists them.
  std::vector<CommittedEpoch> retired;
  commit.also = [&](CommitLog& log) {
    retired = RetireEpochs(log, options_.retention, commit.nodes);
  };
  if (absl::Status committed =
          CommitEpoch(*std::move(update), options_.db_type, commit);
      !committed.ok()) {
    DeleteIfUnlisted(options_.directory, std::move(retired), commit.nodes);
    return committed;
  }
  // The epoch is committed now; a failure to delete old databases must not
  // turn it into a failed save. It is logged; those databases stay on disk,
  // unlisted (`ckpt list` shows them as uncommitted, `ckpt gc` counts them).
  absl::Status retention =
      DeleteRetired(options_.directory, retired, /*background=*/true).status();
  if (!retention.ok()) {
    LOG(ERROR) << "epoch " << epoch << " is committed in " << options_.directory
               << ", but retention failed: " << retention;
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

// Checkpointer: snapshots the root workspaces of a job's checkpointed nodes
// into one database per node per epoch, "<dir>/<node>.<epoch>", commits each
// epoch in the directory's commit log, and restores them.
//
// A JobRunner makes one call per phase of a run:
//
//   Start(session, nodes, resume)
//                             checks the options and node names, locks the
//                             nodes in the directory (node_lock.h) and
//                             chooses the epoch to resume from
//                             (resume_choice.h), loading it into staged
//                             blobs as it checks it;
//   CaptureBlobNames(session) from scratch, after the init group: fixes the
//                             checkpointed blobs of every node;
//   Restore(session, epoch)   on resume: puts the staged blobs in place
//                             and fixes the checkpointed blobs from them;
//   SaveEpoch(session, epoch) after init (epoch 0) and after every epoch:
//                             creates the directory, writes every node's
//                             database durably under its final name, commits
//                             the epoch, applies retention;
//   SavePreempted(session, e, p)
//                             after a run stopped on request in the middle
//                             of epoch e (or of init, e = 0): saves every
//                             node's root workspace and plan position
//                             (session.h) as epoch e, committed with the
//                             Preemption `p`; the epoch's ordinary save
//                             replaces it later;
//   MarkLoopFinished(e, p)    after a stop once the epoch loop had ended at
//                             epoch e: marks e so that a resume runs the
//                             download and exit groups, not another epoch;
//   End()                     releases the nodes' locks.
//
// After Start, resumed_preemption() says whether the chosen epoch is such a
// preemption checkpoint, and where the run stopped.
//
// As in Caffe2, the checkpointed blobs of a node are the blobs in its root
// workspace once the init group has run (GetAllBlobNames; the list is stored
// in the "blob_names" blob, which is itself checkpointed), or on resume the
// list stored in the checkpoint. The Save and Load operators run as tasks on
// the node that owns the blobs, so a Checkpointer works on any Session.
//
// One Checkpointer serves jobs of one or many nodes. CheckpointManager and
// MultiNodeCheckpointManager (below) are Caffe2's names for it.
//
// A Checkpointer may be reused for several runs of the same job, also with a
// new Session each time: it keeps the blob lists it fixed and writes them
// into the session when a run starts from scratch again.
//
// Not thread-safe; used by one JobRunner at a time. With
// CheckpointOptions::async a save runs on a thread of its own, which reads
// the snapshot, the options and the node names (fixed during a run), and on
// several ranks also writes rank 0's commit of the previous epoch (the
// thread never calls MPI: the ranks agree on the job's thread); a
// snapshot is freed by that thread when the next save starts (or with the
// Checkpointer), never while the epoch in which its save ended runs.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/resume_from.h"
#include "engine/session.h"

namespace jobgraph {
namespace checkpointer_internal {
class SaveThread;
}  // namespace checkpointer_internal

// The blob that holds the list of checkpointed blob names, in every node's
// root workspace and in every checkpoint.
inline constexpr char kBlobNamesBlob[] = "blob_names";
// The blob the save task writes the saved bytes into (not checkpointed: it is
// created after the blob list is fixed).
inline constexpr char kSavedBytesBlob[] = "checkpoint_saved_bytes";
// What a restore loads each blob as until every node's load has succeeded
// (the "staged" blobs of save_load_ops.h). Reserved: a restore, and the
// capture of a node's blob list, drop the root-workspace blobs named so.
inline constexpr char kStagedBlobPrefix[] = "__jobgraph_staged__/";

struct CheckpointOptions {
  // Directory that holds the databases and the commit log; created (with
  // its parents) on the first save. Required.
  std::string directory;
  // Database type from the DB registry ("leveldb"; "memory" for tests).
  std::string db_type = "leveldb";
  // For a job with one checkpointed node: the name its databases carry
  // (Caffe2's node_name). Empty: the node's own name. Must be empty when
  // the job checkpoints several nodes.
  std::string node_name;
  // Tensors are split into database values of at most this many bytes.
  int64_t chunk_bytes = int64_t{64} << 20;
  // Which committed epochs to keep after each commit.
  RetentionOptions retention;
  // Save in the background: SaveEpoch blocks only while it freezes the
  // checkpointed blobs (Session::SnapshotBlobs: tensors are shared
  // copy-on-write, so this grows with the number of blobs, not their
  // bytes); serializing, writing, syncing and the commit run on a
  // background thread while the job goes on. At most one save is in flight:
  // the next SaveEpoch waits for it first, as do Start, Restore,
  // SavePreempted, MarkLoopFinished, LoadBlobs and End.
  // A crash before the background commit leaves the previous epoch as the
  // newest committed one.
  // On several ranks (MpiSession) each rank writes its own nodes' databases
  // on its thread; the ranks agree on the outcome at the next SaveEpoch (or
  // any call that waits), and rank 0 then commits that epoch on its thread,
  // before it writes the next epoch's databases, its status agreed on at the
  // save after. A save's outcome (TakeFinishedSaves) is thus known one save
  // later, or two for the commit log's status, the same on every rank; an
  // epoch costs one small all-reduce, and no rank waits for the commit-log
  // write. A crash loses at most the epochs not committed yet.
  bool async = false;
};

// Size and duration of one save or restore.
struct CheckpointStats {
  int64_t epoch = 0;
  // Databases written or read (one per checkpointed node).
  int num_dbs = 0;
  // Bytes of blob data in those databases (their blob indexes' totals).
  int64_t bytes = 0;
  // The time the caller was blocked (for an asynchronous save: the wait for
  // the previous save plus the snapshot).
  int64_t wall_micros = 0;
  // An asynchronous save that is still being written (bytes unknown yet).
  bool in_background = false;
  // Of wall_micros, the time spent waiting for the save in flight.
  int64_t waited_micros = 0;
  // Of wall_micros of a synchronous save: writing this rank's databases
  // (on rank 0 of several, after preparing the commit-log write), then
  // agreeing with the other ranks on the outcome (the wait for the slowest;
  // nothing on one rank), then the commit (the commit-log write, and its
  // status reaching every rank).
  int64_t write_micros = 0;
  int64_t agree_micros = 0;
  int64_t commit_micros = 0;
};

// The outcome of a save that ran in the background (CheckpointOptions::async).
struct BackgroundSaveResult {
  int64_t epoch = 0;
  // On success, wall_micros is the time from the snapshot to the commit.
  absl::StatusOr<CheckpointStats> stats;
};

class Checkpointer {
 public:
  explicit Checkpointer(CheckpointOptions options);
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  ~Checkpointer();

  // Starts a run that checkpoints `nodes` (the job's nodes to checkpoint,
  // in order) and returns the epoch to resume from, or nullopt to start from
  // scratch. Takes each node's lock in the directory (creating the
  // directory); if the directory cannot be created yet, the first save
  // takes them. InvalidArgument for missing options, an empty node list, a
  // node name that cannot be a file name, or nodes that differ from an
  // earlier run of this Checkpointer; FailedPrecondition naming the holder
  // when another run holds a node; the resume choice's errors otherwise.
  absl::StatusOr<std::optional<int64_t>> Start(
      const std::vector<std::string>& nodes, const ResumeFrom& resume);
  // Start for a run on `session` (borrowed for the run), which may span
  // several ranks (MpiSession): then each rank locks and writes the
  // databases of the nodes it hosts, rank 0 alone writes the commit log once
  // every rank's databases are durable and tells the others, and the epoch
  // to resume from is chosen on rank 0 and sent to all. Every call of the
  // run is then collective, with the same result on every rank. The
  // directory must be one shared file system for all ranks.
  // A candidate epoch is checked by loading it (every node in parallel,
  // each rank its own nodes) into staged blobs beside the workspaces' own;
  // damage found while loading drops them and, for latest, the next older
  // epoch is tried. Restore(session, epoch) then only commits the staged
  // blobs, so a resume reads each database once. Call Restore next (a
  // JobRunner does): blobs staged for a Restore that never came stay in the
  // session until its next Stage or CaptureBlobNames drops them.
  absl::StatusOr<std::optional<int64_t>> Start(
      Session& session, const std::vector<std::string>& nodes,
      const ResumeFrom& resume);

  // From scratch, after the init group has run: fixes every node's
  // checkpointed blobs as the blobs in its root workspace now. A reused
  // Checkpointer keeps the lists of its first run (Caffe2) and writes them
  // into `session`'s "blob_names" blobs.
  absl::Status CaptureBlobNames(Session& session);

  // On resume: loads every blob that each node's database of `epoch` holds
  // into the node's root workspace, and fixes the checkpointed blobs as
  // those. All or nothing: every node's database is loaded into staged
  // blobs first (unless Start(session, ...) staged this epoch in this
  // session; after Start(nodes, ...), which only verifies, it is read
  // again), and
  // only when all loads succeeded do they replace the workspaces' blobs, so
  // on an error every workspace is as it was. Errors name the epoch and the
  // directory; damage is DataLoss.
  absl::StatusOr<CheckpointStats> Restore(Session& session, int64_t epoch);

  // Saves every node's checkpointed blobs as `epoch` and commits the epoch.
  // Each node's database is durable under its final name before the commit
  // log lists the epoch; on any error nothing new is committed and earlier
  // epochs stay as they were. A retention failure after the commit is
  // logged and does not fail the save.
  absl::StatusOr<CheckpointStats> SaveEpoch(Session& session, int64_t epoch);

  // Saves a run that stopped on request in the middle of `epoch` (of the
  // init group for epoch 0) and commits it marked with `preemption`. Every
  // node's database holds the root-workspace blobs its plan position names
  // (kPlanPositionBlob included); the session must hold those positions.
  // Errors as SaveEpoch.
  absl::StatusOr<CheckpointStats> SavePreempted(Session& session, int64_t epoch,
                                                const Preemption& preemption);

  // Marks the committed `epoch` as the last of the run's epoch loop
  // (preemption.group must be "download"). NotFound if it is not committed.
  absl::Status MarkLoopFinished(int64_t epoch, const Preemption& preemption);

  // Set by Start when the epoch to resume from is a preemption checkpoint.
  const std::optional<Preemption>& resumed_preemption() const {
    return resumed_preemption_;
  }

  // Ends the run: waits for a background save, releases the nodes' locks
  // (also done by the destructor). On several ranks with async, the wait is
  // collective and runs on the run's session: call End while that session
  // lives (a JobRunner does, at the end of every run).
  void End();

  // Waits until no save runs in the background.
  void WaitForBackgroundSave();
  // The background saves that have finished since the last call, oldest
  // first (their failures are also logged if nobody takes them).
  std::vector<BackgroundSaveResult> TakeFinishedSaves();

  // Loads `blob_names` from each of `nodes`' databases of `epoch` into that
  // node's root workspace, leaving blobs a database lacks untouched. Checks
  // first that every node's database exists; returns false, loading
  // nothing, if one does not.
  absl::StatusOr<bool> LoadBlobs(Session& session,
                                 const std::vector<std::string>& nodes,
                                 const std::vector<std::string>& blob_names,
                                 int64_t epoch);

  // "<dir>/<name>.<epoch>" for checkpointed `node` (of the last Start, or
  // of LoadBlobs), where <name> is options().node_name if set; nullopt for
  // any other node.
  std::optional<std::string> DbPath(const std::string& node,
                                    int64_t epoch) const;

  // The checkpointed nodes, as given to Start.
  std::vector<std::string> nodes() const;
  const CheckpointOptions& options() const { return options_; }

 protected:
  // For CheckpointManager: refuse jobs with more than one checkpointed node.
  Checkpointer(CheckpointOptions options, bool single_node);

 private:
  struct NodeState {
    std::string node;                // where the tasks run: the job's node
    std::string file_name;           // what the databases are named after
    std::vector<std::string> blobs;  // fixed by CaptureBlobNames / Restore
  };
  // An epoch whose databases every rank wrote, not committed yet.
  struct PendingCommit {
    int64_t epoch = 0;
    int64_t bytes = 0;  // of every rank's databases
    // This rank's time writing its databases (on its thread): with the
    // commit's own, the save's time (the waits for epoch boundaries left
    // out).
    int64_t write_micros = 0;
  };
  // What rank 0's save thread reports of the commit it ran.
  struct ThreadCommit {
    absl::Status status;
    int64_t micros = 0;
  };
  // A save on this rank's thread (several ranks, async): it first commits
  // `commit` (rank 0 does, filling *commit_report), then writes the
  // databases of `epoch` that this rank hosts.
  struct RankSaveInFlight {
    int64_t epoch = 0;
    std::optional<PendingCommit> commit;
    std::shared_ptr<ThreadCommit> commit_report;
  };

  absl::Status SetNodes(const std::vector<std::string>& nodes);
  // Takes the lock of every node this rank hosts unless this run holds them
  // already.
  absl::Status LockNodes();
  // The rest of Start: locks, the resume choice (made on rank 0). With a
  // session, the chosen epoch is left staged for Restore.
  absl::StatusOr<std::optional<int64_t>> ChooseStart(Session* session,
                                                     const ResumeFrom& resume);
  // Loads every node's database of `epoch` into staged blobs (kStagedBlob-
  // Prefix), replacing any staged before, and, `with_blob_lists`, their blob
  // lists; the loads check what a verification would. On an error nothing
  // stays staged: DataLoss for damage, a missing database included when
  // the epoch is `committed`.
  absl::Status Stage(Session& session, int64_t epoch, bool with_blob_lists,
                     bool committed);
  // Runs staging operator `op` (save_load_ops.h) with `args` and the
  // staged prefix on every node, in one group.
  absl::Status RunStagingOp(Session& session, const std::string& op,
                            std::vector<Argument> args);
  // Removes the staged blobs of `session`.
  void DropStaged(Session& session);
  // Puts the blobs of the last Stage in place in `session` (with
  // `check_only`, only checks that every node holds them);
  // FailedPrecondition when a node does not. Needs staged_.
  absl::Status CommitStaged(Session& session, bool check_only);
  // Gets the directory, the locks and the commit log ready for a save of
  // `epoch`. When the log may list `epoch` (or nothing is known of it yet,
  // at the first save of a run), the epoch's old entry is taken out of it
  // before any database of the epoch is replaced, and the ranks agree on
  // that first: `*agreed` is then true and an error is every rank's.
  // Otherwise no rank waits for another here (`*agreed` false): the status
  // is this rank's own, to be agreed on with the save's outcome.
  absl::Status PrepareSave(int64_t epoch, bool* agreed);
  // After a commit of `epoch` was tried (the outcome is every rank's):
  // keeps listed_bound_ an upper bound.
  void NoteCommitAttempt(int64_t epoch, bool committed);
  // Whether this rank writes `state`'s databases and holds its lock.
  bool Hosts(const NodeState& state) const;
  // `fn` on the rank that writes the commit log, its status on every rank.
  absl::Status OnCommitter(const std::function<absl::Status()>& fn) const;
  // The first error of any rank, on every rank.
  absl::Status Agree(const absl::Status& local) const;
  // The asynchronous SaveEpoch.
  absl::StatusOr<CheckpointStats> SaveEpochInBackground(Session& session,
                                                        int64_t epoch);
  // The asynchronous SaveEpoch on several ranks (CheckpointOptions::async).
  absl::StatusOr<CheckpointStats> SaveEpochOnRanksInBackground(Session& session,
                                                               int64_t epoch);
  // On several ranks: waits for this rank's save in flight, and the ranks
  // agree (one all-reduce) on its databases and on the commit its thread
  // ran; their outcomes go to finished_. An epoch whose databases every
  // rank wrote is then committed now (`drain`: rank 0 writes the log, every
  // rank gets its status) or left in pending_commit_ for the next save's
  // thread. Collective; nothing to do (and no exchange) when no save is in
  // flight.
  void SettleRankSaves(bool drain);
  // Commits pending_commit_, if any, now (collective).
  void CommitPendingNow();
  // Commits `commit` (on rank 0, or in one process): its status, and the
  // commit's time in *micros.
  absl::Status CommitWritten(const PendingCommit& commit, int64_t* micros);
  // Records the agreed `status` of the commit of `commit`, which took
  // `commit_micros` (finished_).
  void FinishCommit(const PendingCommit& commit, const absl::Status& status,
                    int64_t commit_micros);
  // What a background save writes for one node.
  struct NodeSnapshot {
    std::string node;
    std::string path;       // of its database of the epoch
    std::string file_name;  // NodeState::file_name
    std::vector<BlobSnapshot> blobs;
  };
  // What SaveEpoch returns for a save it left in the background: it waited
  // `waited` for the previous one, and started at `start`.
  CheckpointStats InBackground(int64_t epoch, int64_t waited,
                               absl::Time start) const;
  // The checkpointed blobs of every node this rank hosts, frozen.
  absl::StatusOr<std::vector<NodeSnapshot>> SnapshotHostedNodes(
      Session& session, int64_t epoch) const;
  // Writes each snapshot's database of `epoch` durably; the bytes of blob
  // data written. Errors name the node.
  absl::StatusOr<int64_t> WriteSnapshots(
      const std::vector<NodeSnapshot>& snapshots, int64_t epoch) const;
  // Whether a save of `epoch` must first take an entry of it out of the
  // commit log (see PrepareSave).
  bool MayBeListed(int64_t epoch) const;
  // Records the epoch in the commit log through `update` (begun by the
  // caller, perhaps long before and prepared: see SaveAndCommit), then
  // applies retention. An error in `update` is the commit's.
  absl::Status Commit(absl::StatusOr<CommitLogUpdate> update, int64_t epoch,
                      int64_t bytes, absl::Time start,
                      const std::optional<Preemption>& preemption);
  // Saves blobs[i] of node i as `epoch` and commits them.
  absl::StatusOr<CheckpointStats> SaveAndCommit(
      Session& session, int64_t epoch,
      const std::vector<std::vector<std::string>>& blobs,
      const std::optional<Preemption>& preemption);
  // Each node's "blob_names" blob (named with `prefix` first), without
  // kSavedBytesBlob, in node order.
  absl::StatusOr<std::vector<std::vector<std::string>>> FetchBlobNames(
      const Session& session, absl::string_view prefix) const;
  std::string DbPathOf(const NodeState& state, int64_t epoch) const;
  // NodeState::file_name of every node: the names in the commit log.
  std::vector<std::string> FileNames() const;

  const CheckpointOptions options_;
  const bool single_node_;
  std::vector<NodeState> nodes_;
  bool blobs_fixed_ = false;
  std::optional<Preemption> resumed_preemption_;
  // What the last Stage loaded, for Restore to commit.
  struct Staged {
    int64_t epoch = 0;
    std::string stage;  // the load's name, in the staged blobs' marker
    // Per node; empty when the lists were not loaded (stopped in init).
    std::vector<std::vector<std::string>> blob_lists;
  };
  std::optional<Staged> staged_;
  // The thread that writes asynchronous saves (one for the Checkpointer's
  // life, so the memory its saves free is reused by the next one), and the
  // finished saves not yet taken.
  std::unique_ptr<checkpointer_internal::SaveThread> save_thread_;
  std::vector<BackgroundSaveResult> finished_;
  // On several ranks with async: an epoch every rank wrote, to be committed.
  std::optional<PendingCommit> pending_commit_;
  // On several ranks with async: the save on this rank's thread.
  std::optional<RankSaveInFlight> in_flight_;
  std::vector<std::unique_ptr<NodeLock>> locks_;  // empty outside a run
  // The session of the run (Start), for its ranks; null: one process.
  const Session* ranks_ = nullptr;
  // An upper bound of the epochs of this job that the commit log lists, the
  // same on every rank (-1: none); unknown until the first save of a run.
  // Only this job adds its entries (it holds its nodes' locks), so a save
  // of a newer epoch has nothing to take out of the log (PrepareSave).
  std::optional<int64_t> listed_bound_;
};

// Caffe2's single-node manager: a Checkpointer that refuses jobs with more
// than one checkpointed node.
class CheckpointManager : public Checkpointer {
 public:
  explicit CheckpointManager(CheckpointOptions options)
      : Checkpointer(std::move(options), /*single_node=*/true) {}
};

// Caffe2's multi-node manager is the Checkpointer itself.
using MultiNodeCheckpointManager = Checkpointer;

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_

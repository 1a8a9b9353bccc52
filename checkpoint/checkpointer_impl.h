// Internal to the Checkpointer (checkpointer.cc, checkpointer_save.cc,
// checkpointer_restore.cc): its state and the steps its calls share. The
// saves themselves run through the save pipeline
// (pipeline/save_pipeline.h); this holds what a run knows around it: the
// nodes and their blob lists, the resume choice, the staged restore.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINTER_IMPL_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINTER_IMPL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/pipeline/coordinator.h"
#include "checkpoint/pipeline/save_pipeline.h"
#include "checkpoint/pipeline/save_queue.h"
#include "checkpoint/tier/flusher.h"
#include "checkpoint/tier/host_tiers.h"
#include "checkpoint/tier/tier_log.h"
#include "checkpoint/util/pause_gate.h"
#include "engine/operator.h"
#include "engine/session.h"

namespace jobgraph {

// Whether the committed `entry` (may be null) is a preemption checkpoint
// taken in the middle of init, whose blob list is fixed only when init ends.
inline bool StoppedInInit(const CommittedEpoch* entry) {
  return entry != nullptr && entry->has_preemption() &&
         entry->preemption().group() == JOB_GROUP_INIT;
}

class Checkpointer::Impl {
 public:
  Impl(CheckpointOptions options, bool single_node);
  ~Impl();

  struct NodeState {
    std::string node;                // where the tasks run: the job's node
    std::string file_name;           // what the databases are named after
    std::vector<std::string> blobs;  // fixed by CaptureBlobNames / Restore
  };

  // What the last Stage loaded, for Restore to put in place.
  struct Staged {
    int64_t epoch = 0;
    std::string dir;    // where it was read from
    std::string stage;  // the load's name, in the staged blobs' marker
    // Per node; empty when the lists were not loaded (stopped in init).
    std::vector<std::vector<std::string>> blob_lists;
  };

  // --- checkpointer.cc: the run.

  // Checks and keeps `nodes` (the same as an earlier run's, if any).
  absl::Status SetNodes(const std::vector<std::string>& nodes);
  // A pipeline for a run on `session` (null: one process, no session);
  // the one of the run in progress is drained first.
  void StartPipeline(const Session* session);
  // The pipeline of the run; a save after End starts one on `session`.
  SavePipeline& Pipeline(const Session& session);
  // The rest of Start: the locks and the resume choice. With a session,
  // the chosen epoch is left staged for Restore.
  absl::StatusOr<std::optional<int64_t>> ChooseStart(Session* session,
                                                     const ResumeFrom& resume);
  // The pipeline's locks, and with a local tier the nodes' locks in the
  // shared directory.
  absl::Status LockNodes();
  // What the resume choice reads: the commit log, or with a local tier both
  // tiers' logs merged (tiers_).
  absl::StatusOr<CommitLogRead> ReadStartLog();
  // Waits until every save of the run has its outcome.
  void WaitForSaves() {
    if (pipeline_ != nullptr) pipeline_->Drain();
  }
  // Drains and ends the run's pipeline, keeping the outcomes nobody took.
  void EndPipeline();
  // Moves the pipeline's outcomes to unclaimed_, which keeps the newest
  // kMaxUnclaimedOutcomes (failures dropped are logged).
  void KeepOutcomes();
  std::vector<SaveOutcome> TakeFinished();
  // A save of `kind` for `epoch` that failed before the pipeline could run
  // it (the same on every process): its outcome, and `status` to return.
  absl::Status Failed(SaveKind kind, int64_t epoch, absl::Status status);

  // --- checkpointer_save.cc: what each kind of save records and saves.

  absl::StatusOr<CheckpointStats> SaveEpoch(Session& session, int64_t epoch,
                                            bool full);
  absl::StatusOr<CheckpointStats> SavePreempted(Session& session, int64_t epoch,
                                                const Preemption& preemption,
                                                const TaskGroup& stopped);
  absl::Status MarkLoopFinished(int64_t epoch, const Preemption& preemption);

  // --- checkpointer_restore.cc: blob lists, staging, restore.

  absl::Status CaptureBlobNames(Session& session);
  absl::StatusOr<CheckpointStats> Restore(Session& session, int64_t epoch);
  absl::StatusOr<bool> LoadBlobs(Session& session,
                                 const std::vector<std::string>& nodes,
                                 const std::vector<std::string>& blob_names,
                                 int64_t epoch);
  // Loads every node's database of `epoch` into staged blobs
  // (kStagedBlobPrefix), replacing any staged before, and, with
  // `with_blob_lists`, their blob lists; the loads check what a
  // verification would. On an error nothing stays staged: DataLoss for
  // damage, a missing database included when the epoch is `committed`.
  absl::Status Stage(Session& session, int64_t epoch, bool with_blob_lists,
                     bool committed, const std::string& dir);
  // Stage with each node's database read from `dirs[i]` (nodes_ order).
  absl::Status Stage(Session& session, int64_t epoch, bool with_blob_lists,
                     bool committed, const std::vector<std::string>& dirs);
  // Stage from the first of `epoch`'s copies (ReadDirs) that loads: a
  // damaged local copy is logged and the next copy tried.
  absl::Status StageFromCopies(Session& session, int64_t epoch,
                               bool with_blob_lists, bool committed);
  // The directories that hold committed `epoch`, nearest first: the tiers'
  // (tiers_) or the directory's.
  std::vector<std::string> ReadDirs(int64_t epoch) const;
  // The commit log the run's resume choice read (the tiers' merged, or the
  // directory's), or null before Start.
  const CommitLog* StartLog() const;

  // --- Tiers (CheckpointOptions::local_directory).

  bool tiered() const { return !local_dir_.empty(); }
  // Checks the tier options and fills in local_dir_ and pipeline_options_.
  absl::Status SetUpTiers();
  // The directory saves write into: the local tier's, or `directory`.
  const std::string& WriteDir() const { return pipeline_options_.directory; }
  // Flushes the newest committed local epoch to the shared directory and
  // waits for every flush: FailedPrecondition naming both directories if
  // a flush failed.
  absl::Status DrainToShared();
  // Checkpointer::FlushToShared.
  absl::Status FlushToShared();
  // Applies keep_local to the local tier, keeping the flusher's pins.
  absl::Status RetireLocal();

  // --- checkpointer_hosts.cc: local tiers of a job on several hosts
  // (an MpiSession with CheckpointOptions::local_directory; see
  // tier/host_tiers.h). Every call marked collective runs on every rank.

  bool on_hosts() const { return hosts_.has_value(); }
  // Collective: which rank runs on which host, and which nodes each runs.
  absl::Status SetUpHosts(const Session& session);
  // The pipeline's coordinator and hooks for the hosts' tiers.
  SessionCoordinatorOptions HostCoordinatorOptions(
      const Session& session) const;
  SavePipeline::CommitHooks HostCommitHooks(const Session& session);
  // Collective over `channel` (the hook after each save's write, in the
  // thread that wrote): each rank sends the databases of `record.epoch` it
  // wrote to a rank of the partner host, which installs them in its local
  // tier. `written` is this rank's write.
  absl::Status CopyToPartner(SideChannel& channel, const SaveRecord& record,
                             const absl::Status& written);
  // The nodes whose databases this host's local tier holds.
  std::vector<std::string> HeldNodes() const;
  // --- checkpointer_host_restore.cc: the resume on hosts.

  // Collective: every host's commit log and the shared one, merged
  // (host_tiers_).
  absl::StatusOr<CommitLogRead> ReadHostLogs(const Session& session);
  // Collective: stages `epoch` from the nearest verified copy of each
  // node's database (this host's local tier, another host's over MPI, the
  // shared directory).
  absl::Status StageFromHosts(Session& session, int64_t epoch,
                              bool with_blob_lists, bool committed);
  // --- checkpointer_host_flush.cc: their flush to the shared directory.

  // Collective: copies committed local `epoch` to the shared directory,
  // each rank its own nodes' databases, and commits it there.
  absl::Status FlushHosts(const Session& session, int64_t epoch);
  // Collective: after a save of `record` that committed, commits what the
  // background copies finished, and starts the flush that is due: now for
  // the run's first commit, a preemption checkpoint and the mark, in the
  // background for every other shared_every-th epoch.
  absl::Status FlushHostsIfDue(const Session& session,
                               const SaveRecord& record);
  // Collective: waits for the background copies, commits the newest epoch
  // they all finished, and flushes the newest committed epoch if that was
  // not it. FailedPrecondition naming the epoch when it cannot.
  absl::Status FlushNewestOnHosts();
  // Collective: commits the newest epoch every rank's copier finished
  // (waiting for them first with `wait`).
  absl::Status SettleHostCopies(const Session& session, bool wait);
  // Collective: the end of a run: the newest committed epoch flushed, and
  // keep_local applied to this host's tier.
  absl::Status EndHosts();
  // The flush of `epoch` on hosts; the nodes this rank copies.
  FlushRequest HostFlushRequest(int64_t epoch) const;
  std::vector<std::string> OwnFileNames(const Session& session) const;
  // The shared log lists `epoch` now.
  void Flushed(int64_t epoch);
  // Forgets what a run committed, flushed and copied (waiting for a copy
  // in progress): at the start and end of a run.
  void ForgetHostRun();
  // Publishes the epochs the hosts' tiers keep (pins_) from the job
  // thread's state, for the commit's retention on any thread.
  void PublishPins();
  // FailedPrecondition naming the nodes and the hosts' tiers when the
  // merged logs list `epoch` as incomplete (its holders are not in this
  // run).
  absl::Status CheckHostsHold(int64_t epoch) const;
  // The shared directory's locks of the nodes this rank runs.
  absl::Status LockSharedNodes();
  // Collective: the rest of ChooseStart on hosts: the logs read (if the
  // choice did not), what the shared directory holds of the history, and
  // the epochs the merge ignored taken out of the hosts' logs.
  absl::Status StartOnHosts(const Session& session, const absl::Status& usable);

  std::string DbPathOf(const NodeState& state, int64_t epoch) const;
  // NodeState::file_name of every node: the names in the commit log.
  std::vector<std::string> FileNames() const;
  std::vector<std::string> NodeNames() const;

  const CheckpointOptions options_;
  // What the pipeline saves with: options_, or with a local tier its
  // directory and keep_local as the retention.
  CheckpointOptions pipeline_options_;
  std::string local_dir_;  // the local tier, %h expanded; empty: none
  const bool single_node_;
  std::vector<NodeState> nodes_;
  bool blobs_fixed_ = false;
  std::optional<Preemption> resumed_preemption_;
  std::optional<Staged> staged_;
  // What the resume choice of the run read: the commit log, and with
  // tiers, where each epoch has copies.
  std::optional<CommitLogRead> start_log_;
  std::optional<TieredLog> tiers_;

 private:
  // Runs staging operator `op` (ops/save_load_ops.h) with `args` and the
  // staged prefix on every node, in one group.
  absl::Status RunStagingOp(Session& session, const std::string& op,
                            std::vector<Argument> args);
  // Removes the staged blobs of `session`.
  void DropStaged(Session& session);
  // Puts the blobs of the last Stage in place in `session` (with
  // `check_only`, only checks that every node holds them).
  absl::Status CommitStaged(Session& session, bool check_only);
  // Each node's "blob_names" blob (named with `prefix` first), in node
  // order.
  absl::StatusOr<std::vector<std::vector<std::string>>> FetchBlobNames(
      const Session& session, absl::string_view prefix) const;

  // On hosts: the channel of the partner copies, which run in the thread
  // that writes (SetUpHosts). Outlives the pipeline that uses it.
  std::unique_ptr<SideChannel> copy_channel_;
  // Whether copy_channel_ is a side channel (saves may then be background
  // ones on hosts).
  bool copies_in_background_ = false;
  // With a local tier: held by the pipeline while a save writes, and waited
  // at by the background copies to the shared directory (the flusher's,
  // the host copier's). Before the members that use it, so it outlives
  // them.
  PauseGate write_pause_;
  // Runs the pipeline's write and commit: inline, or (options_.async) on
  // one thread for the Checkpointer's life.
  std::unique_ptr<SaveQueue> queue_;
  std::unique_ptr<SavePipeline> pipeline_;
  // With a local tier, for the run: the flush to the shared directory
  // (which holds the nodes' locks there).
  std::unique_ptr<Flusher> flusher_;
  // Whether this run holds its nodes' locks (both tiers'); set by LockNodes.
  bool locked_ = false;
  // Set at Start with a local tier: the run's first commit is flushed
  // before its save returns unless the local tier continues the shared
  // history past the shared log's newest epoch (see the commit hook).
  bool first_flush_sync_ = false;
  std::optional<int64_t> shared_newest_;
  // On hosts (on_hosts()): the map of ranks to hosts; per node (nodes_
  // order) its rank and host; the merged logs of the last ReadHostLogs; the
  // session of the run; the newest epoch committed and flushed by it (the
  // flushed one is kept in the local tiers: tier/host_tiers.h needs it).
  std::optional<HostMap> hosts_;
  std::vector<int> node_rank_;
  std::vector<int> node_host_;
  std::optional<HostTieredLog> host_tiers_;
  const Session* host_session_ = nullptr;
  std::optional<int64_t> hosts_committed_;
  std::optional<int64_t> hosts_flushed_;
  bool hosts_flush_next_ = true;
  // The background copies of this rank (checkpointer_host_flush.cc); the
  // epochs handed to the copiers since the newest flushed (the same on
  // every rank; kept in the tiers); this rank's finished copies not yet
  // committed in the shared log.
  class HostCopier;
  struct HostCopierDeleter {
    void operator()(HostCopier* copier) const;
  };
  std::unique_ptr<HostCopier, HostCopierDeleter> copier_;
  std::set<int64_t> hosts_copying_;
  std::set<int64_t> copied_;
  // The flush of the last commit CommitHooks::shared saw.
  absl::Status hosts_flush_status_;
  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex.
  std::mutex pins_mu_;
  std::vector<int64_t> pins_;  // guarded by pins_mu_
  std::vector<std::unique_ptr<NodeLock>> shared_locks_;
  // Per node: the directory the last StageFromHosts read it from; the
  // bytes per tier.
  std::vector<std::string> staged_dirs_;
  CheckpointStats::TierBytes staged_tier_bytes_;

  // Outcomes of ended runs that nobody took, oldest first (bounded).
  std::vector<SaveOutcome> unclaimed_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINTER_IMPL_H_

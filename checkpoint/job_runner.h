// JobRunner: runs a Job on a Session with Caffe2's order, checkpointing after
// init (epoch 0) and after every epoch, and resuming from a checkpoint.
//
//   from scratch: init group, blob list from the workspaces, save epoch 0;
//   on resume:    blob list and blobs from the checkpoint (failure is fatal);
//   then epoch = 1 (or resumed + 1) and loop: run the epoch group, fetch
//   every stop condition, save the epoch, stop if any condition was true;
//   then the upload builder's group, the download group, the exit group.
//   Train() returns the last epoch run.
//
// Every save ends in one SaveOutcome, which the runner takes from the
// Checkpointer in one place: it logs it, records it in stats().saves, and
// passes it to on_save_end. Save failures do not stop the job by default
// (Caffe2's rule) but are never silent: each is logged as an error and
// counted in stats(); with `fail_on_save_error` the first one ends the run.
//
// Preemption. While Train runs, the signals in `preempt_signals` (and
// RequestPreemption()) stop the job at the next point between two nets,
// whatever group it is in, in every thread. Then:
//   in init or in an epoch: the run's state (every node's root workspace and
//     plan position, session.h) is saved as that epoch (0 for init) and
//     committed as a preemption checkpoint; a resume from it continues at
//     exactly that point, and the epoch's ordinary save later replaces it;
//   between epochs or during a save: the save in progress completes; the
//     newest committed epoch is where a resume starts;
//   after the last epoch (download, exit): that epoch is marked so that a
//     resume runs download and exit again, not another epoch.
// Train then returns a status for which IsPreempted() is true (the program
// should exit with kPreemptedExitCode for its batch script to requeue it).
// The resumed run ends in exactly the state, and with exactly the epoch
// numbering, of a run that was never stopped.
//
// The runner borrows the job, the checkpointer and the upload builder; they
// must outlive it. Not thread-safe, except RequestPreemption().

#ifndef JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_
#define JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/preemption.h"
#include "checkpoint/resume_from.h"
#include "engine/run_control.h"

namespace jobgraph {

class Session;
class UploadTaskGroupBuilder;

// What happened in one epoch.
struct EpochStats {
  int64_t epoch = 0;
  // Time in the epoch group (zero for epoch 0, the init save).
  int64_t run_micros = 0;
  // Save of this epoch; zero without a checkpointer or when the save failed.
  // For an asynchronous save (CheckpointOptions::async): save_micros is the
  // time the job was blocked, `saved` means the snapshot was taken, and
  // save_bytes stays 0: the save's outcome comes later, as a SaveOutcome
  // (JobRunStats::saves, JobRunnerOptions::on_save_end); a record is never
  // changed after on_epoch_end saw it.
  int64_t save_micros = 0;
  int64_t save_bytes = 0;
  // Of save_bytes, those an incremental save referred to instead of writing
  // (CheckpointStats::referenced_bytes).
  int64_t save_referenced_bytes = 0;
  bool saved = false;
  bool save_in_background = false;
  // Of save_micros, the wait for the previous background save.
  int64_t save_waited_micros = 0;
  // The epoch this run resumed from, if it did.
  std::optional<int64_t> resumed_from;
  // With resumed_from: where its databases were read, "local" (the local
  // tier, CheckpointOptions::local_directory) or "shared" (`directory`),
  // and the bytes read there.
  std::string resumed_tier;
  int64_t resumed_bytes = 0;
  // With local tiers on several hosts: the bytes of database files read
  // from the hosts' own tiers, fetched from other hosts', and read from
  // the shared directory (then resumed_tier is "local", "shared" or, for
  // both, "mixed").
  std::optional<CheckpointStats::TierBytes> resumed_tier_bytes;
  // The run stopped in this epoch on a preemption; the other fields cover
  // the part that ran and the preemption checkpoint.
  bool preempted = false;
  // This epoch continued one stopped by a preemption.
  bool continued = false;
};

// Where a preempted run stopped.
enum class StopPoint {
  kInInit,          // in the middle of the init group
  kInEpoch,         // in the middle of an epoch
  kBetweenEpochs,   // at an epoch boundary, or during a save
  kAfterLastEpoch,  // in the download or exit group, or just before
};
// "init", "epoch", "between epochs", "after the last epoch".
absl::string_view StopPointName(StopPoint point);

// How a run was preempted.
struct PreemptionStats {
  StopPoint stopped_at = StopPoint::kBetweenEpochs;
  int64_t epoch = 0;
  // "SIGTERM", ..., or "request" for RequestPreemption().
  std::string signal;
  // Whether a checkpoint (or mark) that a resume continues from was saved.
  bool saved = false;
  int64_t save_micros = 0;
  int64_t save_bytes = 0;
};

struct JobRunStats {
  // The epoch resumed from, if any, and where it was read (as EpochStats).
  std::optional<int64_t> resumed_from;
  std::string resumed_tier;
  int64_t resumed_bytes = 0;
  std::optional<CheckpointStats::TierBytes> resumed_tier_bytes;
  std::vector<EpochStats> epochs;  // epoch 0 (the init save) included
  // Every save's outcome, in the order they ended (a background save's
  // after the epochs that followed it).
  std::vector<SaveOutcome> saves;
  int save_failures = 0;
  std::vector<std::string> save_errors;
  // Set when the run was preempted.
  std::optional<PreemptionStats> preemption;
};

struct JobRunnerOptions {
  // Where to start: from scratch (the default), a committed epoch, or the
  // newest committed epoch that verifies (from scratch if there is none).
  ResumeFrom resume_from;
  // End the run at the first save failure instead of logging it.
  bool fail_on_save_error = false;
  // Called after each epoch's save (and after the epoch-0 save), and for
  // the epoch a preemption stopped (EpochStats::preempted).
  std::function<void(const EpochStats&)> on_epoch_end;
  // Called once for every save when its outcome is known: a synchronous
  // save before its epoch's on_epoch_end, a background one later.
  std::function<void(const SaveOutcome&)> on_save_end;
  // Called after the checkpoint of `epoch` was restored, before anything
  // runs, with `continued` true when the run continues a stopped epoch.
  std::function<void(int64_t epoch, bool continued)> on_restore;
  // Signals that preempt the run (see above); handlers are installed for
  // the duration of Train and the previous ones restored after. Empty: none.
  std::vector<int> preempt_signals = DefaultPreemptSignals();
};

class JobRunner {
 public:
  // `checkpointer` and `upload` may be null.
  JobRunner(const Job& job, Checkpointer* checkpointer,
            JobRunnerOptions options = {},
            UploadTaskGroupBuilder* upload = nullptr);

  // Runs the job; returns the last epoch. A preempted run returns a status
  // for which IsPreempted() is true, saying what was saved.
  absl::StatusOr<int64_t> Train(Session& session);

  // Preempts the running (or, called between runs, the next) Train as a
  // signal would. Thread-safe and async-signal-safe.
  void RequestPreemption() { preempt_.stop_requested.store(true); }
  // For tests: preempts the next Train at its n-th point between nets (0:
  // the first), counted over every group, node and thread.
  void RequestPreemptionAtNetBoundary(int64_t n) {
    preempt_.stop_at_check.store(n);
  }

  // Loads `blob_names` from every checkpointed node's database of `epoch`
  // into that node's workspace; false, loading nothing, if a database is
  // missing. Needs a checkpointer.
  absl::StatusOr<bool> LoadBlobsFromCheckpoints(
      const std::vector<std::string>& blob_names, int64_t epoch,
      Session& session);

  const JobRunStats& stats() const { return stats_; }

 private:
  // The one place that handles saves' outcomes: takes those that are known
  // (with `wait`, every one, waiting for the saves in flight), logs them,
  // records them and calls on_save_end. Returns the failure policy's
  // status: the first failed epoch save when fail_on_save_error is set.
  absl::Status ReportSaves(bool wait);
  // Saves `epoch` (the outcome goes to ReportSaves); `last` when the epoch
  // loop ends with it.
  void SaveEpoch(int64_t epoch, Session& session, bool last,
                 EpochStats* epoch_stats);
  // Whether the save of `kind` for `epoch` is reported as committed.
  bool Committed(SaveKind kind, int64_t epoch) const;
  // Reports the saves, records the epoch and calls on_epoch_end; the
  // save-failure policy's status.
  absl::Status EndEpoch(EpochStats epoch_stats);
  // Runs `group`, stoppable by a preemption; `continue_stopped` continues
  // a stopped run of it. Errors are prefixed by `what`; a stop is returned
  // as is (IsStopRequest).
  absl::Status RunGroup(Session& session, const TaskGroup& group,
                        absl::string_view what, bool continue_stopped);
  // Whether a preemption was requested on any rank (collective).
  absl::StatusOr<bool> PreemptionPending(const Session& session) const;
  std::string PreemptingSignal() const;
  // Ends a run stopped on request in the middle of `group` (init or
  // epoch) of `epoch`: saves the preemption checkpoint.
  absl::Status PreemptMidGroup(Session& session, int64_t epoch, JobGroup group,
                               const TaskGroup& task_group,
                               EpochStats epoch_stats);
  // Ends a run stopped at a boundary after `epoch` was saved (or its save
  // failed); `loop_finished` when that was the last epoch.
  absl::Status PreemptAtBoundary(int64_t epoch, bool loop_finished);
  absl::StatusOr<bool> AnyStopConditionTrue(const Session& session) const;

  const Job& job_;
  Checkpointer* const checkpointer_;
  const JobRunnerOptions options_;
  UploadTaskGroupBuilder* const upload_;
  JobRunStats stats_;
  // Set by the preemption signals and RequestPreemption().
  RunControl preempt_;
  const PreemptionSignals* signals_ = nullptr;  // while Train runs
};

// Makes the job stop after exactly `num_epochs` epochs: a counter created in
// the init group on `node` (so it is checkpointed) counts down each epoch.
// With several limiters the smallest limit ends the job; each has its own
// blobs ("<node>/epoch_counter", then "<node>/epoch_counter:1", ...).
void EpochLimiter(Job& job, const Node& node, int64_t num_epochs);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_

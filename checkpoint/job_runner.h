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
// Save failures do not stop the job by default (Caffe2's rule) but are never
// silent: each is logged as an error and recorded in stats(); with
// `fail_on_save_error` the first one ends the run.
//
// The runner borrows the job, the checkpointer and the upload builder; they
// must outlive it. Not thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_
#define JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/upload.h"
#include "engine/session.h"

namespace jobgraph {

// What happened in one epoch.
struct EpochStats {
  int64_t epoch = 0;
  // Time in the epoch group (zero for epoch 0, the init save).
  int64_t run_micros = 0;
  // Save of this epoch; zero without a checkpointer or when the save failed.
  int64_t save_micros = 0;
  int64_t save_bytes = 0;
  bool saved = false;
  // The epoch this run resumed from, if it did.
  std::optional<int64_t> resumed_from;
};

struct JobRunStats {
  // The epoch resumed from, if any.
  std::optional<int64_t> resumed_from;
  std::vector<EpochStats> epochs;  // epoch 0 (the init save) included
  int save_failures = 0;
  std::vector<std::string> save_errors;
};

struct JobRunnerOptions {
  // Where to start: from scratch (the default), a committed epoch, or the
  // newest committed epoch that verifies (from scratch if there is none).
  ResumeFrom resume_from;
  // End the run at the first save failure instead of logging it.
  bool fail_on_save_error = false;
  // Called after each epoch's save (and after the epoch-0 save).
  std::function<void(const EpochStats&)> on_epoch_end;
};

class JobRunner {
 public:
  // `checkpointer` and `upload` may be null.
  JobRunner(const Job& job, Checkpointer* checkpointer,
            JobRunnerOptions options = {},
            UploadTaskGroupBuilder* upload = nullptr);

  // Runs the job; returns the last epoch.
  absl::StatusOr<int64_t> Train(Session& session);

  // Loads `blob_names` from every checkpointed node's database of `epoch`
  // into that node's workspace; false, loading nothing, if a database is
  // missing. Needs a checkpointer.
  absl::StatusOr<bool> LoadBlobsFromCheckpoints(
      const std::vector<std::string>& blob_names, int64_t epoch,
      Session& session);

  const JobRunStats& stats() const { return stats_; }

 private:
  // Saves `epoch` and applies the save-failure policy: OK unless the save
  // failed and fail_on_save_error is set.
  absl::Status SaveEpoch(int64_t epoch, Session& session,
                         EpochStats* epoch_stats);
  void EndEpoch(const EpochStats& epoch_stats);
  absl::StatusOr<bool> AnyStopConditionTrue(const Session& session) const;

  const Job& job_;
  Checkpointer* const checkpointer_;
  const JobRunnerOptions options_;
  UploadTaskGroupBuilder* const upload_;
  JobRunStats stats_;
};

// Makes the job stop after exactly `num_epochs` epochs: a counter created in
// the init group on `node` (so it is checkpointed) counts down each epoch.
// With several limiters the smallest limit ends the job; each has its own
// blobs ("<node>/epoch_counter", then "<node>/epoch_counter:1", ...).
void EpochLimiter(Job& job, const Node& node, int64_t num_epochs);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_JOB_RUNNER_H_

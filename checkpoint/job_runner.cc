#include "checkpoint/job_runner.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/job_group.h"
#include "checkpoint/upload.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/time_util.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/storage_pool.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// What a failed save's message starts with.
std::string SaveFailureContext(const SaveOutcome& outcome) {
  switch (outcome.kind) {
    case SaveKind::kPreemption:
      return absl::StrCat("unable to write the preemption checkpoint of epoch ",
                          outcome.epoch);
    case SaveKind::kLoopFinished:
      return absl::StrCat("unable to mark epoch ", outcome.epoch,
                          " as the last of the epoch loop");
    case SaveKind::kEpoch:
      break;
  }
  return absl::StrCat("unable to write checkpoint for epoch ", outcome.epoch,
                      outcome.in_background ? " (in the background)" : "");
}

// "<n> bytes", and of them those an incremental save referenced.
std::string BytesWritten(const CheckpointStats& stats) {
  if (stats.referenced_bytes == 0) return absl::StrCat(stats.bytes, " bytes");
  return absl::StrCat(stats.bytes - stats.referenced_bytes, " bytes written, ",
                      stats.referenced_bytes, " by reference");
}

Preemption PreemptionRecord(JobGroup group, const std::string& signal) {
  Preemption record;
  record.set_group(group);
  record.set_signal(signal);
  record.set_preempted_unix_micros(absl::ToUnixMicros(absl::Now()));
  return record;
}

}  // namespace

absl::string_view StopPointName(StopPoint point) {
  switch (point) {
    case StopPoint::kInInit:
      return JobGroupName(JOB_GROUP_INIT);
    case StopPoint::kInEpoch:
      return JobGroupName(JOB_GROUP_EPOCH);
    case StopPoint::kBetweenEpochs:
      return "between epochs";
    case StopPoint::kAfterLastEpoch:
      return "after the last epoch";
  }
  return "?";
}

JobRunner::JobRunner(const Job& job, Checkpointer* checkpointer,
                     JobRunnerOptions options, UploadTaskGroupBuilder* upload)
    : job_(job),
      checkpointer_(checkpointer),
      options_(std::move(options)),
      upload_(upload) {}

absl::StatusOr<bool> JobRunner::AnyStopConditionTrue(
    const Session& session) const {
  // Every condition is fetched (before the save), as in Caffe2.
  bool any = false;
  for (const TaskOutput& stop : job_.stop_conditions()) {
    for (const std::string& blob : stop.blobs()) {
      absl::StatusOr<Tensor> value = session.FetchBlob(stop.node(), blob);
      if (!value.ok()) {
        return Annotate(value.status(),
                        absl::StrCat("stop condition '", blob, "' on node '",
                                     stop.node(), "'"));
      }
      if (value->numel() != 1 || value->dtype() == STRING) {
        return absl::FailedPreconditionError(
            absl::StrCat("stop condition '", blob, "' on node '", stop.node(),
                         "' must hold one bool or number, but holds ",
                         value->DebugString(4)));
      }
      DispatchDataType(value->dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (!std::is_same_v<T, std::string>) {
          any |= value->template data<T>()[0] != T{};
        }
      });
    }
  }
  return any;
}

absl::Status JobRunner::ReportSaves(bool wait) {
  if (checkpointer_ == nullptr) return absl::OkStatus();
  if (wait) checkpointer_->WaitForBackgroundSave();
  absl::Status policy;
  for (SaveOutcome& outcome : checkpointer_->TakeFinishedSaves()) {
    if (outcome.stats.ok()) {
      LOG_IF(INFO, outcome.in_background)
          << "epoch " << outcome.epoch
          << ": background checkpoint committed in "
          << absl::FormatDuration(
                 absl::Microseconds(outcome.stats->wall_micros))
          << ", " << BytesWritten(*outcome.stats);
    } else {
      const absl::Status failed =
          Annotate(outcome.stats.status(), SaveFailureContext(outcome));
      LOG(ERROR) << failed.message();
      ++stats_.save_failures;
      stats_.save_errors.push_back(std::string(failed.message()));
      // A preemption checkpoint or mark fails while the run ends anyway;
      // its message says what a resume will do.
      if (options_.fail_on_save_error && outcome.kind == SaveKind::kEpoch &&
          policy.ok()) {
        policy = failed;
      }
    }
    stats_.saves.push_back(outcome);
    if (options_.on_save_end) options_.on_save_end(stats_.saves.back());
  }
  return policy;
}

bool JobRunner::Committed(SaveKind kind, int64_t epoch) const {
  for (auto it = stats_.saves.rbegin(); it != stats_.saves.rend(); ++it) {
    if (it->kind == kind && it->epoch == epoch) return it->stats.ok();
  }
  return false;
}

void JobRunner::SaveEpoch(int64_t epoch, Session& session, bool last,
                          EpochStats* epoch_stats) {
  // The checkpoint an upload publishes must stand alone: no references to
  // earlier databases (incremental saves).
  absl::StatusOr<CheckpointStats> saved =
      checkpointer_->SaveEpoch(session, epoch, last && upload_ != nullptr);
  // A failure is its outcome's, which ReportSaves handles.
  if (!saved.ok()) return;
  epoch_stats->saved = true;
  epoch_stats->save_micros = saved->wall_micros;
  epoch_stats->save_bytes = saved->bytes;
  epoch_stats->save_referenced_bytes = saved->referenced_bytes;
  epoch_stats->save_in_background = saved->in_background;
  epoch_stats->save_waited_micros = saved->waited_micros;
}

absl::Status JobRunner::EndEpoch(EpochStats epoch_stats) {
  // The epoch's own save, if it ended, and any background save that ended
  // meanwhile. A save failure that ends the run leaves the epoch unrecorded.
  JG_RETURN_IF_ERROR(ReportSaves(/*wait=*/false));
  // Large buffers freed in the epoch before this one and not reused in this
  // one go back to the system (storage_pool.h).
  StoragePool::Global().TrimIdle();
  stats_.epochs.push_back(std::move(epoch_stats));
  if (options_.on_epoch_end) options_.on_epoch_end(stats_.epochs.back());
  return absl::OkStatus();
}

absl::Status JobRunner::RunGroup(Session& session, const TaskGroup& group,
                                 absl::string_view what,
                                 bool continue_stopped) {
  absl::Status s =
      session.Run(group, {.stop = &preempt_, .resume = continue_stopped});
  if (IsStopRequest(s)) return s;
  return Annotate(s, what);
}

absl::StatusOr<bool> JobRunner::PreemptionPending(
    const Session& session) const {
  // A signal may reach some ranks only: they decide together.
  return AnyRank(session, preempt_.StopRequested());
}

std::string JobRunner::PreemptingSignal() const {
  const int signal = signals_ != nullptr ? signals_->received() : 0;
  return signal != 0 ? SignalName(signal) : "request";
}

absl::Status JobRunner::PreemptMidGroup(Session& session, int64_t epoch,
                                        JobGroup group,
                                        const TaskGroup& task_group,
                                        EpochStats epoch_stats) {
  PreemptionStats preemption;
  preemption.stopped_at =
      group == JOB_GROUP_INIT ? StopPoint::kInInit : StopPoint::kInEpoch;
  preemption.epoch = epoch;
  preemption.signal = PreemptingSignal();
  epoch_stats.preempted = true;
  const std::string where = group == JOB_GROUP_INIT
                                ? std::string(JobGroupName(group))
                                : absl::StrCat("epoch ", epoch);
  std::string outcome;
  if (checkpointer_ == nullptr) {
    outcome = "nothing saved (the job runs without a checkpointer)";
  } else {
    // The saves in flight commit first, then this one: epochs stay in
    // order. A failure of one under fail_on_save_error ends the run with
    // that error (exit 1, not a requeue), as it would have at the next
    // boundary.
    JG_RETURN_IF_ERROR(ReportSaves(/*wait=*/true));
    absl::StatusOr<CheckpointStats> saved = checkpointer_->SavePreempted(
        session, epoch, PreemptionRecord(group, preemption.signal), task_group);
    if (saved.ok()) {
      preemption.saved = true;
      preemption.save_micros = saved->wall_micros;
      preemption.save_bytes = saved->bytes;
      epoch_stats.saved = true;
      epoch_stats.save_micros = saved->wall_micros;
      epoch_stats.save_bytes = saved->bytes;
      epoch_stats.save_referenced_bytes = saved->referenced_bytes;
      outcome = absl::StrCat(
          "checkpoint of epoch ", epoch, " (mid-", JobGroupName(group),
          ") committed in ", checkpointer_->options().directory, " in ",
          absl::FormatDuration(absl::Microseconds(saved->wall_micros)), ", ",
          BytesWritten(*saved));
    } else {
      outcome = absl::StrCat(
          "the preemption checkpoint failed (", saved.status().message(),
          "); a resume starts from the newest committed epoch");
    }
  }
  stats_.preemption = preemption;
  // Reports the preemption checkpoint's outcome; the run ends here whatever
  // the policy says.
  EndEpoch(std::move(epoch_stats)).IgnoreError();
  const std::string message = absl::StrCat("preempted by ", preemption.signal,
                                           " in ", where, ": ", outcome);
  LOG(WARNING) << message;
  return PreemptedStatus(message);
}

absl::Status JobRunner::PreemptAtBoundary(int64_t epoch, bool loop_finished) {
  // Whether the last save committed is known only once it has ended; its
  // failure under fail_on_save_error ends the run with that error.
  JG_RETURN_IF_ERROR(ReportSaves(/*wait=*/true));
  PreemptionStats preemption;
  preemption.stopped_at =
      loop_finished ? StopPoint::kAfterLastEpoch : StopPoint::kBetweenEpochs;
  preemption.epoch = epoch;
  preemption.signal = PreemptingSignal();
  std::string outcome;
  if (checkpointer_ == nullptr) {
    outcome = "nothing saved (the job runs without a checkpointer)";
  } else if (!loop_finished) {
    preemption.saved = Committed(SaveKind::kEpoch, epoch);
    // With a local tier, a requeue on another host finds it only in the
    // shared directory.
    const absl::Status flushed = checkpointer_->FlushToShared();
    outcome = !flushed.ok() ? std::string(flushed.message())
              : preemption.saved
                  ? absl::StrCat("epoch ", epoch,
                                 " is committed; a resume starts after it")
                  : "a resume starts from the newest committed epoch";
    preemption.saved = preemption.saved && flushed.ok();
  } else {
    absl::Status marked = checkpointer_->MarkLoopFinished(
        epoch, PreemptionRecord(JOB_GROUP_DOWNLOAD, preemption.signal));
    ReportSaves(/*wait=*/false).IgnoreError();
    preemption.saved = marked.ok();
    outcome = marked.ok()
                  ? absl::StrCat("epoch ", epoch,
                                 " is marked as the last; a resume runs the "
                                 "download and exit groups")
                  : absl::StrCat("cannot mark epoch ", epoch,
                                 " as the last: ", marked.message());
  }
  stats_.preemption = preemption;
  const std::string message =
      absl::StrCat("preempted by ", preemption.signal,
                   loop_finished ? " after the last epoch, " : " after epoch ",
                   loop_finished ? "" : absl::StrCat(epoch, ": "), outcome);
  LOG(WARNING) << message;
  return PreemptedStatus(message);
}

absl::StatusOr<int64_t> JobRunner::Train(Session& session) {
  stats_ = JobRunStats();
  // Building the job reports mistakes made while building it (a stop
  // condition without a node, conflicting workspace types) before anything
  // runs.
  JG_RETURN_IF_ERROR(job_.Build().status());
  // However the run ends, it waits for a background save and for old
  // databases being deleted, releases the checkpointer's node locks, and
  // restores the signal handlers; only then is the stop request cleared, so
  // a signal that comes meanwhile cannot stop the next run.
  struct EndRun {
    JobRunner* runner;
    std::unique_ptr<PreemptionSignals> signals;
    ~EndRun() {
      if (runner->checkpointer_ != nullptr) {
        runner->checkpointer_->End();
        // Outcomes that ended with the run are recorded, never lost.
        runner->ReportSaves(/*wait=*/false).IgnoreError();
      }
      WaitForBackgroundDeletes();
      runner->signals_ = nullptr;
      signals.reset();
      runner->preempt_.stop_requested.store(false);
      runner->preempt_.stop_at_check.store(-1);
    }
  } end_run{this, nullptr};
  if (!options_.preempt_signals.empty()) {
    JG_ASSIGN_OR_RETURN(
        end_run.signals,
        PreemptionSignals::Install(options_.preempt_signals, &preempt_));
  }
  signals_ = end_run.signals.get();

  std::optional<int64_t> resume;
  JobGroup resumed_in = JOB_GROUP_UNSPECIFIED;
  if (checkpointer_ != nullptr) {
    JG_ASSIGN_OR_RETURN(
        resume, checkpointer_->Start(session, job_.nodes_to_checkpoint(),
                                     options_.resume_from));
    if (checkpointer_->resumed_preemption().has_value()) {
      resumed_in = checkpointer_->resumed_preemption()->group();
    }
  } else if (!options_.resume_from.from_scratch()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resume_from_epoch=", options_.resume_from.ToString(),
                     " was given, but the job runs without a checkpointer"));
  }
  stats_.resumed_from = resume;
  const bool continue_init = resumed_in == JOB_GROUP_INIT;
  const bool continue_epoch = resumed_in == JOB_GROUP_EPOCH;
  const bool loop_finished = resumed_in == JOB_GROUP_DOWNLOAD;

  if (resume.has_value()) {
    JG_ASSIGN_OR_RETURN(CheckpointStats restored,
                        checkpointer_->Restore(session, *resume));
    const bool from_local =
        !restored.read_from.empty() &&
        restored.read_from != checkpointer_->options().directory;
    stats_.resumed_tier = from_local ? "local" : "shared";
    stats_.resumed_bytes = restored.bytes;
    std::string where =
        from_local ? absl::StrCat(restored.read_from, " (the local tier)")
                   : checkpointer_->options().directory;
    if (restored.tier_bytes.has_value()) {
      const CheckpointStats::TierBytes& t = *restored.tier_bytes;
      stats_.resumed_tier_bytes = t;
      stats_.resumed_tier = t.shared == 0              ? "local"
                            : t.local + t.partner == 0 ? "shared"
                                                       : "mixed";
      where = absl::StrCat("the hosts' local tiers (", t.local,
                           " bytes on the host that runs the node, ", t.partner,
                           " fetched from another host) and ",
                           checkpointer_->options().directory, " (", t.shared,
                           " bytes)");
    }
    LOG(INFO) << "resumed from epoch " << *resume << " of " << where
              << (continue_init    ? " (in the middle of init)"
                  : continue_epoch ? " (in the middle of the epoch)"
                  : loop_finished ? " (after the last epoch: download and exit)"
                                  : "");
    if (options_.on_restore) {
      options_.on_restore(*resume, continue_init || continue_epoch);
    }
  }
  if (!resume.has_value() || continue_init) {
    EpochStats epoch0;
    absl::Status init = RunGroup(session, job_.init_group(), "init group",
                                 /*continue_stopped=*/resume.has_value());
    if (IsStopRequest(init)) {
      return PreemptMidGroup(session, 0, JOB_GROUP_INIT, job_.init_group(),
                             std::move(epoch0));
    }
    JG_RETURN_IF_ERROR(init);
    if (checkpointer_ != nullptr) {
      JG_RETURN_IF_ERROR(checkpointer_->CaptureBlobNames(session));
      SaveEpoch(0, session, /*last=*/false, &epoch0);
      JG_RETURN_IF_ERROR(EndEpoch(std::move(epoch0)));
    }
    JG_ASSIGN_OR_RETURN(bool preempted, PreemptionPending(session));
    if (preempted) return PreemptAtBoundary(0, false);
  }

  int64_t epoch = !resume.has_value() || continue_init ? 1
                  : continue_epoch || loop_finished    ? *resume
                                                       : *resume + 1;
  if (!loop_finished) {
    for (bool first = true;; first = false) {
      EpochStats epoch_stats;
      epoch_stats.epoch = epoch;
      epoch_stats.resumed_from = resume;
      epoch_stats.resumed_tier = stats_.resumed_tier;
      epoch_stats.resumed_bytes = stats_.resumed_bytes;
      epoch_stats.resumed_tier_bytes = stats_.resumed_tier_bytes;
      epoch_stats.continued = first && continue_epoch;
      const absl::Time start = absl::Now();
      absl::Status ran =
          RunGroup(session, job_.epoch_group(), absl::StrCat("epoch ", epoch),
                   /*continue_stopped=*/epoch_stats.continued);
      epoch_stats.run_micros = MicrosSince(start);
      if (IsStopRequest(ran)) {
        return PreemptMidGroup(session, epoch, JOB_GROUP_EPOCH,
                               job_.epoch_group(), std::move(epoch_stats));
      }
      JG_RETURN_IF_ERROR(ran);
      JG_ASSIGN_OR_RETURN(bool stop, AnyStopConditionTrue(session));
      if (checkpointer_ != nullptr) {
        SaveEpoch(epoch, session, /*last=*/stop, &epoch_stats);
      }
      JG_RETURN_IF_ERROR(EndEpoch(std::move(epoch_stats)));
      if (stop) break;
      JG_ASSIGN_OR_RETURN(bool preempted, PreemptionPending(session));
      if (preempted) return PreemptAtBoundary(epoch, false);
      ++epoch;
    }
  }
  JG_ASSIGN_OR_RETURN(bool preempted, PreemptionPending(session));
  if (preempted) return PreemptAtBoundary(epoch, true);
  // Everything saved is committed before the upload and the final groups.
  JG_RETURN_IF_ERROR(ReportSaves(/*wait=*/true));

  if (upload_ != nullptr) {
    if (checkpointer_ == nullptr) {
      return absl::InvalidArgumentError(
          "an upload builder needs a checkpointer");
    }
    if (loop_finished || Committed(SaveKind::kEpoch, epoch)) {
      JG_ASSIGN_OR_RETURN(TaskGroup upload,
                          upload_->Build(epoch, *checkpointer_));
      JG_RETURN_IF_ERROR(Annotate(session.Run(upload), "upload"));
    } else {
      // Publishing a checkpoint that was never committed would spread a
      // missing or partial one; the failed save is already logged and
      // counted.
      LOG(ERROR) << "not uploading epoch " << epoch
                 << ": its checkpoint was not saved";
    }
  }
  for (const auto& [group, what] :
       {std::pair<const TaskGroup*, const char*>{&job_.download_group(),
                                                 "download group"},
        {&job_.exit_group(), "exit group"}}) {
    absl::Status ran = RunGroup(session, *group, what, false);
    if (IsStopRequest(ran)) return PreemptAtBoundary(epoch, true);
    JG_RETURN_IF_ERROR(ran);
  }
  // With a local tier the run is done once its last state is in the
  // shared directory too.
  if (checkpointer_ != nullptr) {
    JG_RETURN_IF_ERROR(checkpointer_->FlushToShared());
  }
  // Old databases dropped by retention are deleted off the critical path;
  // finish before returning so a process that exits next leaves none behind.
  WaitForBackgroundDeletes();
  return epoch;
}

absl::StatusOr<bool> JobRunner::LoadBlobsFromCheckpoints(
    const std::vector<std::string>& blob_names, int64_t epoch,
    Session& session) {
  if (checkpointer_ == nullptr) {
    return absl::FailedPreconditionError(
        "LoadBlobsFromCheckpoints needs a checkpointer");
  }
  return checkpointer_->LoadBlobs(session, job_.nodes_to_checkpoint(),
                                  blob_names, epoch);
}

void EpochLimiter(Job& job, const Node& node, int64_t num_epochs) {
  Task& init = job.init_group().NewTask(node, {.name = "epoch_counter_init"});
  // The group numbers a repeated task name (":1", ":2", ...); the blobs take
  // the same suffix, so several limiters on one node never share a counter,
  // and the same job always builds the same names (checkpoints resume).
  const std::string suffix = init.name().substr(
      absl::StrCat(node.name(), "/epoch_counter_init").size());
  const std::string counter =
      absl::StrCat(node.name(), "/epoch_counter", suffix);
  init.net().CreateCounter(num_epochs - 1, BlobRef(counter));
  // Any workspace type works: the counter is found in the root, and the
  // task output is created there by the session.
  Task& countdown =
      job.epoch_group().NewTask(node, {.name = "epoch_countdown"});
  BlobRef done(absl::StrCat(node.name(), "/epoch_limit_reached", suffix),
               node.name());
  countdown.net().CountDown(BlobRef(counter), done);
  job.AddStopCondition(countdown.AddOutput(done));
}

}  // namespace jobgraph

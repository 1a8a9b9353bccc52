#include "checkpoint/job_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/background_delete.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

int64_t MicrosSince(absl::Time start) {
  return absl::ToInt64Microseconds(absl::Now() - start);
}

}  // namespace

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

absl::Status JobRunner::SaveEpoch(int64_t epoch, Session& session,
                                  EpochStats* epoch_stats) {
  absl::StatusOr<CheckpointStats> saved =
      checkpointer_->SaveEpoch(session, epoch);
  if (saved.ok()) {
    epoch_stats->saved = true;
    epoch_stats->save_micros = saved->wall_micros;
    epoch_stats->save_bytes = saved->bytes;
    return absl::OkStatus();
  }
  absl::Status status =
      Annotate(saved.status(),
               absl::StrCat("unable to write checkpoint for epoch ", epoch));
  LOG(ERROR) << status.message();
  ++stats_.save_failures;
  stats_.save_errors.push_back(std::string(status.message()));
  return options_.fail_on_save_error ? status : absl::OkStatus();
}

void JobRunner::EndEpoch(const EpochStats& epoch_stats) {
  stats_.epochs.push_back(epoch_stats);
  if (options_.on_epoch_end) options_.on_epoch_end(epoch_stats);
}

absl::StatusOr<int64_t> JobRunner::Train(Session& session) {
  stats_ = JobRunStats();
  // Building the job reports mistakes made while building it (a stop
  // condition without a node, conflicting workspace types) before anything
  // runs.
  JG_RETURN_IF_ERROR(job_.Build().status());
  std::optional<int64_t> resume;
  // However the run ends, it releases the checkpointer's node locks.
  struct EndRun {
    Checkpointer* checkpointer;
    ~EndRun() {
      if (checkpointer != nullptr) checkpointer->End();
    }
  } end_run{checkpointer_};
  if (checkpointer_ != nullptr) {
    JG_ASSIGN_OR_RETURN(resume, checkpointer_->Start(job_.nodes_to_checkpoint(),
                                                     options_.resume_from));
  } else if (!options_.resume_from.from_scratch()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resume_from_epoch=", options_.resume_from.ToString(),
                     " was given, but the job runs without a checkpointer"));
  }
  stats_.resumed_from = resume;

  if (!resume.has_value()) {
    JG_RETURN_IF_ERROR(Annotate(session.Run(job_.init_group()), "init group"));
    if (checkpointer_ != nullptr) {
      JG_RETURN_IF_ERROR(checkpointer_->CaptureBlobNames(session));
      EpochStats epoch0;
      JG_RETURN_IF_ERROR(SaveEpoch(0, session, &epoch0));
      EndEpoch(epoch0);
    }
  } else {
    JG_RETURN_IF_ERROR(checkpointer_->Restore(session, *resume).status());
    LOG(INFO) << "resumed from epoch " << *resume << " of "
              << checkpointer_->options().directory;
  }

  int64_t epoch = resume.has_value() ? *resume + 1 : 1;
  while (true) {
    EpochStats epoch_stats;
    epoch_stats.epoch = epoch;
    epoch_stats.resumed_from = resume;
    const absl::Time start = absl::Now();
    JG_RETURN_IF_ERROR(Annotate(session.Run(job_.epoch_group()),
                                absl::StrCat("epoch ", epoch)));
    epoch_stats.run_micros = MicrosSince(start);
    JG_ASSIGN_OR_RETURN(bool stop, AnyStopConditionTrue(session));
    if (checkpointer_ != nullptr) {
      JG_RETURN_IF_ERROR(SaveEpoch(epoch, session, &epoch_stats));
    }
    EndEpoch(epoch_stats);
    if (stop) break;
    ++epoch;
  }

  if (upload_ != nullptr) {
    if (checkpointer_ == nullptr) {
      return absl::InvalidArgumentError(
          "an upload builder needs a checkpointer");
    }
    if (stats_.epochs.back().saved) {
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
  JG_RETURN_IF_ERROR(
      Annotate(session.Run(job_.download_group()), "download group"));
  JG_RETURN_IF_ERROR(Annotate(session.Run(job_.exit_group()), "exit group"));
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

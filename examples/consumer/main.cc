// A program in another Bazel workspace that uses jobgraph through
// @jobgraph//:jobgraph only. It sums the values 0..9, four per epoch, into a
// total checkpointed after every epoch:
//   epoch 1 adds 0..3 (total 6), epoch 2 adds 4..7 (28), epoch 3 adds 8 and
//   9 (45) and finds the data finished, which ends the job.
//
//   bazel run //:main -- --checkpoint_dir=/tmp/consumer
//     result: epochs=3 total=45
//
// Interrupt it after an epoch, as a preemption would, then resume from the
// newest checkpoint; the resumed run ends exactly where an uninterrupted one
// does:
//   bazel run //:main -- --checkpoint_dir=/tmp/c --stop_after_epoch=2
//     result: epochs=2 total=28 (stopped)
//   bazel run //:main -- --checkpoint_dir=/tmp/c --resume_from_epoch=latest
//     result: epochs=3 total=45 (resumed from epoch 2)
//
// Exit status: 0 on success (a requested stop included), 1 when the job
// fails, 2 for arguments main() rejects (a relative --checkpoint_dir, a
// positional argument, ...). Abseil's flag parsing rejects an unknown flag or
// a bad value (--resume_from_epoch=soon) itself, with a message naming the
// flag, and exits with status 1.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/preemption.h"
#include "checkpoint/resume_from.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory of the checkpoints, an absolute path (required).");
// A ResumeFrom flag: "", "latest" or an epoch number; flag parsing rejects
// anything else with the accepted forms.
ABSL_FLAG(jobgraph::ResumeFrom, resume_from_epoch, {},
          "Resume from this committed epoch, or 'latest' (the newest one); "
          "empty starts from scratch.");
ABSL_FLAG(std::optional<int64_t>, stop_after_epoch, std::nullopt,
          "Stop once this epoch (>= 1) is saved, as a preemption would; "
          "unset runs to the end.");

namespace {

constexpr char kUsage[] =
    "usage: main --checkpoint_dir=/ABSOLUTE/DIR [--resume_from_epoch=latest|N] "
    "[--stop_after_epoch=N]\n";

struct Args {
  std::string checkpoint_dir;
  jobgraph::ResumeFrom resume_from;  // from scratch unless given
  int64_t stop_after_epoch = 0;      // 0: run to the end
};

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "main: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

// Parses the flags (see above) and checks what Abseil cannot: prints the
// usage and exits with status 2 on a positional argument, a missing or
// relative --checkpoint_dir, or a --stop_after_epoch below 1.
Args ParseArgs(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    UsageError(std::string("unknown argument '") + positional[1] + "'");
  }
  Args args;
  args.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  args.resume_from = absl::GetFlag(FLAGS_resume_from_epoch);
  const std::optional<int64_t> stop = absl::GetFlag(FLAGS_stop_after_epoch);
  if (stop.has_value()) {
    if (*stop < 1) {
      UsageError(
          absl::StrCat("--stop_after_epoch must be an epoch number >= 1, got '",
                       *stop, "'"));
    }
    args.stop_after_epoch = *stop;
  }
  // `bazel run` starts the program in its runfiles tree, where a relative
  // directory would be lost.
  if (args.checkpoint_dir.empty() || args.checkpoint_dir[0] != '/') {
    UsageError("--checkpoint_dir must be an absolute path, got '" +
               args.checkpoint_dir + "'");
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const Args args = ParseArgs(argc, argv);

  // The data, the reader's position and the total are made by the init
  // group, so they live in the node's root workspace and are checkpointed.
  jobgraph::Job job;
  jobgraph::Node node("worker");
  jobgraph::Task& init = job.init_group().NewTask(node);
  jobgraph::Record data = jobgraph::ConstRecord(
      init.net(), {{"value", jobgraph::Tensor::Iota<int64_t>(10)}});
  jobgraph::Reader reader =
      jobgraph::Dataset(data, "values").NewReader(init.net());
  jobgraph::BlobRef total = init.net().Const<int64_t>("total", {0});

  jobgraph::ReaderWithLimit four_per_epoch(reader, /*num_iter=*/4);
  jobgraph::Pipe(
      job.epoch_group(), node, four_per_epoch,
      [total](jobgraph::NetBuilder& net, const jobgraph::Record& row) {
        net.Add(total, row.Field("value"), total);
      });
  job.AddStopCondition(four_per_epoch.data_finished());

  jobgraph::LocalSession session;
  jobgraph::CheckpointOptions checkpoint_options;
  checkpoint_options.directory = args.checkpoint_dir;
  jobgraph::Checkpointer checkpoints(checkpoint_options);
  jobgraph::JobRunnerOptions runner_options;
  runner_options.resume_from = args.resume_from;
  // Stands in for a preemption (a SIGTERM would do the same): the run stops
  // once the epoch is saved.
  int64_t last_saved = 0;
  jobgraph::JobRunner* running = nullptr;
  runner_options.on_epoch_end = [&](const jobgraph::EpochStats& stats) {
    last_saved = stats.epoch;
    if (args.stop_after_epoch > 0 && stats.epoch == args.stop_after_epoch) {
      running->RequestPreemption();
    }
  };
  jobgraph::JobRunner runner(job, &checkpoints, runner_options);
  running = &runner;
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  const bool stopped = !epochs.ok() && jobgraph::IsPreempted(epochs.status());
  if (!epochs.ok() && !stopped) {
    std::fprintf(stderr, "main: the job failed: %s\n",
                 epochs.status().ToString().c_str());
    return 1;
  }

  absl::StatusOr<jobgraph::Tensor> sum = session.FetchBlob("worker", "total");
  if (!sum.ok()) {
    std::fprintf(stderr, "main: cannot fetch the total: %s\n",
                 sum.status().ToString().c_str());
    return 1;
  }
  std::string how;
  if (stopped) {
    how = " (stopped)";
  } else if (runner.stats().resumed_from.has_value()) {
    how = " (resumed from epoch " +
          std::to_string(*runner.stats().resumed_from) + ")";
  }
  std::printf("result: epochs=%lld total=%lld%s\n",
              static_cast<long long>(stopped ? last_saved : *epochs),
              static_cast<long long>(sum->data<int64_t>()[0]), how.c_str());
  return 0;
}

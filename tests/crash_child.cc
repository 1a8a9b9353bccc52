// crash_child: the Caffe2 checkpoint-test pipeline as a process that crash
// tests can kill and resume.
//
// Each of `--nodes` trainers (trainer_0, trainer_1, ...) reads the values
// 0..9 three at a time into a total that starts at 100; the job ends after
// epoch 4 with every total at 145. A MultiNodeCheckpointManager saves every
// node's workspace into `--checkpoint_dir` after init (epoch 0) and after
// every epoch, and commits each epoch in the commit log.
//
// Standard output, one line at a time and flushed at once so that a parent
// that SIGKILLs this process still sees every line printed before the kill:
//   resumed_from=<epoch|none>   when the first epoch (or epoch 0) ends
//   epoch_end=<epoch>           after each epoch's checkpoint is committed
//   result: epochs=<n> totals=<t0>,<t1>,...   when the job has finished
// Exit status 0 after the result line; 1 with the error on stderr otherwise.
//
// Failpoints come from JOBGRAPH_FAILPOINT (checkpoint/util/failpoint.h).
// `--kill_after_epoch=N` SIGKILLs the process right after epoch N's
// checkpoint is committed, which leaves a directory whose newest committed
// epoch is exactly N: the starting point for a failpoint further on.
//
// `--wait_at_events` makes the run stop at each of its events until the
// parent lets it go on, so that a parent can kill it at exactly one of them.
// The events, each a line on standard output:
//   event=init node=<node>    in the init group, on every node (before
//                             epoch 0 is saved)
//   event=epoch node=<node>   in every epoch, on every node (the epoch's
//                             save has not begun: the newest committed epoch
//                             is the one before)
//   epoch_end=<epoch>         as above (the epoch is committed)
// After each, the process reads one byte from standard input before it goes
// on; nothing else happens in the job meanwhile but what other nodes' tasks
// do within the same group (one event is waiting at a time). End of input
// stops the waiting for the rest of the run.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/resume_from.h"
#include "engine/ops/function_op.h"
#include "engine/session.h"
#include "glog/logging.h"
#include "tests/caffe2_pipeline.h"

ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory of the checkpoints (required).");
ABSL_FLAG(jobgraph::ResumeFrom, resume_from_epoch, {},
          "Empty: from scratch; 'latest' or an epoch number: resume.");
ABSL_FLAG(int, nodes, 2, "Number of trainer nodes.");
ABSL_FLAG(int, keep_last, 0,
          "Retention: keep only the newest N committed epochs (0: all).");
ABSL_FLAG(int, epoch_delay_ms, 0,
          "Each epoch sleeps this long in a Function op on every node, so "
          "that a parent can kill the job at random moments of a run.");
ABSL_FLAG(bool, incremental_checkpoint, false,
          "Incremental saves (CheckpointOptions::incremental).");
ABSL_FLAG(int64_t, kill_after_epoch, -1,
          "SIGKILL this process right after this epoch's checkpoint is "
          "committed (-1: never).");
ABSL_FLAG(bool, wait_at_events, false,
          "After each event line (see the file's comment), wait for one byte "
          "on standard input before going on.");

namespace jobgraph {
namespace {

constexpr char kSleepFunction[] = "crash_child_sleep";

// Node threads print events too: one line at a time.
std::mutex& PrintMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

void PrintLocked(const std::string& line) {
  // stdout may be a file the parent reads after a SIGKILL: nothing may wait
  // in a user-space buffer.
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Print(const std::string& line) {
  std::lock_guard<std::mutex> lock(PrintMutex());
  PrintLocked(line);
}

// Whether events wait for the parent (--wait_at_events, until stdin ends).
std::atomic<bool> g_wait_at_events{false};

// Prints an event line and, with --wait_at_events, waits for the parent's
// byte; the lock keeps every other event (and line) behind this one.
void Event(const std::string& line) {
  std::lock_guard<std::mutex> lock(PrintMutex());
  PrintLocked(line);
  if (!g_wait_at_events.load()) return;
  char byte = 0;
  ssize_t n = 0;
  do {
    n = ::read(STDIN_FILENO, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) g_wait_at_events.store(false);
}

std::string EventFunction(const std::string& group, const std::string& node) {
  return absl::StrCat("crash_child_event_", group, "_", node);
}

// trainer_<id>'s part of the Caffe2 pipeline, plus an optional delay and
// events (--wait_at_events).
void BuildPipeline(Job& job, int id, int epoch_delay_ms, bool events) {
  testing::BuildCaffe2Pipeline(job, id);
  const std::string name = absl::StrCat("trainer_", id);
  const Node node(name);
  // Tasks of their own, so that neither adds checkpointed blobs nor changes
  // the pipeline's nets.
  if (epoch_delay_ms > 0) {
    job.epoch_group()
        .NewTask(node, {.name = "epoch_delay"})
        .net()
        .Function(kSleepFunction, {}, {});
  }
  if (events) {
    job.init_group()
        .NewTask(node, {.name = "init_event"})
        .net()
        .Function(EventFunction("init", name), {}, {});
    job.epoch_group()
        .NewTask(node, {.name = "epoch_event"})
        .net()
        .Function(EventFunction("epoch", name), {}, {});
  }
}

absl::Status RegisterEvents(int num_nodes) {
  for (int id = 0; id < num_nodes; ++id) {
    const std::string node = absl::StrCat("trainer_", id);
    for (const std::string group : {"init", "epoch"}) {
      const std::string line = absl::StrCat("event=", group, " node=", node);
      absl::Status registered = FunctionRegistry::Global().Register(
          EventFunction(group, node), [line](FunctionContext&) {
            Event(line);
            return absl::OkStatus();
          });
      if (!registered.ok()) return registered;
    }
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const int num_nodes = absl::GetFlag(FLAGS_nodes);
  const int delay_ms = absl::GetFlag(FLAGS_epoch_delay_ms);
  const int64_t kill_after = absl::GetFlag(FLAGS_kill_after_epoch);
  if (dir.empty())
    return absl::InvalidArgumentError("--checkpoint_dir is required");
  if (num_nodes < 1) return absl::InvalidArgumentError("--nodes must be >= 1");

  if (delay_ms > 0) {
    absl::Status registered = FunctionRegistry::Global().Register(
        kSleepFunction, [delay_ms](FunctionContext&) {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          return absl::OkStatus();
        });
    if (!registered.ok()) return registered;
  }
  const bool events = absl::GetFlag(FLAGS_wait_at_events);
  g_wait_at_events.store(events);
  if (events) {
    if (absl::Status registered = RegisterEvents(num_nodes); !registered.ok()) {
      return registered;
    }
  }

  Job job;
  for (int id = 0; id < num_nodes; ++id) {
    BuildPipeline(job, id, delay_ms, events);
  }

  CheckpointOptions options;
  options.directory = dir;
  options.retention.keep_last = absl::GetFlag(FLAGS_keep_last);
  options.incremental = absl::GetFlag(FLAGS_incremental_checkpoint);
  MultiNodeCheckpointManager manager(options);

  const JobRunner* runner_ptr = nullptr;
  bool printed_resume = false;
  JobRunnerOptions runner_options;
  runner_options.resume_from = absl::GetFlag(FLAGS_resume_from_epoch);
  // A crash test must see every save failure: a save that failed quietly
  // would make a later resume start from an older epoch than expected.
  runner_options.fail_on_save_error = true;
  runner_options.on_epoch_end = [&](const EpochStats& epoch) {
    if (!printed_resume) {
      // Printed before anything else the run commits, so that a parent
      // whose kill comes later still learns what this run loaded.
      printed_resume = true;
      const std::optional<int64_t>& from = runner_ptr->stats().resumed_from;
      Print(absl::StrCat("resumed_from=",
                         from.has_value() ? absl::StrCat(*from) : "none"));
    }
    Event(absl::StrCat("epoch_end=", epoch.epoch));
    if (epoch.epoch == kill_after) {
      ::kill(::getpid(), SIGKILL);
      for (;;) ::pause();
    }
  };
  JobRunner runner(job, &manager, runner_options);
  runner_ptr = &runner;

  LocalSession session;
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  if (!epochs.ok()) return epochs.status();
  if (!printed_resume) {
    return absl::InternalError("the job ended without running an epoch");
  }
  std::vector<int64_t> totals;
  for (int id = 0; id < num_nodes; ++id) {
    absl::StatusOr<Tensor> total =
        session.FetchBlob(absl::StrCat("trainer_", id), "total");
    if (!total.ok()) return total.status();
    totals.push_back(total->data<int64_t>()[0]);
  }
  Print(absl::StrCat("result: epochs=", *epochs,
                     " totals=", absl::StrJoin(totals, ",")));
  return absl::OkStatus();
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  absl::ParseCommandLine(argc, argv);
  absl::Status status = jobgraph::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "crash_child: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

// async_bench: how long an epoch boundary blocks the job for a synchronous
// and for an asynchronous checkpoint of the same workspace, what the
// asynchronous one costs in memory, and what it adds to an epoch, in one run.
//
// The job: one node whose init group fills --total_mib of float tensors of
// --tensor_mib each; every epoch overwrites a fraction --modified of them
// (the first ones, every element) and then "computes" for a fixed time
// (--compute_ms; by default 1.25 x the synchronous save measured first, so
// that the compute is at least as long as a save, as the figure asks). The
// compute sleeps: it stands for work on an accelerator, during which the
// host's cores are free for the background writer.
//
// Three runs of --epochs epochs each, all checkpointing every epoch into a
// fresh directory under --dir (LevelDB, durable):
//   sync    CheckpointOptions::async = false: blocking = the save;
//   async   async = true: blocking = the wait for the previous save plus the
//           snapshot;
//   none    no checkpointer: the epoch time without checkpoints.
// Figures are medians over epochs 1..N (epoch 0, the save after init, is
// left out: nothing of it overlaps compute).
//
// Memory: the peak RSS of each run above its RSS after init (VmHWM reset
// when init is done). The async run's extra memory is its peak minus the sync
// run's peak (the database layer's buffers are the same in both); the goal
// is that it is no more than the bytes the epoch overwrites while a save is
// in flight (copy-on-write copies only those).
//
// The last line is
//   async_bench: blocking_vs_sync=<r> extra_memory_vs_modified=<r>
//   epoch_overhead=<r>
// (blocking_vs_sync: async blocking / sync blocking; epoch_overhead: the
// async run's epoch time, blocking included, over the epoch time without
// checkpoints).
//
// Run:
//   ./tools/bazel run -c opt //tools/bench:async_bench

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/util/file_util.h"
#include "engine/net_builder.h"
#include "engine/operator.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "glog/logging.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(std::string, dir, "",
          "Scratch directory (created if missing; needs about 2x --total_mib "
          "free). Default: $TMPDIR (or /tmp)/jobgraph_async_bench.");
ABSL_FLAG(int, total_mib, 1024, "MiB of float tensors in the workspace.");
ABSL_FLAG(int, tensor_mib, 16, "MiB per tensor.");
ABSL_FLAG(double, modified, 0.25,
          "Fraction of the tensors each epoch overwrites.");
ABSL_FLAG(int, epochs, 4, "Epochs per run.");
ABSL_FLAG(int, compute_ms, -1,
          "Compute time per epoch; -1: 1.25 x the measured synchronous save.");

namespace jobgraph {
namespace bench {
namespace {

// Overwrite(x -> x): adds 1 to every element of the float tensor x, which
// makes the tensor's storage its own again if a snapshot shares it.
class OverwriteOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(1, 1, 1, 1));
    return CheckInPlace(0, 0);
  }
  absl::Status Run() override {
    JG_RETURN_IF_ERROR(Input(0, FLOAT).status());
    Tensor* x = Output(0);
    float* data = x->mutable_data<float>();
    for (int64_t i = 0; i < x->numel(); ++i) data[i] += 1.0f;
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(BenchOverwrite, OverwriteOp);

// Compute(): sleeps `ms` (see the header).
class ComputeOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Init() override {
    ms_ = GetArg<int64_t>("ms", 0);
    return absl::OkStatus();
  }
  absl::Status Run() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return absl::OkStatus();
  }

 private:
  int64_t ms_ = 0;
};
JG_REGISTER_OPERATOR(BenchCompute, ComputeOp);

// The RSS when init's tensors exist and no save has run yet.
long g_base_kb = 0;

// ResetPeak(): records the RSS as g_base_kb and resets the peak to it; the
// last op of init, so every run measures from the same point.
class ResetPeakOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    g_base_kb = StatusKb("VmRSS");
    CHECK(ResetPeakRss()) << "cannot reset VmHWM (Linux >= 4.0 needed)";
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(BenchResetPeak, ResetPeakOp);

struct Setup {
  int tensors = 0;
  int64_t tensor_elements = 0;
  int modified = 0;
  int epochs = 0;
};

void BuildJob(const Setup& setup, int64_t compute_ms, Job& job) {
  const Node node("trainer");
  Task& init = job.init_group().NewTask(node);
  for (int i = 0; i < setup.tensors; ++i) {
    init.net().Op(
        "ConstantFill", {}, {BlobRef(absl::StrCat("w", i))},
        {MakeArg("shape", std::vector<int64_t>{setup.tensor_elements}),
         MakeArg("value", 0.5f)});
  }
  init.net().NewNet();
  init.net().Op("BenchResetPeak", {}, {});
  Task& step = job.epoch_group().NewTask(node, {.name = "step"});
  for (int i = 0; i < setup.modified; ++i) {
    const BlobRef w(absl::StrCat("w", i));
    step.net().Op("BenchOverwrite", {w}, {w});
  }
  step.net().Op("BenchCompute", {}, {}, {MakeArg("ms", compute_ms)});
  EpochLimiter(job, node, setup.epochs);
}

struct RunFigures {
  double blocking_ms = 0;  // median save_micros over epochs 1..N
  double epoch_ms = 0;     // median run + blocking over epochs 1..N
  double peak_extra_mib = 0;
};

RunFigures RunOnce(const Setup& setup, int64_t compute_ms,
                   const std::string& dir, bool checkpoint, bool async) {
  RemoveIfExists(dir);
  Job job;
  BuildJob(setup, compute_ms, job);
  LocalSession session;
  std::unique_ptr<Checkpointer> checkpointer;
  if (checkpoint) {
    checkpointer = std::make_unique<Checkpointer>(
        CheckpointOptions{.directory = dir, .async = async});
  }
  JobRunnerOptions options;
  options.preempt_signals = {};
  JobRunner runner(job, checkpointer.get(), options);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  Check(epochs.status());
  CHECK_EQ(*epochs, setup.epochs);
  CHECK_EQ(runner.stats().save_failures, 0);
  Sample blocking, epoch;
  for (const EpochStats& e : runner.stats().epochs) {
    if (e.epoch == 0) continue;
    blocking.Add(e.save_micros / 1000.0);
    epoch.Add((e.run_micros + e.save_micros) / 1000.0);
  }
  RunFigures f;
  f.blocking_ms = blocking.empty() ? 0 : blocking.Median();
  f.epoch_ms = epoch.Median();
  f.peak_extra_mib = (StatusKb("VmHWM") - g_base_kb) / 1024.0;
  RemoveIfExists(dir);
  return f;
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = JoinPath(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp",
                   "jobgraph_async_bench");
  }
  Setup setup;
  const int total_mib = absl::GetFlag(FLAGS_total_mib);
  const int tensor_mib = absl::GetFlag(FLAGS_tensor_mib);
  CHECK_GT(total_mib, 0);
  CHECK_GT(tensor_mib, 0);
  setup.tensors = std::max(1, total_mib / tensor_mib);
  setup.tensor_elements = int64_t{tensor_mib} << 20 >> 2;
  setup.modified =
      static_cast<int>(absl::GetFlag(FLAGS_modified) * setup.tensors + 0.5);
  setup.epochs = absl::GetFlag(FLAGS_epochs);
  CHECK_GE(setup.epochs, 2);
  const double modified_mib = static_cast<double>(setup.modified) * tensor_mib;
  std::printf(
      "workspace: %d x %d MiB float tensors (%d MiB); each epoch "
      "overwrites %d of them (%.0f MiB); %d epochs per run; dir %s\n",
      setup.tensors, tensor_mib, setup.tensors * tensor_mib, setup.modified,
      modified_mib, setup.epochs, dir.c_str());

  // The synchronous save, first with no compute, to size the compute.
  int64_t compute_ms = absl::GetFlag(FLAGS_compute_ms);
  if (compute_ms < 0) {
    RunFigures probe = RunOnce(setup, 0, dir, true, false);
    compute_ms = static_cast<int64_t>(probe.blocking_ms * 1.25);
    std::printf(
        "sizing: a synchronous save takes %.0f ms; compute per epoch "
        "%lld ms\n",
        probe.blocking_ms, static_cast<long long>(compute_ms));
  }
  RunFigures none = RunOnce(setup, compute_ms, dir, false, false);
  RunFigures sync = RunOnce(setup, compute_ms, dir, true, false);
  RunFigures async = RunOnce(setup, compute_ms, dir, true, true);

  std::printf("%-38s %10s %10s %14s\n", "run (medians over epochs 1..N)",
              "blocking", "epoch", "peak over init");
  std::printf("%-38s %10s %8.0f ms %10.0f MiB\n", "no checkpoints", "-",
              none.epoch_ms, none.peak_extra_mib);
  std::printf("%-38s %7.1f ms %8.0f ms %10.0f MiB\n",
              "synchronous checkpoint every epoch", sync.blocking_ms,
              sync.epoch_ms, sync.peak_extra_mib);
  std::printf("%-38s %7.1f ms %8.0f ms %10.0f MiB\n",
              "asynchronous checkpoint every epoch", async.blocking_ms,
              async.epoch_ms, async.peak_extra_mib);
  const double extra_mib = async.peak_extra_mib - sync.peak_extra_mib;
  std::printf(
      "async extra memory over sync: %.0f MiB; overwritten per epoch: "
      "%.0f MiB\n",
      extra_mib, modified_mib);
  std::printf(
      "async_bench: blocking_vs_sync=%.6f extra_memory_vs_modified=%.2f "
      "epoch_overhead=%.3f\n",
      async.blocking_ms / sync.blocking_ms,
      modified_mib > 0 ? extra_mib / modified_mib : 0.0,
      async.epoch_ms / none.epoch_ms);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  return jobgraph::bench::Main();
}

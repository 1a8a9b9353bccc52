// async_bench: how long an epoch boundary blocks the job for a synchronous
// and for an asynchronous checkpoint of the same workspace, what the
// asynchronous one costs in memory, and what it adds to an epoch, in one run,
// in both memory states and with two kinds of compute.
//
// The job: one node whose init group fills --total_mib of float tensors of
// --tensor_mib each; every epoch overwrites a fraction --modified of them
// (the first ones, every element), then computes for --compute_ms (by
// default 1.25 x a synchronous save measured first, so that the compute is
// at least as long as a save). Two kinds of compute:
//   sleep  the compute sleeps: it stands for work on an accelerator, during
//          which the host's cores are free for the background writer;
//   cpu    the compute works on the CPU for that much CPU time (of its own
//          thread): arithmetic over the tensors the epoch does not write.
// Two memory states, for every kind:
//   settled  nothing between epochs;
//   fresh    the epoch ends by touching and freeing --churn_mib MiB (timed
//            and taken out of the epoch's time), so that memory the next
//            epoch maps is fresh memory the host may have taken back: on
//            some VMs its first touch runs at a few hundred MB/s.
// Each (kind, state) has three runs of --epochs epochs, checkpointing every
// epoch into a fresh directory under --dir (LevelDB, durable):
//   sync    CheckpointOptions::async = false: blocking = the save;
//   async   async = true: blocking = the wait for the previous save plus the
//           snapshot;
//   none    no checkpointer: the epoch time without checkpoints.
// Every run starts with an empty storage pool (engine/storage_pool.h).
// Figures are medians over epochs 1..N (epoch 0, the save after init, is
// left out: nothing of it overlaps compute).
//
// Memory: the peak RSS of each run above its RSS after init (VmHWM reset
// when init is done). The async run's extra memory is its peak minus the
// peak of the run without checkpoints; the goal is that it is no more than
// 1.2 x the bytes the epoch overwrites (copy-on-write copies only those).
//
// CPU: the save's CPU time per save is (the sync run's process CPU time
// after init - the none run's) / (N + 1) saves; the epoch's is the none
// run's / N; the churn's CPU time is left out of both.
//
// The last line is
//   async_bench: blocking_vs_sync=<r> extra_memory_vs_modified=<r>
//   epoch_overhead=<r> epoch_overhead_fresh_memory=<r> epoch_overhead_cpu=<r>
// blocking_vs_sync: async blocking / sync blocking (sleep compute, the worse
// state); extra_memory_vs_modified: the worse state; epoch_overhead: the
// async run's epoch time, blocking included, over the epoch time without
// checkpoints, sleep compute, settled; _fresh_memory: the same, fresh;
// _cpu: cpu compute, the worse state, printed beside its bound
// 1 + save CPU / epoch CPU + 0.05.
//
// Run:
//   ./tools/bazel run -c opt //tools/bench:async_bench

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
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
#include "engine/storage_pool.h"
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
ABSL_FLAG(int64_t, memory_pool_mib, 1024,
          "Bound of the storage pool (engine/storage_pool.h); 0 turns it "
          "off, to see what it saves.");
ABSL_FLAG(int, churn_mib, 1024,
          "MiB touched and freed at the end of each epoch in the fresh-memory "
          "state.");

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

// CPU seconds the calling thread has used.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Compute(inputs...): for `ms` ms, sleeps ("sleep") or works on the CPU
// ("cpu": sums the squares of the inputs' elements, again and again, until
// its thread has used `ms` ms of CPU time). See the header.
class ComputeOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Init() override {
    ms_ = GetArg<int64_t>("ms", 0);
    cpu_ = GetArg<std::string>("kind", "sleep") == "cpu";
    return absl::OkStatus();
  }
  absl::Status Run() override {
    if (!cpu_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
      return absl::OkStatus();
    }
    const double until = ThreadCpuSeconds() + ms_ / 1000.0;
    double sum = 0;
    for (int i = 0;; i = (i + 1) % InputSize()) {
      JG_ASSIGN_OR_RETURN(const Tensor* x, Input(i, FLOAT));
      const float* data = x->data<float>();
      // 1 MiB at a time, then a look at the clock.
      constexpr int64_t kChunk = 1 << 18;
      for (int64_t begin = 0; begin < x->numel(); begin += kChunk) {
        const int64_t end = std::min(x->numel(), begin + kChunk);
        float part = 0;
        for (int64_t j = begin; j < end; ++j) part += data[j] * data[j];
        sum += part;
        if (ThreadCpuSeconds() >= until) {
          g_sink = sum;
          return absl::OkStatus();
        }
      }
    }
  }

 private:
  static inline volatile double g_sink = 0;
  int64_t ms_ = 0;
  bool cpu_ = false;
};
JG_REGISTER_OPERATOR(BenchCompute, ComputeOp);

// Wall time of each Churn run, in order (one per epoch), and the CPU time
// of all of them.
std::vector<double> g_churn_ms;
double g_churn_cpu_s = 0;

// Churn(): touches and frees `mib` MiB (Settle without the sleep), timed.
class ChurnOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Init() override {
    mib_ = GetArg<int64_t>("mib", 0);
    return absl::OkStatus();
  }
  absl::Status Run() override {
    const Clock::time_point start = Clock::now();
    const double cpu = ThreadCpuSeconds();
    Settle(mib_, 0);
    g_churn_cpu_s += ThreadCpuSeconds() - cpu;
    g_churn_ms.push_back(Seconds(start) * 1000);
    return absl::OkStatus();
  }

 private:
  int64_t mib_ = 0;
};
JG_REGISTER_OPERATOR(BenchChurn, ChurnOp);

// Process CPU seconds when init was done.
double g_base_cpu = 0;

// The RSS when init's tensors exist and no save has run yet.
long g_base_kb = 0;

// ResetPeak(): records the RSS as g_base_kb and resets the peak to it; the
// last op of init, so every run measures from the same point.
class ResetPeakOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    g_base_kb = StatusKb("VmRSS");
    g_base_cpu = CpuSeconds();
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
  int64_t churn_mib = 0;
};

// What an epoch computes, and the memory state between epochs.
struct Mode {
  bool cpu = false;    // cpu compute, else sleep
  bool fresh = false;  // churn at each epoch's end, else settled
};

void BuildJob(const Setup& setup, int64_t compute_ms, const Mode& mode,
              Job& job) {
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
  std::vector<BlobRef> read;
  for (int i = setup.modified; i < setup.tensors; ++i) {
    read.emplace_back(absl::StrCat("w", i));
  }
  if (read.empty()) read.emplace_back("w0");
  step.net().Op("BenchCompute", read, {},
                {MakeArg("ms", compute_ms),
                 MakeArg("kind", std::string(mode.cpu ? "cpu" : "sleep"))});
  if (mode.fresh) {
    step.net().Op("BenchChurn", {}, {}, {MakeArg("mib", setup.churn_mib)});
  }
  EpochLimiter(job, node, setup.epochs);
}

struct RunFigures {
  double blocking_ms = 0;  // median save_micros over epochs 1..N
  double epoch_ms = 0;     // median run + blocking - churn over epochs 1..N
  double churn_ms = 0;     // median churn
  double peak_extra_mib = 0;
  double cpu_s = 0;  // process CPU seconds after init, churn left out
};

RunFigures RunOnce(const Setup& setup, int64_t compute_ms, const Mode& mode,
                   const std::string& dir, bool checkpoint, bool async) {
  RemoveIfExists(dir);
  // Each run starts with an empty pool: the last run's buffers would be
  // memory this one never had to touch.
  StoragePool& pool = StoragePool::Global();
  const size_t limit = pool.limit_bytes();
  pool.set_limit_bytes(0);
  pool.set_limit_bytes(limit);
  g_churn_ms.clear();
  g_churn_cpu_s = 0;
  Job job;
  BuildJob(setup, compute_ms, mode, job);
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
  RunFigures f;
  f.cpu_s = CpuSeconds() - g_base_cpu - g_churn_cpu_s;
  f.peak_extra_mib = (StatusKb("VmHWM") - g_base_kb) / 1024.0;
  Sample blocking, epoch, churn;
  for (const EpochStats& e : runner.stats().epochs) {
    if (e.epoch == 0) continue;
    const double churn_ms =
        mode.fresh ? g_churn_ms.at(static_cast<size_t>(e.epoch - 1)) : 0.0;
    blocking.Add(e.save_micros / 1000.0);
    epoch.Add((e.run_micros + e.save_micros) / 1000.0 - churn_ms);
    churn.Add(churn_ms);
  }
  f.blocking_ms = blocking.empty() ? 0 : blocking.Median();
  f.epoch_ms = epoch.Median();
  f.churn_ms = churn.Median();
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

  setup.churn_mib = absl::GetFlag(FLAGS_churn_mib);
  CHECK_GE(absl::GetFlag(FLAGS_memory_pool_mib), 0);
  StoragePool::Global().set_limit_bytes(
      static_cast<size_t>(absl::GetFlag(FLAGS_memory_pool_mib)) << 20);
  std::printf("storage pool: up to %lld MiB\n",
              static_cast<long long>(absl::GetFlag(FLAGS_memory_pool_mib)));

  // The synchronous save, first with no compute, to size the compute.
  int64_t compute_ms = absl::GetFlag(FLAGS_compute_ms);
  if (compute_ms < 0) {
    RunFigures probe = RunOnce(setup, 0, Mode{}, dir, true, false);
    compute_ms = static_cast<int64_t>(probe.blocking_ms * 1.25);
    std::printf(
        "sizing: a synchronous save takes %.0f ms; compute per epoch "
        "%lld ms\n",
        probe.blocking_ms, static_cast<long long>(compute_ms));
  }

  struct Result {
    double blocking_vs_sync = 0;
    double extra_vs_modified = 0;
    double overhead = 0;
    double cpu_bound = 0;  // 1 + save CPU / epoch CPU + 0.05
  };
  auto run_mode = [&](const Mode& mode) {
    std::printf("\n%s compute, %s memory\n", mode.cpu ? "cpu" : "sleep",
                mode.fresh ? "fresh" : "settled");
    RunFigures none = RunOnce(setup, compute_ms, mode, dir, false, false);
    RunFigures sync = RunOnce(setup, compute_ms, mode, dir, true, false);
    RunFigures async = RunOnce(setup, compute_ms, mode, dir, true, true);
    std::printf("  %-36s %10s %10s %14s %9s %8s\n",
                "run (medians over epochs 1..N)", "blocking", "epoch",
                "peak over init", "cpu", "churn");
    auto row = [&](const char* name, const RunFigures& f, bool saves) {
      std::printf("  %-36s %7.1f ms %7.0f ms %10.0f MiB %7.2f s %5.0f ms\n",
                  name, saves ? f.blocking_ms : 0.0, f.epoch_ms,
                  f.peak_extra_mib, f.cpu_s, f.churn_ms);
    };
    row("no checkpoints", none, false);
    row("synchronous checkpoint every epoch", sync, true);
    row("asynchronous checkpoint every epoch", async, true);
    Result r;
    r.blocking_vs_sync = async.blocking_ms / sync.blocking_ms;
    r.extra_vs_modified =
        modified_mib > 0
            ? (async.peak_extra_mib - none.peak_extra_mib) / modified_mib
            : 0.0;
    r.overhead = async.epoch_ms / none.epoch_ms;
    const double save_cpu = (sync.cpu_s - none.cpu_s) / (setup.epochs + 1);
    const double epoch_cpu = none.cpu_s / setup.epochs;
    r.cpu_bound = 1 + save_cpu / epoch_cpu + 0.05;
    std::printf(
        "  async: blocking vs sync %.4f; extra memory over no checkpoints "
        "%.0f MiB = %.2f x the %.0f MiB overwritten; epoch overhead %.3f; "
        "save cpu %.3f s per save, epoch cpu %.3f s (bound for cpu compute "
        "%.3f)\n",
        r.blocking_vs_sync, async.peak_extra_mib - none.peak_extra_mib,
        r.extra_vs_modified, modified_mib, r.overhead, save_cpu, epoch_cpu,
        r.cpu_bound);
    return r;
  };
  const Result sleep_settled = run_mode({.cpu = false, .fresh = false});
  const Result sleep_fresh = run_mode({.cpu = false, .fresh = true});
  const Result cpu_settled = run_mode({.cpu = true, .fresh = false});
  const Result cpu_fresh = run_mode({.cpu = true, .fresh = true});
  // The cpu figure is the state whose overhead is further above its bound.
  const Result& cpu_worse = cpu_fresh.overhead - cpu_fresh.cpu_bound >
                                    cpu_settled.overhead - cpu_settled.cpu_bound
                                ? cpu_fresh
                                : cpu_settled;
  std::printf("\nepoch_overhead_cpu %.3f against its bound %.3f (%s)\n",
              cpu_worse.overhead, cpu_worse.cpu_bound,
              &cpu_worse == &cpu_fresh ? "fresh memory" : "settled");
  std::printf(
      "async_bench: blocking_vs_sync=%.6f extra_memory_vs_modified=%.2f "
      "epoch_overhead=%.3f epoch_overhead_fresh_memory=%.3f "
      "epoch_overhead_cpu=%.3f\n",
      std::max(sleep_settled.blocking_vs_sync, sleep_fresh.blocking_vs_sync),
      std::max(sleep_settled.extra_vs_modified, sleep_fresh.extra_vs_modified),
      sleep_settled.overhead, sleep_fresh.overhead, cpu_worse.overhead);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  jobgraph::bench::InitBench(argc, argv);
  return jobgraph::bench::Main();
}

// tier_bench, part 3: what the background flush of the local tier costs an
// epoch of CPU-bound compute (see the comment that opens tier_bench.cc).

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/tier_bench.h"

namespace jobgraph {
namespace bench {
namespace {

// CPU seconds the calling thread has used.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

// ---------------------------------------------------------------------------
// Part 3.

absl::StatusOr<TierBench::EpochRun> TierBench::RunEpochs(bool flush_on,
                                                         int reps) {
  JG_RETURN_IF_ERROR(RemovePath(overhead_shared_));
  JG_RETURN_IF_ERROR(RemovePath(overhead_local_));
  Settle();
  CheckpointOptions options;
  options.directory = overhead_shared_;
  options.local_directory = overhead_local_;
  options.shared_every = flush_on ? 1 : c_.epochs + 1;
  JG_ASSIGN_OR_RETURN(std::unique_ptr<Checkpointer> saver, StartSaver(options));
  EpochRun run;
  double cpu_s = 0;
  for (int64_t epoch = 1; epoch <= c_.epochs; ++epoch) {
    const double thread_cpu = ThreadCpuSeconds();
    const double process_cpu = CpuSeconds();
    const auto start = Clock::now();
    Compute(reps);
    const double compute_s = Seconds(start);
    const double compute_cpu_s = ThreadCpuSeconds() - thread_cpu;
    // Off the clock (a read of a small file): whether the save runs beside
    // the previous epoch's flush, which would share the cores with it.
    bool beside_flush = false;
    if (flush_on && epoch > 1) {
      absl::StatusOr<CommitLog> log = ReadCommitLog(overhead_shared_);
      beside_flush =
          !log.ok() || FindCommittedEpoch(*log, epoch - 1, {kNode}) == nullptr;
    }
    const auto save_start = Clock::now();
    absl::StatusOr<CheckpointStats> saved = saver->SaveEpoch(session_, epoch);
    const double save_s = Seconds(save_start);
    JG_RETURN_IF_ERROR(saved.status());
    if (epoch == 1) continue;
    cpu_s += CpuSeconds() - process_cpu;
    run.compute_s.Add(compute_s);
    run.compute_cpu_s.Add(compute_cpu_s);
    run.save_s.Add(save_s);
    run.commit_s.Add(saved->commit_micros / 1e6);
    run.epoch_s.Add(compute_s + save_s);
    if (beside_flush) ++run.saves_beside_flush;
  }
  run.cpu_s = cpu_s;
  const auto end = Clock::now();
  saver->End();
  run.end_s = Seconds(end);
  for (const SaveOutcome& outcome : saver->TakeFinishedSaves()) {
    JG_RETURN_IF_ERROR(Annotate(outcome.stats.status(),
                                absl::StrCat("epoch ", outcome.epoch)));
  }
  saver.reset();
  JG_ASSIGN_OR_RETURN(const CommitLog log, ReadCommitLog(overhead_shared_));
  run.flushed = CommittedEpochList(log, {kNode});
  return run;
}

absl::Status TierBench::FlushOverhead() {
  // Parts 1 and 2's files are gone (RemoveSaveFiles); part 2b removes its
  // own.
  const double target_s =
      c_.compute_ms >= 0 ? c_.compute_ms / 1000.0 : flush_s_;
  // The repetitions per block for `target_s`, from the time of 1 and of
  // 1 + kProbe (the first includes the pass over memory that every count
  // pays).
  constexpr int kProbe = 16;
  auto time_compute = [&](int reps) {
    const auto start = Clock::now();
    Compute(reps);
    return Seconds(start);
  };
  time_compute(1);  // warm
  const double one = time_compute(1);
  const double probe = time_compute(1 + kProbe);
  const double per_rep = std::max(1e-9, (probe - one) / kProbe);
  const int reps = std::max(
      1, static_cast<int>(std::lround(1 + (target_s - one) / per_rep)));
  const double alone = time_compute(reps);
  std::printf(
      "\n3. FLUSH OVERHEAD: %d epochs per run of compute + SaveEpoch into the "
      "local tier, flush on (shared_every=1) and off (shared_every=%d, only "
      "End() flushes, timed apart); epochs 2..%d counted\n"
      "  compute: x = 3 - x over 16 KiB blocks, %d times per block, then "
      "the modification: %.1f ms alone (target %.1f ms: %s)\n",
      c_.epochs, c_.epochs + 1, c_.epochs, reps, alone * 1000, target_s * 1000,
      c_.compute_ms >= 0 ? "--compute_ms" : "part 1's median flush");
  std::fflush(stdout);
  std::map<bool, std::vector<EpochRun>> runs;
  for (int run = 1; run <= c_.runs; ++run) {
    const bool on_first = run % 2 == 1;
    for (const bool on : {on_first, !on_first}) {
      JG_ASSIGN_OR_RETURN(EpochRun r, RunEpochs(on, reps));
      runs[on].push_back(std::move(r));
    }
    const EpochRun& on = runs[true].back();
    const EpochRun& off = runs[false].back();
    const double ratio = on.epoch_s.Median() / off.epoch_s.Median();
    s_["overhead ratio"].Add(ratio);
    auto describe = [](const EpochRun& r) {
      return absl::StrFormat(
          "epoch %.1f ms (compute %.1f, of it %.1f on the job thread's CPU; "
          "save %.1f, of it commit %.1f, %d of %d beside the previous "
          "flush); process cpu %.2f s; End() %.1f ms; shared log lists [%s]",
          r.epoch_s.Median() * 1000, r.compute_s.Median() * 1000,
          r.compute_cpu_s.Median() * 1000, r.save_s.Median() * 1000,
          r.commit_s.Median() * 1000, r.saves_beside_flush,
          static_cast<int>(r.save_s.values.size()), r.cpu_s, r.end_s * 1000,
          r.flushed);
    };
    std::printf("  run %d (%s first): %.3f\n    on:  %s\n    off: %s\n", run,
                on_first ? "on" : "off", ratio, describe(on).c_str(),
                describe(off).c_str());
    std::fflush(stdout);
  }
  for (const bool on : {true, false}) {
    Sample epoch, compute, compute_cpu, save, end;
    for (const EpochRun& r : runs[on]) {
      epoch.Add(r.epoch_s.Median());
      compute.Add(r.compute_s.Median());
      compute_cpu.Add(r.compute_cpu_s.Median());
      save.Add(r.save_s.Median());
      end.Add(r.end_s);
    }
    std::printf(
        "  flush %-3s medians over %d runs (range): epoch %s; compute %s "
        "(the job thread's CPU in it %s); blocking save %s; End() %s\n",
        on ? "on" : "off", c_.runs, Millis(epoch).c_str(),
        Millis(compute).c_str(), Millis(compute_cpu).c_str(),
        Figure(save).c_str(), Millis(end).c_str());
  }
  // What the flush costs in CPU: the process's CPU over the counted epochs,
  // on minus off, per epoch. On two cores the flush has a core to itself
  // only when nothing else wants it.
  Sample flush_cpu;
  for (int i = 0; i < c_.runs; ++i) {
    flush_cpu.Add((runs[true][i].cpu_s - runs[false][i].cpu_s) /
                  (c_.epochs - 1));
  }
  std::printf("  the flush's CPU per epoch (process cpu, on minus off): %s\n",
              Millis(flush_cpu).c_str());
  const double ratio = s_["overhead ratio"].Median();
  std::printf("  flush_epoch_overhead = %s (goal <= 1.05: %s)\n",
              Range(s_["overhead ratio"], "%.3f").c_str(),
              ratio <= 1.05 ? "met" : "NOT met");
  std::fflush(stdout);
  return RemovePath(overhead_local_);
}

}  // namespace bench
}  // namespace jobgraph

// tier_bench, part 1: the blocking save, and the raw writes beside it (see
// the comment that opens tier_bench.cc).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/tier_bench.h"

namespace jobgraph {
namespace bench {

// ---------------------------------------------------------------------------
// Part 1.

absl::Status TierBench::RawWrites() {
  const std::vector<absl::string_view> views = Views();
  struct Raw {
    const char* name;
    const std::string* path;
    bool direct;
  };
  for (const Raw& raw : {Raw{"raw shared cached", &raw_shared_, false},
                         Raw{"raw shared direct", &raw_shared_, true},
                         Raw{"raw local", &raw_local_, false}}) {
    // Deleting what reached the disk costs about as long as writing it: off
    // the clock.
    JG_RETURN_IF_ERROR(RemovePath(*raw.path));
    Settle();
    JG_ASSIGN_OR_RETURN(const double seconds,
                        RawWrite(*raw.path, views, raw.direct, staging_.get()));
    s_[raw.name].Add(seconds);
  }
  // The local file takes memory the saves need; the page-cache one stays
  // for the cold read of part 2.
  return RemovePath(raw_local_);
}

absl::Status TierBench::BlockingSaves() {
  std::printf(
      "\n1. BLOCKING SAVE: SaveEpoch (synchronous) until committed, after "
      "sync + %d ms; the flush of the local tier's epoch timed from the "
      "save's return until the shared commit log lists it\n",
      c_.settle_ms);
  JG_ASSIGN_OR_RETURN(only_, StartSaver(SharedOnlyOptions()));
  JG_ASSIGN_OR_RETURN(tiered_, StartSaver(TieredOptions()));
  // Epoch 0 of each, untimed: a process's first save maps its buffers.
  JG_RETURN_IF_ERROR(only_->SaveEpoch(session_, only_epoch_).status());
  JG_RETURN_IF_ERROR(tiered_->SaveEpoch(session_, tiered_epoch_).status());
  JG_RETURN_IF_ERROR(
      WaitUntilListed(tiered_dir_, tiered_epoch_, Clock::now()).status());
  std::fflush(stdout);

  auto save = [&](bool local) -> absl::Status {
    Modify();
    Settle();
    Checkpointer& saver = local ? *tiered_ : *only_;
    const int64_t epoch = local ? ++tiered_epoch_ : ++only_epoch_;
    const double cpu = CpuSeconds();
    const auto start = Clock::now();
    absl::StatusOr<CheckpointStats> saved = saver.SaveEpoch(session_, epoch);
    const auto returned = Clock::now();
    const double cpu_used = CpuSeconds() - cpu;
    JG_RETURN_IF_ERROR(saved.status());
    if (saved->in_background || saved->bytes < StateBytes()) {
      return absl::InternalError(
          absl::StrCat("epoch ", epoch, " saved ", saved->bytes, " bytes",
                       saved->in_background ? " in the background" : "",
                       "; expected ", StateBytes(), " synchronously"));
    }
    const std::string name = local ? "save local" : "save shared";
    s_[name].Add(std::chrono::duration<double>(returned - start).count());
    // What the save reports of itself: the database written, the commit.
    s_[name + " write"].Add(saved->write_micros / 1e6);
    s_[name + " commit"].Add(saved->commit_micros / 1e6);
    s_[name + " cpu"].Add(cpu_used);
    if (local) {
      // The polling thread mostly sleeps: the process's CPU meanwhile is
      // the flush's.
      const double flush_cpu = CpuSeconds();
      JG_ASSIGN_OR_RETURN(const double flush,
                          WaitUntilListed(tiered_dir_, epoch, returned));
      s_["flush"].Add(flush);
      s_["flush cpu"].Add(CpuSeconds() - flush_cpu);
    }
    return absl::OkStatus();
  };
  for (int run = 1; run <= c_.runs; ++run) {
    JG_RETURN_IF_ERROR(RawWrites());
    const bool shared_first = run % 2 == 1;
    JG_RETURN_IF_ERROR(save(!shared_first));
    JG_RETURN_IF_ERROR(save(shared_first));
    const double shared = s_["save shared"].values.back();
    const double local = s_["save local"].values.back();
    s_["blocking ratio"].Add(local / shared);
    std::printf(
        "  run %d (%s first): save shared %.1f ms, local %.1f ms (%.3f); "
        "flush behind the local one %.1f ms; raw write+fsync shared %.1f ms, "
        "O_DIRECT %.1f ms, local %.1f ms\n",
        run, shared_first ? "shared" : "local", shared * 1000, local * 1000,
        local / shared, s_["flush"].values.back() * 1000,
        s_["raw shared cached"].values.back() * 1000,
        s_["raw shared direct"].values.back() * 1000,
        s_["raw local"].values.back() * 1000);
    std::fflush(stdout);
  }
  flush_s_ = s_["flush"].Median();
  const double ratio = s_["blocking ratio"].Median();
  std::printf(
      "  medians over %d runs (range):\n"
      "    raw write+fsync, shared dir, page cache  %s\n"
      "    raw write+fsync, shared dir, O_DIRECT    %s\n"
      "    raw write+fsync, local dir               %s\n"
      "    save, shared directory only              %s\n"
      "      of it: write %s, commit %s; process cpu %s\n"
      "    save, local tier (shared_every=1)        %s\n"
      "      of it: write %s, commit %s; process cpu %s\n"
      "    its background flush to the shared dir   %s\n"
      "      of it: process cpu %s\n"
      "  local_blocking_vs_shared = %s (goal <= 0.2: %s)\n"
      "  (a save into the local tier writes the bytes at least once: the "
      "raw write to the local dir over the shared save, %.3f, is what the "
      "ratio could reach with a save as fast as that write)\n",
      c_.runs, Figure(s_["raw shared cached"]).c_str(),
      Figure(s_["raw shared direct"]).c_str(), Figure(s_["raw local"]).c_str(),
      Figure(s_["save shared"]).c_str(),
      Millis(s_["save shared write"]).c_str(),
      Millis(s_["save shared commit"]).c_str(),
      Millis(s_["save shared cpu"]).c_str(), Figure(s_["save local"]).c_str(),
      Millis(s_["save local write"]).c_str(),
      Millis(s_["save local commit"]).c_str(),
      Millis(s_["save local cpu"]).c_str(), Figure(s_["flush"]).c_str(),
      Millis(s_["flush cpu"]).c_str(),
      Range(s_["blocking ratio"], "%.3f").c_str(),
      ratio <= 0.2 ? "met" : "NOT met",
      s_["raw local"].Median() / s_["save shared"].Median());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace jobgraph

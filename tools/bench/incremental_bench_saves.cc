// incremental_bench: the saves, full and incremental, and the raw writes
// beside them (see the comment that opens incremental_bench.cc).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/incremental_bench.h"

namespace jobgraph {
namespace bench {
namespace {

// ---------------------------------------------------------------------------
// The environment, with errors as statuses.

absl::StatusOr<int64_t> BytesUnder(const std::string& path) {
  int64_t bytes = 0;
  JG_RETURN_IF_ERROR(ForEachFile(path, [&](const std::string&, int64_t size) {
    bytes += size;
    return absl::OkStatus();
  }));
  return bytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// Saves.

absl::Status IncrementalBench::StartSaves() {
  JG_RETURN_IF_ERROR(RemovePath(save_dir_));
  CheckpointOptions options;
  options.directory = save_dir_;
  options.incremental = true;
  options.full_every = c_.full_every;
  saver_ = std::make_unique<Checkpointer>(options);
  JG_ASSIGN_OR_RETURN(const std::optional<int64_t> resumed,
                      saver_->Start(session_, {kNode}, ResumeFrom::Scratch()));
  if (resumed.has_value()) {
    return absl::InternalError("a fresh checkpoint directory resumed");
  }
  JG_RETURN_IF_ERROR(saver_->CaptureBlobNames(session_));
  // Epoch 0, the chain's first base (untimed).
  epoch_ = 0;
  return saver_->SaveEpoch(session_, epoch_, /*full=*/true).status();
}

absl::Status IncrementalBench::TimeSave(const MemoryState& state,
                                        const std::string& name, bool full) {
  const int64_t epoch = ++epoch_;
  const double cpu = CpuSeconds();
  const int64_t wchar0 = IoBytes("wchar");
  const auto start = Clock::now();
  absl::StatusOr<CheckpointStats> saved =
      saver_->SaveEpoch(session_, epoch, full);
  const double seconds = Seconds(start);
  const int64_t wchar = IoBytes("wchar") - wchar0;
  const double cpu_used = CpuSeconds() - cpu;
  JG_RETURN_IF_ERROR(
      Annotate(saved.status(), absl::StrCat("saving epoch ", epoch)));
  Add(state, name, seconds);
  Add(state, name + " cpu", cpu_used);
  Add(state, name + " wchar", static_cast<double>(wchar));
  JG_ASSIGN_OR_RETURN(const int64_t db_bytes,
                      BytesUnder(CheckpointDbPath(save_dir_, kNode, epoch)));
  Add(state, name + " db", static_cast<double>(db_bytes));
  // The save's own account of its time: before the write (prepare,
  // snapshot, split), the database write, the commit.
  const double write = saved->write_micros / 1e6;
  const double commit = (saved->agree_micros + saved->commit_micros) / 1e6;
  Add(state, name + " write", write);
  Add(state, name + " commit", commit);
  Add(state, name + " before write", seconds - write - commit);
  return absl::OkStatus();
}

absl::Status IncrementalBench::TimeFullSave(const MemoryState& state) {
  // A full save needs none of the databases before it: they all go (off the
  // clock), as the previous full save's output does in checkpoint_bench.
  for (int64_t e = 0; e <= epoch_; ++e) {
    JG_RETURN_IF_ERROR(RemovePath(CheckpointDbPath(save_dir_, kNode, e)));
  }
  JG_RETURN_IF_ERROR(Settle(state));
  JG_RETURN_IF_ERROR(TimeSave(state, "full", /*full=*/true));
  // Every tensor is in it.
  JG_ASSIGN_OR_RETURN(const CommitLog log, ReadCommitLog(save_dir_));
  const CommittedEpoch& entry = log.epoch(log.epoch_size() - 1);
  if (entry.epoch() != epoch_ || entry.referenced_bytes() != 0) {
    return absl::InternalError(
        absl::StrCat("the full save of epoch ", epoch_, " references ",
                     entry.referenced_bytes(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status IncrementalBench::TimeIncrementalSave(const MemoryState& state,
                                                   int percent) {
  const int count = TensorsFor(percent, c_.tensors);
  modified_[percent] = {next_modified_, count};
  Modify(count, &next_modified_);
  JG_RETURN_IF_ERROR(Settle(state));
  JG_RETURN_IF_ERROR(
      TimeSave(state, absl::StrCat(percent, "%"), /*full=*/false));
  // Off the clock: the database holds the modified tensors and no other
  // (what the commit log says it wrote: its values, a few bytes of
  // serialization each, beyond the tensors' bytes).
  JG_ASSIGN_OR_RETURN(const CommitLog log, ReadCommitLog(save_dir_));
  const CommittedEpoch& entry = log.epoch(log.epoch_size() - 1);
  const int64_t held = entry.total_bytes() - entry.referenced_bytes();
  const int64_t expected = int64_t{count} * c_.tensor_bytes;
  if (entry.epoch() != epoch_ || held < expected ||
      held > expected + int64_t{count} * 4096) {
    return absl::InternalError(absl::StrCat(
        "the incremental save of epoch ", entry.epoch(), " holds ", held,
        " bytes itself; ", count, " modified tensors are ", expected));
  }
  Add(state, absl::StrCat(percent, "% referenced epochs"),
      entry.referenced_epoch_size());
  return absl::OkStatus();
}

absl::Status IncrementalBench::TimeRaw(
    const MemoryState& state, const std::string& name,
    const std::vector<absl::string_view>& pieces, bool direct) {
  JG_RETURN_IF_ERROR(RemovePath(raw_path_));
  JG_RETURN_IF_ERROR(Settle(state));
  JG_ASSIGN_OR_RETURN(const double seconds,
                      RawWrite(raw_path_, pieces, direct, staging_.get()));
  Add(state, name, seconds);
  return absl::OkStatus();
}

absl::Status IncrementalBench::SaveRun(int run) {
  const bool full_first = run % 2 == 0;
  for (size_t i = 0; i < c_.states.size(); ++i) {
    // The states take turns going first too.
    const MemoryState& state =
        c_.states[(i + static_cast<size_t>(run)) % c_.states.size()];
    if (full_first) JG_RETURN_IF_ERROR(TimeFullSave(state));
    for (int percent : c_.percents) {
      JG_RETURN_IF_ERROR(TimeIncrementalSave(state, percent));
    }
    if (!full_first) JG_RETURN_IF_ERROR(TimeFullSave(state));
    // The raw writes of the same bytes, page cache and O_DIRECT taking
    // turns going first.
    for (int turn = 0; turn < 2; ++turn) {
      const bool direct = (turn == 0) == (run % 2 == 0);
      const std::string how = direct ? "raw direct" : "raw cached";
      JG_RETURN_IF_ERROR(
          TimeRaw(state, how + " full", Views(0, c_.tensors), direct));
      for (int percent : c_.percents) {
        if (!HasRaw(percent)) continue;
        const auto [first, count] = modified_.at(percent);
        JG_RETURN_IF_ERROR(TimeRaw(state, absl::StrCat(how, " ", percent, "%"),
                                   Views(first, count), direct));
      }
    }
    if (record_) {
      std::string line = absl::StrFormat(
          "  run %d, %s (full save %s): full %.3f s", run, state.name,
          full_first ? "first" : "last", Get(state, "full").values.back());
      for (int percent : c_.percents) {
        const std::string p = absl::StrCat(percent, "%");
        absl::StrAppendFormat(
            &line, ", %s %.3f s (%.3fx)", p, Get(state, p).values.back(),
            Get(state, p).values.back() / Get(state, "full").values.back());
      }
      absl::StrAppendFormat(&line, "; raw cached %.3f s, direct %.3f s\n",
                            Get(state, "raw cached full").values.back(),
                            Get(state, "raw direct full").values.back());
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

void IncrementalBench::ReportSaves(const MemoryState& state) const {
  const double total = TotalBytes();
  auto rate = [&](const std::string& name, double bytes) {
    return absl::StrFormat("%5.0f MB/s",
                           bytes / 1e6 / Get(state, name).Median());
  };
  std::printf("\n  SAVES, state %s, medians (range) over %d runs:\n",
              state.name.c_str(), c_.runs);
  std::printf("    raw write+fsync, page cache  %s  %s  %s\n",
              Mb(total).c_str(), rate("raw cached full", total).c_str(),
              Secs(state, "raw cached full").c_str());
  std::printf("    raw write+fsync, O_DIRECT    %s  %s  %s\n",
              Mb(total).c_str(), rate("raw direct full", total).c_str(),
              Secs(state, "raw direct full").c_str());
  std::printf(
      "    full save                    %s  %s  %s; save/raw: page cache "
      "%s, O_DIRECT %s\n",
      Mb(Get(state, "full db").Median()).c_str(), rate("full", total).c_str(),
      Secs(state, "full").c_str(),
      RatioText(state, "full", "raw cached full").c_str(),
      RatioText(state, "full", "raw direct full").c_str());
  std::printf(
      "      wrote %s (wchar); before the write %s, write %s, commit %s; "
      "cpu %s\n",
      Mb(Get(state, "full wchar").Median()).c_str(),
      Secs(state, "full before write").c_str(),
      Secs(state, "full write").c_str(), Secs(state, "full commit").c_str(),
      Secs(state, "full cpu").c_str());
  for (int percent : c_.percents) {
    const std::string p = absl::StrCat(percent, "%");
    const int count = TensorsFor(percent, c_.tensors);
    const double bytes = static_cast<double>(count) * c_.tensor_bytes;
    std::printf("    %3d%% incremental (%d tensors, %s)\n", percent, count,
                Mb(bytes).c_str());
    std::printf(
        "      bytes: wrote %s (wchar), database %s; vs full: wchar %s, "
        "database %s\n",
        Mb(Get(state, p + " wchar").Median()).c_str(),
        Mb(Get(state, p + " db").Median()).c_str(),
        RatioText(state, p + " wchar", "full wchar").c_str(),
        RatioText(state, p + " db", "full db").c_str());
    std::printf("      time:  %s = %s; vs full %s\n", Secs(state, p).c_str(),
                rate(p, bytes).c_str(), RatioText(state, p, "full").c_str());
    std::printf(
        "      before the write %s, write %s, commit %s; cpu %s; references "
        "%.0f epochs\n",
        Secs(state, p + " before write").c_str(),
        Secs(state, p + " write").c_str(), Secs(state, p + " commit").c_str(),
        Secs(state, p + " cpu").c_str(),
        Get(state, p + " referenced epochs").Median());
    if (!HasRaw(percent)) continue;
    std::printf(
        "      raw write+fsync of its tensors: page cache %s, save/raw %s; "
        "O_DIRECT %s, save/raw %s\n",
        Secs(state, "raw cached " + p).c_str(),
        RatioText(state, p, "raw cached " + p).c_str(),
        Secs(state, "raw direct " + p).c_str(),
        RatioText(state, p, "raw direct " + p).c_str());
  }
  std::fflush(stdout);
}

}  // namespace bench
}  // namespace jobgraph

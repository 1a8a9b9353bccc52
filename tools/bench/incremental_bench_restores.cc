// incremental_bench: the restores of an epoch deep in increments and of a
// full save (see the comment that opens incremental_bench.cc).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/incremental_bench.h"

namespace jobgraph {
namespace bench {
namespace {

constexpr size_t kRawChunk = size_t{4} << 20;  // 4 MiB read()s

// ---------------------------------------------------------------------------
// The environment, with errors as statuses.

// Drops the (clean) page-cache pages of every file under `path`.
absl::Status EvictFromPageCache(const std::string& path) {
  ::sync();
  return ForEachFile(path, [](const std::string& file, int64_t) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", file);
    const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (err != 0) {
      errno = err;
      return ErrnoStatus("posix_fadvise(DONTNEED)", file);
    }
    return absl::OkStatus();
  });
}

// Reads every file under `path` once, so that it is in the page cache.
absl::Status WarmPageCache(const std::string& path) {
  std::vector<char> buffer(kRawChunk);
  return ForEachFile(path, [&](const std::string& file, int64_t) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", file);
    ssize_t n;
    while ((n = ::read(fd, buffer.data(), buffer.size())) > 0) {
    }
    ::close(fd);
    if (n < 0) return ErrnoStatus("read", file);
    return absl::OkStatus();
  });
}

}  // namespace

// ---------------------------------------------------------------------------
// Restores.

absl::Status IncrementalBench::BuildChain() {
  JG_RETURN_IF_ERROR(RemovePath(restore_dir_));
  CheckpointOptions options;
  options.directory = restore_dir_;
  options.incremental = true;
  options.full_every = c_.chain + 1;
  Checkpointer chain(options);
  JG_RETURN_IF_ERROR(
      chain.Start(session_, {kNode}, ResumeFrom::Scratch()).status());
  JG_RETURN_IF_ERROR(chain.CaptureBlobNames(session_));
  JG_RETURN_IF_ERROR(chain.SaveEpoch(session_, 0).status());
  const int count = TensorsFor(c_.chain_percent, c_.tensors);
  int next = 0;  // disjoint tensors from epoch to epoch
  for (int e = 1; e <= c_.chain; ++e) {
    Modify(count, &next);
    JG_RETURN_IF_ERROR(chain.SaveEpoch(session_, e).status());
  }
  JG_RETURN_IF_ERROR(
      chain.SaveEpoch(session_, c_.chain + 1, /*full=*/true).status());
  chain.End();
  // Epoch `chain` refers to every epoch before it (when the modified
  // tensors are disjoint); epoch chain + 1 stands alone.
  JG_ASSIGN_OR_RETURN(const CommitLog log, ReadCommitLog(restore_dir_));
  const CommittedEpoch* deep = nullptr;
  const CommittedEpoch* full = nullptr;
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.epoch() == c_.chain) deep = &e;
    if (e.epoch() == c_.chain + 1) full = &e;
  }
  if (deep == nullptr || full == nullptr || full->referenced_bytes() != 0 ||
      (count * c_.chain <= c_.tensors &&
       deep->referenced_epoch_size() != c_.chain)) {
    return absl::InternalError(absl::StrCat(
        "the restore chain is not as built: ", log.ShortDebugString()));
  }
  std::printf(
      "\nRESTORE: epoch %d references epochs [%s] (%s of its %s held there, "
      "%s in its own database); epoch %d is a full save of the same "
      "workspace (%s)\n",
      c_.chain, absl::StrJoin(deep->referenced_epoch(), ",").c_str(),
      Mb(deep->referenced_bytes()).c_str(), Mb(deep->total_bytes()).c_str(),
      Mb(deep->total_bytes() - deep->referenced_bytes()).c_str(), c_.chain + 1,
      Mb(full->total_bytes()).c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status IncrementalBench::TimeRestore(const MemoryState& state,
                                           int64_t epoch,
                                           const std::string& name, bool warm) {
  if (warm) {
    JG_RETURN_IF_ERROR(WarmPageCache(restore_dir_));
  } else {
    JG_RETURN_IF_ERROR(EvictFromPageCache(restore_dir_));
  }
  CheckpointOptions options;
  options.directory = restore_dir_;
  options.incremental = true;
  options.full_every = c_.chain + 1;
  auto session = std::make_unique<LocalSession>();
  auto checkpointer = std::make_unique<Checkpointer>(options);
  JG_RETURN_IF_ERROR(Settle(state));
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  absl::StatusOr<std::optional<int64_t>> chosen =
      checkpointer->Start(*session, {kNode}, ResumeFrom::Epoch(epoch));
  const double started = Seconds(start);
  absl::StatusOr<CheckpointStats> restored =
      chosen.ok() ? checkpointer->Restore(*session, epoch)
                  : absl::StatusOr<CheckpointStats>(chosen.status());
  const double seconds = Seconds(start);
  const double cpu_used = CpuSeconds() - cpu;
  JG_RETURN_IF_ERROR(
      Annotate(restored.status(), absl::StrCat("restoring epoch ", epoch)));
  if (*chosen != epoch) {
    return absl::InternalError(
        absl::StrCat("asked to resume from epoch ", epoch, ", Start chose ",
                     chosen->has_value() ? absl::StrCat(**chosen) : "none"));
  }
  const std::string key = absl::StrCat(name, warm ? " warm" : " cold");
  Add(state, key, seconds);
  Add(state, key + " start", started);
  Add(state, key + " cpu", cpu_used);
  // Off the clock: every tensor as the workspace holds it.
  Workspace* restored_ws = session->NodeWorkspace(kNode);
  for (size_t i = 0; i < names_.size(); ++i) {
    JG_ASSIGN_OR_RETURN(const Tensor* t, restored_ws->GetTensor(names_[i]));
    if (!t->BitwiseEquals(*tensors_[i])) {
      return absl::DataLossError(absl::StrCat("restored tensor ", names_[i],
                                              " of epoch ", epoch,
                                              " differs from the original"));
    }
  }
  checkpointer->End();
  checkpointer.reset();
  session.reset();  // frees the restored tensors off the clock
  return absl::OkStatus();
}

absl::Status IncrementalBench::RestoreRun(int run) {
  for (size_t i = 0; i < c_.states.size(); ++i) {
    const MemoryState& state =
        c_.states[(i + static_cast<size_t>(run)) % c_.states.size()];
    for (bool warm : {false, true}) {
      if (warm ? !c_.restore_warm : !c_.restore_cold) continue;
      const std::string cache = warm ? "warm" : "cold";
      for (int pair = 0; pair < c_.restore_pairs; ++pair) {
        const bool deep_first = (run + pair) % 2 == 0;
        for (int turn = 0; turn < 2; ++turn) {
          if ((turn == 0) == deep_first) {
            JG_RETURN_IF_ERROR(TimeRestore(state, c_.chain, "deep", warm));
          } else {
            JG_RETURN_IF_ERROR(TimeRestore(state, c_.chain + 1, "full", warm));
          }
        }
        if (!record_) continue;
        const double deep = Get(state, "deep " + cache).values.back();
        const double full = Get(state, "full " + cache).values.back();
        std::printf(
            "  run %d, %s, %s page cache (%s first): %d increments deep "
            "%.3f s, full %.3f s (%.3fx)\n",
            run, state.name.c_str(), cache.c_str(),
            deep_first ? "deep" : "full", c_.chain, deep, full, deep / full);
        std::fflush(stdout);
      }
    }
  }
  return absl::OkStatus();
}

void IncrementalBench::ReportRestores(const MemoryState& state) const {
  for (const char* cache : {"cold", "warm"}) {
    const std::string deep = absl::StrCat("deep ", cache);
    const std::string full = absl::StrCat("full ", cache);
    if (!Has(state, deep)) continue;
    std::printf(
        "\n  RESTORE, state %s, %s page cache, medians (range) over %d "
        "runs x %d pairs:\n",
        state.name.c_str(), cache, c_.runs, c_.restore_pairs);
    std::printf(
        "    epoch %d (%d increments deep)  %s = %5.0f MB/s; Start (the "
        "load) %s; cpu %s\n",
        c_.chain, c_.chain, Secs(state, deep).c_str(),
        TotalBytes() / 1e6 / Get(state, deep).Median(),
        Secs(state, deep + " start").c_str(),
        Secs(state, deep + " cpu").c_str());
    std::printf(
        "    epoch %d (full save)          %s = %5.0f MB/s; Start (the "
        "load) %s; cpu %s\n",
        c_.chain + 1, Secs(state, full).c_str(),
        TotalBytes() / 1e6 / Get(state, full).Median(),
        Secs(state, full + " start").c_str(),
        Secs(state, full + " cpu").c_str());
    std::printf("    deep vs full %s\n", RatioText(state, deep, full).c_str());
  }
  std::fflush(stdout);
}

}  // namespace bench
}  // namespace jobgraph

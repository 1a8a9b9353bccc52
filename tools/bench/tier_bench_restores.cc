// tier_bench, part 2: the restore from the local tier and from the shared
// directory with a cold page cache (see the comment that opens
// tier_bench.cc).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
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
#include "checkpoint/resume_from.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/storage_pool.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/tier_bench.h"

namespace jobgraph {
namespace bench {
namespace {

constexpr size_t kIoChunk = size_t{4} << 20;  // raw read()s

}  // namespace

// ---------------------------------------------------------------------------
// The environment, with errors as statuses (so that the directories are
// removed whatever fails).

// Makes the next read of `path` (a file or a directory) come from the disk:
// fsync and posix_fadvise(DONTNEED) of every file under it (DONTNEED drops
// only clean pages, hence the fsync: the flush writes through the page
// cache), and as root also drop_caches, which evicts what fadvise may miss
// (metadata, the directories).
absl::StatusOr<Eviction> EvictFromPageCache(const std::string& path) {
  Eviction eviction;
  JG_RETURN_IF_ERROR(
      ForEachFile(path, [&](const std::string& file, int64_t size) {
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return ErrnoStatus("open", file);
        if (::fsync(fd) != 0) {
          const absl::Status status = ErrnoStatus("fsync", file);
          ::close(fd);
          return status;
        }
        const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
        if (err != 0) {
          errno = err;
          return ErrnoStatus("posix_fadvise(DONTNEED)", file);
        }
        ++eviction.files;
        eviction.bytes += size;
        return absl::OkStatus();
      }));
  if (::geteuid() == 0) {
    eviction.tried_drop_caches = true;
    eviction.dropped_caches = DropCaches();  // syncs first
  }
  return eviction;
}

std::string DescribeEviction(const Eviction& e) {
  return absl::StrFormat(
      "fsync + posix_fadvise(DONTNEED) of %d files (%.1f MB); "
      "drop_caches %s",
      e.files, e.bytes / 1e6,
      e.dropped_caches      ? "written (root)"
      : e.tried_drop_caches ? "FAILED (root, but /proc/sys/vm/drop_caches "
                              "refused the write)"
                            : "not done (not root)");
}

// A limit of 0 frees every pooled buffer; the old limit then holds again.
void EmptyStoragePool() {
  StoragePool& pool = StoragePool::Global();
  const size_t limit = pool.limit_bytes();
  pool.set_limit_bytes(0);
  pool.set_limit_bytes(limit);
}

namespace {

// Reads the file at `path` with 4 MiB read()s into `buffer` (already
// touched, so only the read is timed). Returns the seconds and the bytes.
absl::StatusOr<std::pair<double, int64_t>> RawRead(const std::string& path,
                                                   std::vector<char>* buffer) {
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", path);
  int64_t bytes = 0;
  ssize_t n;
  while ((n = ::read(fd, buffer->data(), buffer->size())) > 0) bytes += n;
  const int read_errno = errno;
  ::close(fd);
  if (n < 0) {
    errno = read_errno;
    return ErrnoStatus("read", path);
  }
  return std::make_pair(Seconds(start), bytes);
}

}  // namespace

// ---------------------------------------------------------------------------
// Part 2.

absl::StatusOr<double> TierBench::TimeRestore(int64_t epoch,
                                              const std::string& expected_dir) {
  EmptyStoragePool();
  auto session = std::make_unique<LocalSession>();
  auto checkpointer = std::make_unique<Checkpointer>(TieredOptions());
  const auto start = Clock::now();
  absl::StatusOr<std::optional<int64_t>> chosen =
      checkpointer->Start(*session, {kNode}, ResumeFrom::Latest());
  absl::StatusOr<CheckpointStats> restored =
      !chosen.ok() ? absl::StatusOr<CheckpointStats>(chosen.status())
      : !chosen->has_value()
          ? absl::StatusOr<CheckpointStats>(
                absl::NotFoundError("Start found no epoch to resume from"))
          : checkpointer->Restore(*session, **chosen);
  const double seconds = Seconds(start);
  JG_RETURN_IF_ERROR(Annotate(restored.status(), "restoring"));
  if (**chosen != epoch || restored->read_from != expected_dir) {
    return absl::InternalError(absl::StrCat(
        "the resume chose epoch ", **chosen, " of ", restored->read_from,
        "; expected epoch ", epoch, " of ", expected_dir));
  }
  JG_RETURN_IF_ERROR(CheckRestored(*session));  // off the clock
  checkpointer->End();
  checkpointer.reset();
  session.reset();  // frees the restored tensors off the clock
  return seconds;
}

absl::Status TierBench::Restores() {
  // One more epoch, flushed, so that both tiers hold the workspace as it
  // is now.
  const int64_t epoch = ++tiered_epoch_;
  JG_RETURN_IF_ERROR(tiered_->SaveEpoch(session_, epoch).status());
  JG_RETURN_IF_ERROR(
      WaitUntilListed(tiered_dir_, epoch, Clock::now()).status());
  tiered_->End();
  only_->End();
  tiered_.reset();
  only_.reset();
  std::printf(
      "\n2. RESTORE of epoch %lld: Start(latest) + Restore in a fresh "
      "session and Checkpointer, into fresh memory, after sync + %d ms\n",
      static_cast<long long>(epoch), c_.settle_ms);
  // Untimed: the process's first restore starts its load threads.
  JG_RETURN_IF_ERROR(TimeRestore(epoch, tier_dir_).status());
  std::vector<char> buffer(kIoChunk);
  std::string eviction_text;
  for (int run = 1; run <= c_.runs; ++run) {
    const bool local_first = run % 2 == 1;
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == local_first) {
        Settle();
        JG_ASSIGN_OR_RETURN(const double seconds,
                            TimeRestore(epoch, tier_dir_));
        s_["restore local"].Add(seconds);
        continue;
      }
      // A job resumed on another node: no local tier. Moved aside and back
      // (a rename in the tmpfs), since the next local restore needs it.
      if (::rename(tier_dir_.c_str(), aside_dir_.c_str()) != 0) {
        return ErrnoStatus("rename to " + aside_dir_, tier_dir_);
      }
      Settle();
      JG_ASSIGN_OR_RETURN(const Eviction eviction,
                          EvictFromPageCache(tiered_dir_));
      eviction_text = DescribeEviction(eviction);
      JG_ASSIGN_OR_RETURN(const double seconds,
                          TimeRestore(epoch, tiered_dir_));
      s_["restore shared cold"].Add(seconds);
      // The restore made an empty local tier (its commit log and locks).
      JG_RETURN_IF_ERROR(RemovePath(tier_dir_));
      if (::rename(aside_dir_.c_str(), tier_dir_.c_str()) != 0) {
        return ErrnoStatus("rename to " + tier_dir_, aside_dir_);
      }
    }
    // The disk's cold read of the same bytes.
    Settle();
    JG_RETURN_IF_ERROR(EvictFromPageCache(raw_shared_).status());
    JG_ASSIGN_OR_RETURN(const auto read, RawRead(raw_shared_, &buffer));
    if (read.second != static_cast<int64_t>(StateBytes())) {
      return absl::InternalError(
          absl::StrCat(raw_shared_, ": read ", read.second, " bytes"));
    }
    s_["raw cold read"].Add(read.first);
    const double local = s_["restore local"].values.back();
    const double shared = s_["restore shared cold"].values.back();
    s_["restore ratio"].Add(local / shared);
    std::printf(
        "  run %d (%s first): local %.1f ms, shared cold %.1f ms (%.3f); raw "
        "cold read %.1f ms\n",
        run, local_first ? "local" : "shared", local * 1000, shared * 1000,
        local / shared, read.first * 1000);
    std::fflush(stdout);
  }
  std::printf(
      "  shared cold page cache, each time: %s\n"
      "  medians over %d runs (range):\n"
      "    raw cold read of the same bytes, shared dir  %s\n"
      "    restore from the local tier                  %s\n"
      "    restore from the shared directory, cold      %s\n"
      "  local_restore_vs_shared = %s (no goal set)\n",
      eviction_text.c_str(), c_.runs, Figure(s_["raw cold read"]).c_str(),
      Figure(s_["restore local"]).c_str(),
      Figure(s_["restore shared cold"]).c_str(),
      Range(s_["restore ratio"], "%.3f").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status TierBench::RemoveSaveFiles() {
  for (const std::string& path :
       {only_dir_, tiered_dir_, tier_dir_, raw_shared_}) {
    JG_RETURN_IF_ERROR(RemovePath(path));
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace jobgraph

// tier_bench, part 3: what the background flush of the local tier costs an
// epoch of CPU-bound compute (see the comment that opens tier_bench.cc).

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
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
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
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

// The raw copy (RunEpochs' Flush::kRawCopy): the least any flush of an
// epoch does, read the database's files from the local tier and write them
// durably to the disk; no checksum, no temporary name, no commit log.

// The raw copy's reads and writes: the size of staging_ (NewStagingBuffer),
// which it copies through.
constexpr size_t kCopyChunk = size_t{4} << 20;
// O_DIRECT's alignment of memory, offsets and sizes (staging_ is aligned so).
constexpr size_t kDirectAlign = 4096;

// Reads `fd` into `buffer` until it holds `size` bytes or the file ends.
// Returns the bytes read: fewer than `size` only at the end.
absl::StatusOr<size_t> ReadUpTo(int fd, char* buffer, size_t size,
                                const std::string& path) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, buffer + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

// Clears O_DIRECT on `fd`, so that what follows may be unaligned.
absl::Status ClearDirect(int fd, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
    return ErrnoStatus("fcntl to clear O_DIRECT on", path);
  }
  return absl::OkStatus();
}

// Writes `size` bytes of `data` to `fd`. A short write with O_DIRECT
// (`*direct`) may leave the rest unaligned, so O_DIRECT is cleared for it.
absl::Status WriteAll(int fd, const char* data, size_t size, bool* direct,
                      const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("write", path);
    data += n;
    size -= static_cast<size_t>(n);
    if (size > 0 && *direct) {
      JG_RETURN_IF_ERROR(ClearDirect(fd, path));
      *direct = false;
    }
  }
  return absl::OkStatus();
}

// Copies the file `from` to a new file `to` through `buffer` (kCopyChunk
// bytes, aligned for O_DIRECT): read(2), write(2) with O_DIRECT where the
// file system takes it (the flush writes so: no page cache to fill and
// write back), the unaligned tail without it, then fsync. With `crc`, each
// chunk read is checksummed into it (CRC-32C), as a flush checks what it
// copies.
absl::Status RawCopyFile(const std::string& from, const std::string& to,
                         char* buffer, uint32_t* crc) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoStatus("open", from);
  // O_TRUNC, not O_EXCL: an open that fails for O_DIRECT may have created
  // the file already.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  bool direct = true;
  int out = ::open(to.c_str(), kFlags | O_DIRECT, 0644);
  if (out < 0 && errno == EINVAL) {  // a file system without O_DIRECT
    direct = false;
    out = ::open(to.c_str(), kFlags, 0644);
  }
  if (out < 0) {
    const absl::Status status = ErrnoStatus("open", to);
    ::close(in);
    return status;
  }
  absl::Status status;
  while (status.ok()) {
    absl::StatusOr<size_t> got = ReadUpTo(in, buffer, kCopyChunk, from);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (*got == 0) break;
    if (crc != nullptr) *crc = crc32c::Extend(*crc, buffer, *got);
    // Only the file's last chunk can be short, so whatever is cut off
    // here is its tail, and the writes before it stayed aligned.
    const size_t aligned = direct ? *got / kDirectAlign * kDirectAlign : *got;
    status = WriteAll(out, buffer, aligned, &direct, to);
    if (status.ok() && aligned < *got) {
      if (direct) status = ClearDirect(out, to);
      direct = false;
      if (status.ok()) {
        status = WriteAll(out, buffer + aligned, *got - aligned, &direct, to);
      }
    }
    if (*got < kCopyChunk) break;
  }
  if (status.ok() && ::fsync(out) != 0) status = ErrnoStatus("fsync", to);
  if (::close(out) != 0 && status.ok()) status = ErrnoStatus("close", to);
  ::close(in);
  return status;
}

// Copies the directory `from` (a database) to a new directory `to`, file
// by file (RawCopyFile), then fsyncs `to`: without that the copies' names
// would not be durable, which no flush can skip.
absl::Status RawCopyTree(const std::string& from, const std::string& to,
                         char* buffer, uint32_t* crc) {
  JG_RETURN_IF_ERROR(CreateDir(to));
  JG_ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(from));
  for (const std::string& name : names) {
    const std::string source = JoinPath(from, name);
    struct stat st;
    if (::lstat(source.c_str(), &st) != 0) return ErrnoStatus("stat", source);
    if (S_ISDIR(st.st_mode)) {
      JG_RETURN_IF_ERROR(RawCopyTree(source, JoinPath(to, name), buffer, crc));
    } else if (S_ISREG(st.st_mode)) {
      JG_RETURN_IF_ERROR(RawCopyFile(source, JoinPath(to, name), buffer, crc));
    }
  }
  return FsyncDir(to);
}

// One raw copy of an epoch's database (RawCopyTree) on a thread of its own,
// as the flush copies on its own thread, with a CRC-32C of every byte when
// `checksum`. The destructor waits for it, so that a failing run never
// leaves it reading a directory being removed.
class RawCopy {
 public:
  RawCopy(std::string from, std::string to, char* buffer, bool checksum)
      : from_(std::move(from)),
        to_(std::move(to)),
        buffer_(buffer),
        checksum_(checksum),
        thread_([this] {
          const auto start = Clock::now();
          status_ =
              RawCopyTree(from_, to_, buffer_, checksum_ ? &crc_ : nullptr);
          seconds_ = Seconds(start);
          done_.store(true, std::memory_order_release);
        }) {}
  RawCopy(const RawCopy&) = delete;
  RawCopy& operator=(const RawCopy&) = delete;
  ~RawCopy() {
    if (thread_.joinable()) thread_.join();
  }

  // Whether the copy has ended (a wait would return at once).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits for the copy. Its outcome, naming `from` and `to` if it failed.
  absl::Status Wait() {
    if (thread_.joinable()) thread_.join();
    return Annotate(status_, absl::StrCat("raw copy of ", from_, " to ", to_));
  }
  // The copy's seconds, once Wait() returned.
  double seconds() const { return seconds_; }

 private:
  const std::string from_, to_;
  char* const buffer_;
  const bool checksum_;
  uint32_t crc_ = 0;  // the copy's CRC-32C, when `checksum` (never read)
  absl::Status status_;
  double seconds_ = 0;
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: it starts once the fields above are set
};

}  // namespace

// ---------------------------------------------------------------------------
// Part 3.

absl::StatusOr<TierBench::EpochRun> TierBench::RunEpochs(Flush flush,
                                                         int reps) {
  JG_RETURN_IF_ERROR(RemovePath(overhead_shared_));
  JG_RETURN_IF_ERROR(RemovePath(overhead_local_));
  JG_RETURN_IF_ERROR(RemovePath(overhead_raw_));
  const bool raw_copy =
      flush == Flush::kRawCopy || flush == Flush::kCheckedCopy;
  if (raw_copy) JG_RETURN_IF_ERROR(CreateDir(overhead_raw_));
  Settle();
  CheckpointOptions options;
  options.directory = overhead_shared_;
  options.local_directory = overhead_local_;
  options.shared_every = flush == Flush::kOn ? 1 : c_.epochs + 1;
  JG_ASSIGN_OR_RETURN(std::unique_ptr<Checkpointer> saver, StartSaver(options));
  // After `saver`, so that it is waited for before the Checkpointer ends.
  std::unique_ptr<RawCopy> copy;
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
    if (flush == Flush::kOn && epoch > 1) {
      absl::StatusOr<CommitLog> log = ReadCommitLog(overhead_shared_);
      beside_flush =
          !log.ok() || FindCommittedEpoch(*log, epoch - 1, {kNode}) == nullptr;
    }
    // The previous epoch's raw copy ends before this save, so that at most
    // one copy runs, as one flush does. The wait is off the clock: a flush
    // does not hold the save up (it runs beside it), so an epoch that
    // counted the wait would not be a floor. It is counted and printed.
    if (copy != nullptr) {
      beside_flush = !copy->done();
      const auto wait_start = Clock::now();
      JG_RETURN_IF_ERROR(copy->Wait());
      run.wait_s.Add(Seconds(wait_start));
      run.copy_s.Add(copy->seconds());
      copy.reset();
    }
    const auto save_start = Clock::now();
    absl::StatusOr<CheckpointStats> saved = saver->SaveEpoch(session_, epoch);
    const double save_s = Seconds(save_start);
    JG_RETURN_IF_ERROR(saved.status());
    if (raw_copy) {
      // The epoch's database in the local tier, named as
      // CheckpointDbPath (checkpoint/commit/checkpoint_paths.h) names it;
      // its copy goes to a fresh directory beside the shared one, on the
      // same disk.
      const std::string name = absl::StrCat(kNode, ".", epoch);
      copy = std::make_unique<RawCopy>(
          JoinPath(overhead_local_, name), JoinPath(overhead_raw_, name),
          staging_.get(), flush == Flush::kCheckedCopy);
    }
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
  // The last epoch's raw copy is waited for here, as End() waits for the
  // last epoch's flush with the flush on.
  if (copy != nullptr) {
    JG_RETURN_IF_ERROR(copy->Wait());
    run.copy_s.Add(copy->seconds());
    copy.reset();
  }
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
      "local tier, flush on (shared_every=1), off (shared_every=%d, only "
      "End() flushes, timed apart) and raw copy (off, and the bench copies "
      "each saved epoch's files to the disk behind the next compute: "
      "read(2), O_DIRECT write(2), fsync), and that copy with a CRC-32C of "
      "what it copies, as a flush must; epochs 2..%d counted\n"
      "  compute: x = 3 - x over 16 KiB blocks, %d times per block, then "
      "the modification: %.1f ms alone (target %.1f ms: %s)\n",
      c_.epochs, c_.epochs + 1, c_.epochs, reps, alone * 1000, target_s * 1000,
      c_.compute_ms >= 0 ? "--compute_ms" : "part 1's median flush");
  std::fflush(stdout);
  constexpr Flush kSettings[] = {Flush::kOn, Flush::kOff, Flush::kRawCopy,
                                 Flush::kCheckedCopy};
  constexpr int kCount = sizeof(kSettings) / sizeof(kSettings[0]);
  auto name = [](Flush flush) {
    switch (flush) {
      case Flush::kOn:
        return "on";
      case Flush::kOff:
        return "off";
      case Flush::kRawCopy:
        return "raw copy";
      case Flush::kCheckedCopy:
        return "raw + crc";
    }
    return "?";
  };
  // A run is steady when the machine ran the compute at the speed it was
  // calibrated at: no setting's compute took less of the job thread's CPU
  // than kSteady times the compute alone (nothing makes it faster but the
  // host), and the setting without a flush not more than 1 / kSteady times
  // (nothing runs beside its compute). On these VMs the host sometimes runs
  // the same work at twice the speed for a while; a ratio across such a
  // change says nothing about the flush, so it is printed and left out.
  constexpr double kSteady = 0.85;
  auto steady = [&](const EpochRun& on, const EpochRun& off,
                    const EpochRun& raw, const EpochRun& checked) {
    const double least =
        std::min({on.compute_cpu_s.Median(), off.compute_cpu_s.Median(),
                  raw.compute_cpu_s.Median(), checked.compute_cpu_s.Median()});
    return least >= kSteady * alone &&
           off.compute_cpu_s.Median() <= alone / kSteady;
  };
  std::map<Flush, std::vector<EpochRun>> runs;
  std::vector<bool> steady_runs;
  for (int run = 1; run <= c_.runs; ++run) {
    // Each setting goes first in turn.
    const int first = (run - 1) % kCount;
    for (int k = 0; k < kCount; ++k) {
      const Flush flush = kSettings[(first + k) % kCount];
      JG_ASSIGN_OR_RETURN(EpochRun r, RunEpochs(flush, reps));
      runs[flush].push_back(std::move(r));
    }
    const EpochRun& on = runs[Flush::kOn].back();
    const EpochRun& off = runs[Flush::kOff].back();
    const EpochRun& raw = runs[Flush::kRawCopy].back();
    const EpochRun& checked = runs[Flush::kCheckedCopy].back();
    const double ratio = on.epoch_s.Median() / off.epoch_s.Median();
    steady_runs.push_back(steady(on, off, raw, checked));
    auto describe = [](const EpochRun& r, const char* beside) {
      return absl::StrFormat(
          "epoch %.1f ms (compute %.1f, of it %.1f on the job thread's CPU; "
          "save %.1f, of it commit %.1f, %d of %d %s); process cpu %.2f s; "
          "End() %.1f ms; shared log lists [%s]",
          r.epoch_s.Median() * 1000, r.compute_s.Median() * 1000,
          r.compute_cpu_s.Median() * 1000, r.save_s.Median() * 1000,
          r.commit_s.Median() * 1000, r.saves_beside_flush,
          static_cast<int>(r.save_s.values.size()), beside, r.cpu_s,
          r.end_s * 1000, r.flushed);
    };
    auto copied = [&](const EpochRun& r) {
      return absl::StrCat(describe(r, "after a copy still running"), "; copy ",
                          Millis(r.copy_s),
                          ", the wait for it before a save (off the clock) ",
                          Millis(r.wait_s));
    };
    std::printf(
        "  run %d (%s first): %.3f; raw copy / off %.3f; raw + crc / off "
        "%.3f%s\n    on:  %s\n    off: %s\n    raw: %s\n    raw + crc: %s\n",
        run, name(kSettings[first]), ratio,
        raw.epoch_s.Median() / off.epoch_s.Median(),
        checked.epoch_s.Median() / off.epoch_s.Median(),
        steady_runs.back()
            ? ""
            : "; NOT STEADY: the machine's speed changed (the job thread's "
              "CPU in a compute against the compute alone, above)",
        describe(on, "beside the previous flush").c_str(),
        describe(off, "beside the previous flush").c_str(), copied(raw).c_str(),
        copied(checked).c_str());
    std::fflush(stdout);
  }
  // The figures below are of the steady runs; of all runs when none was.
  std::vector<int> counted;
  for (int i = 0; i < c_.runs; ++i) {
    if (steady_runs[i]) counted.push_back(i);
  }
  if (counted.empty()) {
    std::printf(
        "  NO STEADY RUN: the machine's speed changed in every run; the "
        "figures below are of all runs and say little about the flush\n");
    for (int i = 0; i < c_.runs; ++i) counted.push_back(i);
  } else if (static_cast<int>(counted.size()) < c_.runs) {
    std::printf("  the figures below are of the %d steady runs of %d\n",
                static_cast<int>(counted.size()), c_.runs);
  }
  for (int i : counted) {
    s_["overhead ratio"].Add(runs[Flush::kOn][i].epoch_s.Median() /
                             runs[Flush::kOff][i].epoch_s.Median());
  }
  std::map<Flush, Sample> epoch_medians;
  for (const Flush flush : kSettings) {
    const std::string label =
        flush == Flush::kRawCopy || flush == Flush::kCheckedCopy
            ? name(flush)
            : absl::StrCat("flush ", name(flush));
    Sample& epoch = epoch_medians[flush];
    Sample compute, compute_cpu, save, end;
    for (int i : counted) {
      const EpochRun& r = runs[flush][i];
      epoch.Add(r.epoch_s.Median());
      compute.Add(r.compute_s.Median());
      compute_cpu.Add(r.compute_cpu_s.Median());
      save.Add(r.save_s.Median());
      end.Add(r.end_s);
    }
    std::printf(
        "  %-9s medians over %d runs (range): epoch %s; compute %s "
        "(the job thread's CPU in it %s); blocking save %s; End() %s\n",
        label.c_str(), static_cast<int>(counted.size()), Millis(epoch).c_str(),
        Millis(compute).c_str(), Millis(compute_cpu).c_str(),
        Figure(save).c_str(), Millis(end).c_str());
  }
  // What the flush costs in CPU: the process's CPU over the counted epochs,
  // on minus off, per epoch; the raw copy's beside it is the least a flush
  // can cost. On two cores the flush has a core to itself only when nothing
  // else wants it.
  Sample flush_cpu, raw_cpu, checked_cpu;
  for (int i : counted) {
    const double off_cpu = runs[Flush::kOff][i].cpu_s;
    flush_cpu.Add((runs[Flush::kOn][i].cpu_s - off_cpu) / (c_.epochs - 1));
    raw_cpu.Add((runs[Flush::kRawCopy][i].cpu_s - off_cpu) / (c_.epochs - 1));
    checked_cpu.Add((runs[Flush::kCheckedCopy][i].cpu_s - off_cpu) /
                    (c_.epochs - 1));
  }
  std::printf(
      "  the flush's CPU per epoch (process cpu, on minus off): %s; the raw "
      "copy's (raw copy minus off): %s; with the CRC-32C: %s\n",
      Millis(flush_cpu).c_str(), Millis(raw_cpu).c_str(),
      Millis(checked_cpu).c_str());
  const double ratio = s_["overhead ratio"].Median();
  std::printf("  flush_epoch_overhead = %s (goal <= 1.05: %s)\n",
              Range(s_["overhead ratio"], "%.3f").c_str(),
              ratio <= 1.05 ? "met" : "NOT met");
  std::printf(
      "  floor: raw copy on / off = %.3f (a flush reads and writes at least "
      "these bytes beside the compute; at or above 1.05 the goal is out of "
      "reach on this machine)\n",
      epoch_medians[Flush::kRawCopy].Median() /
          epoch_medians[Flush::kOff].Median());
  std::printf(
      "  floor with the check: raw + crc on / off = %.3f (the same copy "
      "with a CRC-32C of every byte, which the flush must compute to verify "
      "what it copies)\n",
      epoch_medians[Flush::kCheckedCopy].Median() /
          epoch_medians[Flush::kOff].Median());
  std::fflush(stdout);
  return RemovePath(overhead_local_);
}

}  // namespace bench
}  // namespace jobgraph

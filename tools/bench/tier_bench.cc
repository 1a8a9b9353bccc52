// tier_bench: the node-local checkpoint tier (CheckpointOptions::
// local_directory, a tmpfs such as /dev/shm, flushed to the shared directory
// in the background) against saving to the shared directory alone (a
// directory on the disk), in one run and one process.
//
// The state: --state_mib MiB (default 512) of float tensors in --blobs
// tensors (default 8) in node "trainer_0"'s root workspace of a LocalSession,
// filled with random mantissas in [1, 2) (normal floats, so the compute of
// part 3 never meets a denormal, and nothing a byte-level compressor could
// shrink). "Modifying" the state takes mutable_data<float>() of every tensor
// (a fresh write generation) and flips bits of one float per 4 KiB, so that
// every epoch saves different bytes. Each configuration is one Checkpointer
// driven by direct calls (Start, CaptureBlobNames, SaveEpoch, Restore, End),
// as a JobRunner would make them; every save is synchronous.
//
// 1. BLOCKING SAVE. Two Checkpointers save the same workspace:
//      shared  CheckpointOptions{directory = <shared>/only}: every save goes
//              to the disk;
//      local   {directory = <shared>/tiered, local_directory = <local>/tier,
//              shared_every = 1}: every save goes to the tmpfs, and its
//              epoch is then copied to <shared>/tiered by the background
//              flush.
//    Each first saves epoch 0 untimed (a process's first save maps its
//    buffers). Per run: modify, then sync and sleep --settle_ms, then one
//    SaveEpoch timed on the caller's clock (what the job's thread is blocked
//    for: until the epoch is committed, in the tmpfs for the local tier);
//    the two take turns going first. After the local save the bench polls
//    the shared commit log (every ms) until it lists the epoch: the time
//    from the save's return to then is the flush of one epoch, and the next
//    save starts only once it is done, so no save is timed beside a flush.
//    Baselines in every run, each after deleting its previous file (off the
//    clock) and settling: the same bytes written to one new file in the
//    shared directory with 4 MiB write()s and fsync through the page cache,
//    and with O_DIRECT from the tensors' own (page-aligned) memory, and
//    written with write()+fsync to one file in the local directory.
//    Each save's own account (CheckpointStats write_micros, commit_micros)
//    and the process's CPU time during it are printed beside it, and the
//    flush's CPU time (the process's while the bench only polls).
//    local_blocking_vs_shared = local save / shared save of the same run
//    (median over runs). Goal: at most 0.2. Printed beside it: the raw
//    write to the local directory over the shared save, what the ratio
//    would be if a local save cost no more than writing its bytes once.
//
// 2. RESTORE. After part 1 the local Checkpointer saves one more epoch
//    (untimed), waits for its flush and ends, so both tiers hold it. Each
//    restore is what a resuming job runs: a new Checkpointer with the local
//    tier's options and a fresh LocalSession, Start(session, {node},
//    ResumeFrom::Latest()) (which loads the chosen epoch into staged blobs,
//    every CRC checked) and Restore(), timed together; the storage pool
//    (engine/storage_pool.h) is emptied first, so that both load into fresh
//    memory, as a new process does. CheckpointStats::read_from must name
//    the expected directory, and every restored tensor is compared with the
//    workspace off the clock.
//      local         the local tier holds the epoch (a job resumed on its
//                    own node);
//      shared cold   the local tier is moved aside (a job resumed on another
//                    node; put back afterwards), every file under
//                    <shared>/tiered is fsynced and dropped from the page
//                    cache (posix_fadvise DONTNEED), and, when the bench
//                    runs as root, 3 is written to /proc/sys/vm/drop_caches;
//                    the output says which was done.
//    They take turns going first, each after sync and --settle_ms. Baseline
//    per run: the page-cache raw file of part 1 evicted the same way and
//    read back with 4 MiB read()s into a buffer already touched.
//    local_restore_vs_shared = local / shared cold of the same run (median).
//    No goal was set. The partner restore (a rank reading a partner node's
//    copy over MPI) needs partner copies, which jobgraph does not make yet:
//    the bench says so and measures nothing for it.
//
// 3. FLUSH OVERHEAD. Per run, one fresh local-tier Checkpointer per
//    setting (fresh directories, deleted off the clock), --epochs epochs
//    (default 4) of: compute, then SaveEpoch into the local tier. The
//    compute is CPU work on the tensors, not a sleep: x = 3 - x over each
//    16 KiB block of every tensor (in the L1 cache), R times per block,
//    then the modification above. R is fixed for the invocation, chosen
//    once so that the compute alone takes about as long as the flush of one
//    epoch (part 1's median; --compute_ms overrides), so both settings do
//    the same work and whatever the flush takes from it (a core, memory
//    bandwidth, the page cache) shows as wall time.
//      on   shared_every = 1: each epoch's flush runs behind the next
//           epoch's compute;
//      off  shared_every = --epochs + 1: no epoch is flushed while the run
//           goes on; End() flushes the newest epoch, and is timed apart and
//           left out (as it is in the "on" run, where it waits for the last
//           epoch's flush).
//    The epochs are numbered from 1 (epoch 0 would be divisible by any
//    shared_every, and flush in both settings). The first epoch is left out
//    of both: no flush runs behind its compute. An epoch's time is its
//    compute plus its blocking save; each run's median over epochs 2..N.
//    The settings take turns going first. flush_epoch_overhead = on / off
//    of the same run (median). Goal: at most 1.05. To tell where an
//    overhead comes from, each run also prints the job thread's CPU time
//    in the computes (unchanged by the flush when it only takes the core
//    away; higher when it slows the compute's memory accesses), the
//    process's CPU time (on minus off: the flush's CPU per epoch), how many
//    saves began before the previous epoch's flush was committed (the
//    shared log read off the clock), the saves' local commit time (a wait
//    on anything the flush holds would show there), and the shared commit
//    log's epochs, to show which were flushed.
//
// MB = 1e6 bytes of tensor data; times are wall times; figures are medians
// over --runs runs with their range. The last line is
//   tier_bench: local_blocking_vs_shared=<r> local_restore_vs_shared=<r>
//   flush_epoch_overhead=<r>
//
// Directories: --shared_dir (default: a fresh /var/tmp/jobgraph_tier_bench-
// XXXXXX; /var/tmp rather than /tmp, which is a tmpfs on some systems) and
// --local_dir (default /dev/shm/tier_bench-<pid>). Each must not exist or be
// empty: the bench removes both at the end. It warns when the shared one is
// a tmpfs or the local one is not.
//
// Run (about 3 minutes at the defaults on these 2-core VMs):
//   ./tools/bazel run -c opt //tools/bench:tier_bench

#include <fcntl.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/storage_pool.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(std::string, shared_dir, "",
          "The shared checkpoint directory's parent, on a disk (default: a "
          "fresh /var/tmp/jobgraph_tier_bench-XXXXXX). Must not exist or be "
          "empty: the bench removes it at the end. Needs about "
          "(2 x --runs + 4) x --state_mib free.");
ABSL_FLAG(std::string, local_dir, "",
          "The local tier's parent, a tmpfs (default: "
          "/dev/shm/tier_bench-<pid>). Must not exist or be empty: the bench "
          "removes it at the end. Needs about 4 x --state_mib of memory.");
ABSL_FLAG(int, state_mib, 512, "MiB of float tensors in the checkpoint.");
ABSL_FLAG(int, blobs, 8, "Tensors the state is split into.");
ABSL_FLAG(int, runs, 3, "Measured runs of each part; medians.");
ABSL_FLAG(int, epochs, 4,
          "Part 3: epochs per run (at least 2; the first is left out).");
ABSL_FLAG(int, settle_ms, 1000,
          "Sleep after sync before each timed save, raw write and restore.");
ABSL_FLAG(int, compute_ms, -1,
          "Part 3: compute per epoch; -1: the median flush of part 1.");

namespace jobgraph {
namespace bench {
namespace {

constexpr char kNode[] = "trainer_0";
constexpr size_t kIoChunk = size_t{4} << 20;  // raw read()s
constexpr int64_t kTmpfsMagic = 0x01021994;   // TMPFS_MAGIC, linux/magic.h

// ---------------------------------------------------------------------------
// The environment, with errors as statuses (so that the directories are
// removed whatever fails).

// What EvictFromPageCache did.
struct Eviction {
  int files = 0;
  int64_t bytes = 0;
  // Whether 3 was written to /proc/sys/vm/drop_caches.
  bool dropped_caches = false;
  bool tried_drop_caches = false;
};

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

// The file system type of `path`, for the header.
std::string FsType(const std::string& path, bool* tmpfs) {
  struct statfs st;
  *tmpfs = false;
  if (::statfs(path.c_str(), &st) != 0) return "unknown";
  const int64_t type = static_cast<int64_t>(st.f_type);
  *tmpfs = type == kTmpfsMagic;
  switch (type) {
    case kTmpfsMagic:
      return "tmpfs";
    case 0xEF53:
      return "ext2/3/4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794C7630:
      return "overlayfs";
    default:
      return absl::StrFormat("f_type 0x%x", type);
  }
}

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

// CPU seconds the calling thread has used.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Empties the storage pool, so that the next tensors are fresh mappings
// (what a resuming process loads into), not buffers an earlier restore of
// this process freed.
void EmptyStoragePool() {
  StoragePool& pool = StoragePool::Global();
  const size_t limit = pool.limit_bytes();
  pool.set_limit_bytes(0);
  pool.set_limit_bytes(limit);
}

// A directory given by a flag, or made by default: it must not exist (it
// is created, its parent must exist) or be an empty directory, since the
// bench removes it at the end.
absl::Status ClaimDirectory(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(const bool exists, PathExists(dir));
  if (!exists) return CreateDir(dir);
  JG_ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir));
  if (!names.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir,
        " is not empty; the bench removes its directories at the end, "
        "so give a new or empty one"));
  }
  return absl::OkStatus();
}

std::string Range(const Sample& s, const char* format) {
  return absl::StrCat(absl::StrFormat(format, s.Median()), " (",
                      absl::StrFormat(format, s.Min()), "-",
                      absl::StrFormat(format, s.Max()), ")");
}

// ---------------------------------------------------------------------------

struct Config {
  std::string shared_dir;
  std::string local_dir;
  int blobs = 8;
  size_t blob_bytes = 0;
  int runs = 3;
  int epochs = 4;
  int settle_ms = 1000;
  int compute_ms = -1;
};

class TierBench {
 public:
  explicit TierBench(Config config)
      : c_(std::move(config)),
        only_dir_(JoinPath(c_.shared_dir, "only")),
        tiered_dir_(JoinPath(c_.shared_dir, "tiered")),
        tier_dir_(JoinPath(c_.local_dir, "tier")),
        aside_dir_(JoinPath(c_.local_dir, "tier.aside")),
        raw_shared_(JoinPath(c_.shared_dir, "raw.bin")),
        raw_local_(JoinPath(c_.local_dir, "raw.bin")),
        overhead_shared_(JoinPath(c_.shared_dir, "overhead")),
        overhead_local_(JoinPath(c_.local_dir, "overhead")) {}

  absl::Status Run();

 private:
  double StateBytes() const {
    return static_cast<double>(c_.blobs) * static_cast<double>(c_.blob_bytes);
  }
  std::string Mbps(double seconds) const {
    return absl::StrFormat("%6.0f MB/s", StateBytes() / 1e6 / seconds);
  }
  // "<median> ms (<range>) = <MB/s of the median>".
  std::string Figure(const Sample& seconds) const {
    return absl::StrCat(Millis(seconds), " = ", Mbps(seconds.Median()));
  }
  // The same without the rate, for what moves no data.
  static std::string Millis(const Sample& seconds) {
    Sample ms;
    for (double s : seconds.values) ms.Add(s * 1000);
    return absl::StrCat(Range(ms, "%.1f"), " ms");
  }
  void Settle() const { bench::Settle(0, c_.settle_ms); }

  absl::Status Fill();
  void Modify();
  // See the header (part 3).
  void Compute(int reps);
  std::vector<absl::string_view> Views() const;
  // Whether `session` holds the workspace's tensors, bit for bit.
  absl::Status CheckRestored(LocalSession& session) const;

  CheckpointOptions SharedOnlyOptions() const;
  CheckpointOptions TieredOptions() const;
  // A Checkpointer started from scratch on session_, its blobs captured.
  absl::StatusOr<std::unique_ptr<Checkpointer>> StartSaver(
      const CheckpointOptions& options);
  // Seconds from `since` until the commit log of `dir` lists `epoch`.
  absl::StatusOr<double> WaitUntilListed(const std::string& dir, int64_t epoch,
                                         Clock::time_point since) const;

  absl::Status BlockingSaves();
  absl::Status RawWrites();
  absl::Status Restores();
  // One restore as a resuming job runs it (see the header); checks that it
  // read `expected_dir`. Returns its seconds.
  absl::StatusOr<double> TimeRestore(int64_t epoch,
                                     const std::string& expected_dir);
  absl::Status FlushOverhead();
  struct EpochRun {
    Sample epoch_s;        // epochs 2..N: compute + save
    Sample compute_s;      // epochs 2..N
    Sample compute_cpu_s;  // the job thread's CPU time in those computes
    Sample save_s;         // epochs 2..N
    // CheckpointStats::commit_micros of those saves: the local commit,
    // which would show a wait on anything the flush holds.
    Sample commit_s;
    // Saves of epochs 2..N that began before the previous epoch's flush
    // was committed in the shared directory.
    int saves_beside_flush = 0;
    double end_s = 0;  // End(): the end-of-run flush
    double cpu_s = 0;  // process CPU over epochs 2..N
    std::string flushed;
  };
  absl::StatusOr<EpochRun> RunEpochs(bool flush_on, int reps);

  const Config c_;
  const std::string only_dir_, tiered_dir_, tier_dir_, aside_dir_;
  const std::string raw_shared_, raw_local_;
  const std::string overhead_shared_, overhead_local_;

  LocalSession session_;
  std::vector<Tensor*> tensors_;
  std::vector<std::string> names_;
  StagingBuffer staging_;
  // Figures by name, one value per measured run.
  std::map<std::string, Sample> s_;

  // Part 1's Checkpointers and their last epochs.
  std::unique_ptr<Checkpointer> only_, tiered_;
  int64_t only_epoch_ = 0, tiered_epoch_ = 0;
  double flush_s_ = 0;  // part 1's median flush of one epoch
};

absl::Status TierBench::Fill() {
  Workspace* ws = session_.NodeWorkspace(kNode);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < c_.blobs; ++i) {
    names_.push_back(absl::StrFormat("w%02d", i));
    Tensor* t = ws->SetTensor(
        names_.back(),
        Tensor::Uninitialized(
            FLOAT, {static_cast<int64_t>(c_.blob_bytes / sizeof(float))}));
    uint32_t* words = static_cast<uint32_t*>(t->raw_mutable_data());
    for (int64_t w = 0; w < t->numel(); ++w) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      // Exponent of 1.0, random mantissa: a float in [1, 2).
      words[w] = 0x3F800000u | static_cast<uint32_t>(x & 0x7FFFFF);
    }
    tensors_.push_back(t);
  }
  JG_ASSIGN_OR_RETURN(staging_, NewStagingBuffer());
  return absl::OkStatus();
}

void TierBench::Modify() {
  for (Tensor* t : tensors_) {
    float* data = t->mutable_data<float>();  // a fresh generation
    for (int64_t j = 0; j < t->numel(); j += 1024) {
      uint32_t bits;
      std::memcpy(&bits, &data[j], sizeof(bits));
      bits ^= 0x00A5A5A5u;  // mantissa bits only: stays in [1, 2)
      std::memcpy(&data[j], &bits, sizeof(bits));
    }
  }
}

void TierBench::Compute(int reps) {
  // 16 KiB blocks stay in the L1 cache, so the repetitions are CPU work and
  // the memory is streamed once per epoch whatever `reps` is. 3 - x maps
  // [1, 2] onto itself exactly.
  constexpr int64_t kBlock = 4096;
  for (Tensor* t : tensors_) {
    float* data = t->mutable_data<float>();
    const int64_t n = t->numel();
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      const int64_t end = std::min(n, begin + kBlock);
      for (int r = 0; r < reps; ++r) {
        for (int64_t i = begin; i < end; ++i) data[i] = 3.0f - data[i];
      }
    }
  }
  Modify();
}

std::vector<absl::string_view> TierBench::Views() const {
  std::vector<absl::string_view> views;
  for (const Tensor* t : tensors_) {
    views.emplace_back(static_cast<const char*>(t->raw_data()), t->nbytes());
  }
  return views;
}

absl::Status TierBench::CheckRestored(LocalSession& session) const {
  Workspace* ws = session.NodeWorkspace(kNode);
  for (size_t i = 0; i < names_.size(); ++i) {
    JG_ASSIGN_OR_RETURN(const Tensor* t, ws->GetTensor(names_[i]));
    if (!t->BitwiseEquals(*tensors_[i])) {
      return absl::DataLossError(absl::StrCat("restored tensor ", names_[i],
                                              " differs from the workspace's"));
    }
  }
  return absl::OkStatus();
}

CheckpointOptions TierBench::SharedOnlyOptions() const {
  CheckpointOptions options;
  options.directory = only_dir_;
  return options;
}

CheckpointOptions TierBench::TieredOptions() const {
  CheckpointOptions options;
  options.directory = tiered_dir_;
  options.local_directory = tier_dir_;
  options.shared_every = 1;
  return options;
}

absl::StatusOr<std::unique_ptr<Checkpointer>> TierBench::StartSaver(
    const CheckpointOptions& options) {
  auto checkpointer = std::make_unique<Checkpointer>(options);
  JG_ASSIGN_OR_RETURN(
      const std::optional<int64_t> resumed,
      checkpointer->Start(session_, {kNode}, ResumeFrom::Scratch()));
  if (resumed.has_value()) {
    return absl::InternalError("a fresh checkpoint directory resumed");
  }
  JG_RETURN_IF_ERROR(checkpointer->CaptureBlobNames(session_));
  return checkpointer;
}

absl::StatusOr<double> TierBench::WaitUntilListed(
    const std::string& dir, int64_t epoch, Clock::time_point since) const {
  // A flush of a few GB takes seconds; ten minutes means it is stuck.
  constexpr double kTimeoutSeconds = 600;
  while (true) {
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
    if (log.ok() && FindCommittedEpoch(*log, epoch, {kNode}) != nullptr) {
      return Seconds(since);
    }
    // The log is replaced by a rename, so a read sees the old or the new.
    if (!log.ok() && !absl::IsNotFound(log.status())) return log.status();
    if (Seconds(since) > kTimeoutSeconds) {
      return absl::DeadlineExceededError(
          absl::StrCat("the flush of epoch ", epoch, " did not reach ", dir,
                       " in ", kTimeoutSeconds, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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
      "  local_restore_vs_shared = %s (no goal set)\n"
      "  partner restore (over MPI, from a partner node's copy): not "
      "measured; jobgraph does not make partner copies yet\n",
      eviction_text.c_str(), c_.runs, Figure(s_["raw cold read"]).c_str(),
      Figure(s_["restore local"]).c_str(),
      Figure(s_["restore shared cold"]).c_str(),
      Range(s_["restore ratio"], "%.3f").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

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
  // Part 1's files are not needed any more: their disk writeback and
  // memory are not to weigh on this part.
  for (const std::string& path :
       {only_dir_, tiered_dir_, tier_dir_, raw_shared_}) {
    JG_RETURN_IF_ERROR(RemovePath(path));
  }
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

// ---------------------------------------------------------------------------

absl::Status TierBench::Run() {
  JG_RETURN_IF_ERROR(Fill());
  bool shared_tmpfs = false, local_tmpfs = false;
  const std::string shared_fs = FsType(c_.shared_dir, &shared_tmpfs);
  const std::string local_fs = FsType(c_.local_dir, &local_tmpfs);
  std::printf(
      "tier_bench: state %.1f MB = %d float tensors x %zu MiB in node %s; %d "
      "runs\n  shared dir %s (%s)%s\n  local dir  %s (%s)%s\n",
      StateBytes() / 1e6, c_.blobs, c_.blob_bytes >> 20, kNode, c_.runs,
      c_.shared_dir.c_str(), shared_fs.c_str(),
      shared_tmpfs ? "  WARNING: a tmpfs, not a disk" : "",
      c_.local_dir.c_str(), local_fs.c_str(),
      local_tmpfs ? "" : "  WARNING: not a tmpfs");
  std::fflush(stdout);
  JG_RETURN_IF_ERROR(BlockingSaves());
  JG_RETURN_IF_ERROR(Restores());
  JG_RETURN_IF_ERROR(FlushOverhead());
  std::printf(
      "\ntier_bench: local_blocking_vs_shared=%.3f "
      "local_restore_vs_shared=%.3f flush_epoch_overhead=%.3f\n",
      s_["blocking ratio"].Median(), s_["restore ratio"].Median(),
      s_["overhead ratio"].Median());
  std::fflush(stdout);
  return absl::OkStatus();
}

// A flag's path, relative ones taken from where `bazel run` was started.
std::string FromWorkingDirectory(std::string path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!path.empty() && path[0] != '/' && cwd != nullptr) {
    path = JoinPath(cwd, path);
  }
  return path;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  const int state_mib = absl::GetFlag(FLAGS_state_mib);
  c.blobs = absl::GetFlag(FLAGS_blobs);
  c.runs = absl::GetFlag(FLAGS_runs);
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.settle_ms = absl::GetFlag(FLAGS_settle_ms);
  c.compute_ms = absl::GetFlag(FLAGS_compute_ms);
  if (state_mib < 1 || c.blobs < 1 || state_mib % c.blobs != 0 || c.runs < 1 ||
      c.epochs < 2 || c.settle_ms < 0) {
    return absl::InvalidArgumentError(
        "--state_mib must be a positive multiple of --blobs, --runs at "
        "least 1, --epochs at least 2, --settle_ms not negative");
  }
  c.blob_bytes = (static_cast<size_t>(state_mib) << 20) / c.blobs;
  c.shared_dir = FromWorkingDirectory(absl::GetFlag(FLAGS_shared_dir));
  c.local_dir = FromWorkingDirectory(absl::GetFlag(FLAGS_local_dir));
  if (c.local_dir.empty()) {
    c.local_dir = absl::StrCat("/dev/shm/tier_bench-", ::getpid());
  }
  return c;
}

absl::Status Main() {
  JG_ASSIGN_OR_RETURN(Config config, ConfigFromFlags());
  if (config.shared_dir.empty()) {
    char name[] = "/var/tmp/jobgraph_tier_bench-XXXXXX";
    if (::mkdtemp(name) == nullptr) return ErrnoStatus("mkdtemp", name);
    config.shared_dir = name;
  } else {
    JG_RETURN_IF_ERROR(ClaimDirectory(config.shared_dir));
  }
  absl::Status status = ClaimDirectory(config.local_dir);
  if (status.ok()) {
    {
      TierBench bench(config);
      status = bench.Run();
    }
    status.Update(RemovePath(config.local_dir));
  }
  status.Update(RemovePath(config.shared_dir));
  return status;
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  jobgraph::bench::InitBench(argc, argv);
  return jobgraph::bench::ExitCode("tier_bench", jobgraph::bench::Main());
}

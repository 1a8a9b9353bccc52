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
//    No goal was set.
//
// 2b. PARTNER RESTORE. A job on two hosts whose first host lost its local
//    tier (FORMAT.md 3.5): the bench runs itself (--partner_worker,
//    tier_bench_partner_worker.cc) under `/usr/bin/mpirun -np 2`, the two
//    ranks standing for hosts hA (rank 0) and hB (rank 1) on this machine
//    (each sets JOBGRAPH_HOST_NAME, as tests/mpi_tier_test.cc's wrapper
//    does), with Open MPI's temporary files in the bench's local directory
//    (tests/subprocess.h OpenMpiTempEnv says why), --bind-to none (each
//    rank may use every core, as a host of its own would) and
//    mpi_yield_when_idle (a rank waiting in a collective gives way to the
//    other). The job's nodes: "trainer_0" on hA holds the state above
//    (the same bytes: the modification of parts 1 and 2 aside), "trainer_1"
//    on hB one 4 KiB tensor (every rank must host a node; a small one keeps
//    hB's own restore out of the figures). The job saves epoch 1 once with
//    {directory = <shared>/partner, local_directory =
//    <local>/partner/tier-%h, shared_every = 1}: each host's tier then
//    holds both nodes' databases (its own and its partner's copy), and the
//    shared directory too. Then hA's tier is wiped. Each restore runs in
//    fresh MpiSessions and Checkpointers on both ranks, into fresh memory
//    (storage pool emptied), after sync + --settle_ms and the shared
//    directory evicted from the page cache as in part 2 (both restores
//    read the shared commit log); both ranks pass a barrier, then
//    Start(latest) + Restore is timed on rank 0, the rank that runs
//    trainer_0:
//      partner  hA's tier is absent, so trainer_0's database comes from
//               hB's tier: hB packs it and sends it over MPI (here shared
//               memory between two processes, not a network), hA installs
//               it in its tier and loads it; trainer_1's comes from hB's
//               own tier;
//      shared   hB's tier is moved aside too (and put back afterwards):
//               both nodes' databases come from the shared directory, cold.
//    CheckpointStats::tier_bytes must say so (the partner restore fetched
//    at least the state's bytes over MPI and read none from the shared
//    directory; the shared one read them all from there), and rank 0
//    compares the restored tensors with the saved ones off the clock. One
//    partner restore first, untimed (load threads, the ranks' first large
//    exchange); then they take turns going first. The worker prints its
//    figures for the bench, which prints them beside part 2's one-process
//    cold shared restore. partner_restore_vs_shared = partner / shared of
//    the same run (median). Goal: at most 0.5. Without /usr/bin/mpirun, or
//    when MPI cannot start two ranks, the bench prints n/a with the reason
//    (the start of mpirun's standard error) and goes on; a failure once both
//    ranks run fails the bench.
//
// 3. FLUSH OVERHEAD. Per run, one fresh local-tier Checkpointer per
//    setting (fresh directories, deleted off the clock), --epochs epochs
//    (default 4) of: compute, then SaveEpoch into the local tier. The
//    compute is CPU work on the tensors, not a sleep: x = 3 - x over each
//    16 KiB block of every tensor (in the L1 cache), R times per block,
//    then the modification above. R is fixed for the invocation, chosen
//    once so that the compute alone takes about as long as the flush of one
//    epoch (part 1's median; --compute_ms overrides), so every setting does
//    the same work and whatever the flush takes from it (a core, memory
//    bandwidth, the page cache) shows as wall time.
//      on   shared_every = 1: each epoch's flush runs behind the next
//           epoch's compute;
//      off  shared_every = --epochs + 1: no epoch is flushed while the run
//           goes on; End() flushes the newest epoch, and is timed apart and
//           left out (as it is in the "on" run, where it waits for the last
//           epoch's flush);
//      raw  the floor: as off, and after each save the bench itself copies
//           the epoch's database from the local tier to a fresh directory
//           on the disk (<shared>/overhead.raw) on a thread of its own,
//           behind the next epoch's compute as the flush runs: read(2)
//           into one 4 MiB buffer, write(2) with O_DIRECT (the unaligned
//           tail without), fsync of each file and of the directory; no
//           checksum, no temporary name, no commit log. The copy is waited
//           for before the next save (off the clock: a flush does not hold
//           the save up), so at most one runs, as one flush does; the last
//           one is waited for in the End() time.
//      raw + crc  the same copy with a CRC-32C of every chunk it reads:
//           the least a flush that verifies what it copies does (the
//           issue asks for that check), printed as a second floor.
//    The epochs are numbered from 1 (epoch 0 would be divisible by any
//    shared_every, and flush in every setting). The first epoch is left
//    out of all: no flush runs behind its compute. An epoch's time is its
//    compute plus its blocking save; each run's median over epochs 2..N.
//    The settings take turns going first. A run is left out (and printed
//    as NOT STEADY) when the machine's speed changed under it: a setting's
//    compute took under 0.85x the job thread's CPU of the compute alone, or
//    the one with no flush over 1/0.85x; the figures are then of the other
//    runs (of all, said so, when every run was). flush_epoch_overhead = on /
//    off of the same run (median). Goal: at most 1.05. Below it: floor = raw /
//    off of the medians over runs of the epoch times, what the least a
//    flush does costs the epoch on this machine (at or above 1.05, the goal
//    is out of reach whatever the flush does). To tell where an
//    overhead comes from, each run also prints the job thread's CPU time
//    in the computes (unchanged by the flush when it only takes the core
//    away; higher when it slows the compute's memory accesses), the
//    process's CPU time (on minus off: the flush's CPU per epoch; raw minus
//    off: the raw copy's), how many saves began before the previous
//    epoch's flush was committed (the shared log read off the clock) or
//    came while its raw copy still ran (with the copies' times and the
//    waits for them), the saves' local commit time (a wait on anything the
//    flush holds would show there), and the shared commit log's epochs, to
//    show which were flushed.
//
// MB = 1e6 bytes of tensor data; times are wall times; figures are medians
// over --runs runs with their range. The last line is
//   tier_bench: local_blocking_vs_shared=<r> local_restore_vs_shared=<r>
//   partner_restore_vs_shared=<r or n/a> flush_epoch_overhead=<r>
//
// Directories: --shared_dir (default: a fresh /var/tmp/jobgraph_tier_bench-
// XXXXXX; /var/tmp rather than /tmp, which is a tmpfs on some systems) and
// --local_dir (default /dev/shm/tier_bench-<pid>). Each must not exist or be
// empty: the bench removes both at the end. It warns when the shared one is
// a tmpfs or the local one is not. Parts 1 and 2's files are removed before
// part 2b, part 2b's before part 3.
//
// Run (about 3 minutes at the defaults on these 2-core VMs):
//   ./tools/bazel run -c opt //tools/bench:tier_bench

#include "tools/bench/tier_bench.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "engine/status_macros.h"
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
          "removes it at the end. Needs about 4 x --state_mib of memory; "
          "part 2b up to about 10 x in all (its tiers, and the ranks' copies "
          "of what they send).");
ABSL_FLAG(int, state_mib, 512, "MiB of float tensors in the checkpoint.");
ABSL_FLAG(int, blobs, 8, "Tensors the state is split into.");
ABSL_FLAG(int, runs, 3, "Measured runs of each part; medians.");
ABSL_FLAG(int, epochs, 4,
          "Part 3: epochs per run (at least 2; the first is left out).");
ABSL_FLAG(int, settle_ms, 1000,
          "Sleep after sync before each timed save, raw write and restore.");
ABSL_FLAG(int, compute_ms, -1,
          "Part 3: compute per epoch; -1: the median flush of part 1.");
ABSL_FLAG(bool, partner_worker, false,
          "Internal: run as a rank of part 2b under mpirun (the bench starts "
          "them with this and the two flags below).");
ABSL_FLAG(std::string, partner_shared, "",
          "Internal, with --partner_worker: the shared checkpoint directory.");
ABSL_FLAG(std::string, partner_local, "",
          "Internal, with --partner_worker: the local tiers, %h for the "
          "host.");

namespace jobgraph {
namespace bench {
namespace {

constexpr int64_t kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC, linux/magic.h

// ---------------------------------------------------------------------------
// The environment, with errors as statuses (so that the directories are
// removed whatever fails).

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

}  // namespace

std::string Range(const Sample& s, const char* format) {
  return absl::StrCat(absl::StrFormat(format, s.Median()), " (",
                      absl::StrFormat(format, s.Min()), "-",
                      absl::StrFormat(format, s.Max()), ")");
}

void FillState(const Config& c, Workspace* ws, std::vector<std::string>* names,
               std::vector<Tensor*>* tensors) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < c.blobs; ++i) {
    names->push_back(absl::StrFormat("w%02d", i));
    Tensor* t = ws->SetTensor(
        names->back(),
        Tensor::Uninitialized(
            FLOAT, {static_cast<int64_t>(c.blob_bytes / sizeof(float))}));
    uint32_t* words = static_cast<uint32_t*>(t->raw_mutable_data());
    for (int64_t w = 0; w < t->numel(); ++w) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      // Exponent of 1.0, random mantissa: a float in [1, 2).
      words[w] = 0x3F800000u | static_cast<uint32_t>(x & 0x7FFFFF);
    }
    tensors->push_back(t);
  }
}

absl::Status CheckSameTensors(const Workspace& restored,
                              const std::vector<std::string>& names,
                              const std::vector<Tensor*>& tensors) {
  for (size_t i = 0; i < names.size(); ++i) {
    JG_ASSIGN_OR_RETURN(const Tensor* t, restored.GetTensor(names[i]));
    if (!t->BitwiseEquals(*tensors[i])) {
      return absl::DataLossError(absl::StrCat("restored tensor ", names[i],
                                              " differs from the saved one"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

absl::Status TierBench::Fill() {
  FillState(c_, session_.NodeWorkspace(kNode), &names_, &tensors_);
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
  return CheckSameTensors(*session.NodeWorkspace(kNode), names_, tensors_);
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
  JG_RETURN_IF_ERROR(RemoveSaveFiles());
  JG_RETURN_IF_ERROR(PartnerRestores());
  JG_RETURN_IF_ERROR(FlushOverhead());
  std::printf(
      "\ntier_bench: local_blocking_vs_shared=%.3f "
      "local_restore_vs_shared=%.3f partner_restore_vs_shared=%s "
      "flush_epoch_overhead=%.3f\n",
      s_["blocking ratio"].Median(), s_["restore ratio"].Median(),
      partner_ratio_.c_str(), s_["overhead ratio"].Median());
  std::fflush(stdout);
  return absl::OkStatus();
}

namespace {

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

// A rank of part 2b. A failed rank leaves at once, without MPI_Finalize
// (which would wait for the other rank, itself waiting in a collective):
// mpirun then ends the job. Its error goes to standard output too, where
// the bench reads it.
int WorkerMain() {
  absl::StatusOr<Config> config = ConfigFromFlags();
  absl::Status status = config.status();
  if (status.ok()) {
    status = RunPartnerWorker(*config, absl::GetFlag(FLAGS_partner_shared),
                              absl::GetFlag(FLAGS_partner_local));
  }
  if (status.ok()) return 0;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  std::printf("%serror rank %s: %s\n", kWorkerLine,
              rank != nullptr ? rank : "?", status.ToString().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "tier_bench --partner_worker: %s\n",
               status.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  jobgraph::bench::InitBench(argc, argv);
  if (absl::GetFlag(FLAGS_partner_worker)) {
    return jobgraph::bench::WorkerMain();
  }
  return jobgraph::bench::ExitCode("tier_bench", jobgraph::bench::Main());
}

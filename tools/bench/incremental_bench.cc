// incremental_bench: incremental checkpoints (CheckpointOptions::incremental)
// against full saves of the same workspace, and the restore of an epoch
// many increments deep against the restore of a full save, in one run.
//
// The workspace: --tensors float tensors of --tensor_mib MiB (default 256 x
// 4 MiB = 1 GiB) in node "trainer_0"'s root workspace of a LocalSession,
// filled with incompressible bits before any timing. "Modifying" a tensor
// takes mutable_data<float>() (a fresh write generation) and flips bits of
// one float in every 4 KiB, so the saved bytes really differ. A save that
// modifies p% modifies the smallest number of tensors that is at least p% of
// them: ceil(p * tensors / 100), i.e. 3, 13 and 64 of 256 for 1, 5 and 25%.
// The modified tensors rotate from save to save.
//
// SAVES. One Checkpointer (incremental, full_every --full_every, LevelDB,
// synchronous) saves the workspace epoch after epoch. Each measured save is
// one SaveEpoch call, which returns once the epoch's database is durable and
// the epoch committed in the commit log. Per run and memory state:
//   full          SaveEpoch(epoch, /*full=*/true): every tensor written; it
//                 starts the next chain of increments;
//   incremental   for each --percents p: modify p% of the tensors, then
//                 SaveEpoch(epoch): only the modified tensors are written,
//                 the others listed by reference to the databases that hold
//                 them (off the clock, the commit log is checked to say so);
//   raw           the same bytes written to one new file with 4 MiB write()s
//                 and fsync, through the page cache and with O_DIRECT (from
//                 the tensors' own page-aligned memory): the whole workspace,
//                 and the 5% save's tensors (--raw_each_percent: every p%'s).
// The full save goes first in even runs and last in odd ones (then the
// increments refer to the chain the previous full save started; a chain
// never reaches --full_every saves, so none of them turns into a full save).
// "Bytes written" is the process's wchar (/proc/self/io: bytes passed to
// write(), the commit log's included) during the save; the database's size
// on disk is printed beside it.
//
// RESTORE. A second directory holds a chain: a full save at epoch 0, then
// --chain incremental epochs that each modify --chain_percent of the tensors
// (disjoint tensors, so epoch --chain references every one of the --chain
// databases before it; full_every is --chain + 1), then a full save of the
// same workspace at epoch --chain + 1. Each restore is what a resuming job
// runs: a new Checkpointer and a fresh LocalSession (a new, empty workspace),
// Checkpointer::Start(session, {node}, ResumeFrom::Epoch(e)), which loads
// the epoch through the Load op (every value's CRC-32C checked, referenced
// databases followed) into staged blobs, then Restore(session, e), which
// puts them in place; timed from Start to Restore's return. Per run and
// memory state, --restore_pairs pairs of the epoch deep in increments and
// the full one, taking turns going first. Before each restore, the
// checkpoint files are evicted from the page cache (posix_fadvise
// DONTNEED, off the clock): a resume reads from the disk (the Save op
// writes its tables with O_DIRECT, so they are never in the page cache
// after a save either). --restore_cache=warm reads every file once first
// instead; "both" times both. Off the clock, every restored tensor is
// compared bit for bit with the workspace's.
//
// PROTOCOL for every timed write and restore, as checkpoint_bench's
// (tools/bench/README.md): what the previous write of the same kind left is
// deleted first (off the clock: deleting costs ~1.2 s/GiB here), then one of
// two memory states, both measured in every run (the project's rule: both
// memory states and both raw writes in the same run, and the worse is
// reported):
//   churn     sync, then touch and free --churn_mib MiB right before;
//   settled   sync, then sleep --settle_ms.
// Run 0 is a warm-up whose figures are dropped; then --runs measured runs.
// Ratios are taken within one run and one state (incremental / full of the
// same run); figures are medians over the runs (and restore pairs) with
// their range.
// MB = 1e6 bytes.
//
// The last line is
//   incremental_bench: bytes_vs_full_at_5pct=<r> save_vs_full_at_5pct=<r>
//   restore_vs_full=<r>
// (medians; of the two memory states (and page-cache states) the worse).
//
// Run (--dir defaults to $TMPDIR/jobgraph_incremental_bench, else under
// /tmp; what the bench writes there is deleted at the end):
//   ./tools/bazel run -c opt //tools/bench:incremental_bench

#include "tools/bench/incremental_bench.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(std::string, dir, "",
          "Scratch directory (default: $TMPDIR/jobgraph_incremental_bench, or "
          "under /tmp; created if missing; relative paths are taken from "
          "where `bazel run` was started). Needs ~4x the workspace free.");
ABSL_FLAG(int, runs, 3,
          "Measured runs (after one warm-up run); medians. Odd or even: the "
          "full save goes first in every other run.");
ABSL_FLAG(int, tensors, 256, "Float tensors in the workspace.");
ABSL_FLAG(int, tensor_mib, 4, "MiB per tensor.");
ABSL_FLAG(std::vector<std::string>, percents,
          std::vector<std::string>({"1", "5", "25"}),
          "Percentages of the tensors each measured incremental save "
          "modifies (rounded up to whole tensors); must include 5, the "
          "summary line's.");
ABSL_FLAG(int, full_every, 11,
          "CheckpointOptions::full_every of the saves' Checkpointer.");
ABSL_FLAG(int, chain, 10,
          "Restore: incremental epochs after the full save of epoch 0; the "
          "restored epoch is this many increments deep.");
ABSL_FLAG(int, chain_percent, 5,
          "Restore: percentage of the tensors each epoch of the chain "
          "modifies.");
ABSL_FLAG(int, churn_mib, 2048,
          "Memory state 'churn': touch and free this much memory right "
          "before each timed write or restore.");
ABSL_FLAG(int, settle_ms, 1000,
          "Memory state 'settled': sleep this long after sync before each "
          "timed write or restore.");
ABSL_FLAG(bool, saves, true, "Time the saves.");
ABSL_FLAG(bool, restores, true, "Time the restores.");
ABSL_FLAG(int, restore_pairs, 2,
          "Restores: pairs (deep, full) per run and state, taking turns "
          "going first.");
ABSL_FLAG(bool, raw_each_percent, false,
          "Also time the raw writes of the tensors of every --percents (by "
          "default: of the whole workspace and of the 5% ones).");
ABSL_FLAG(std::string, restore_cache, "cold",
          "Page-cache state of the restores: cold (the checkpoint's files "
          "evicted), warm (read once first), or both.");

namespace jobgraph {
namespace bench {

// ---------------------------------------------------------------------------
// The environment, with errors as statuses.

absl::Status Settle(const MemoryState& state) {
  ::sync();
  if (state.churn_mib > 0) {
    const size_t bytes = static_cast<size_t>(state.churn_mib) << 20;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", state.churn_mib,
                       " MiB to churn: ", std::strerror(errno)));
    }
    std::memset(p, 1, bytes);
    ::munmap(p, bytes);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(state.settle_ms));
  return absl::OkStatus();
}

std::string Mb(double bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

int TensorsFor(int percent, int tensors) {
  return static_cast<int>((int64_t{percent} * tensors + 99) / 100);
}

// ---------------------------------------------------------------------------

Sample IncrementalBench::Ratio(const MemoryState& state, const std::string& x,
                               const std::string& base) const {
  Sample r;
  const Sample& a = Get(state, x);
  const Sample& b = Get(state, base);
  for (size_t i = 0; i < a.values.size() && i < b.values.size(); ++i) {
    r.Add(a.values[i] / b.values[i]);
  }
  return r;
}

std::string IncrementalBench::Secs(const MemoryState& state,
                                   const std::string& name) const {
  const Sample& x = Get(state, name);
  return absl::StrFormat("%.3f s (%.3f-%.3f)", x.Median(), x.Min(), x.Max());
}

std::string IncrementalBench::RatioText(const MemoryState& state,
                                        const std::string& x,
                                        const std::string& base) const {
  const Sample r = Ratio(state, x, base);
  return absl::StrFormat("%.3f (%.3f-%.3f)", r.Median(), r.Min(), r.Max());
}

absl::Status IncrementalBench::Fill() {
  Workspace* ws = session_.NodeWorkspace(kNode);
  const int digits = static_cast<int>(absl::StrCat(c_.tensors - 1).size());
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < c_.tensors; ++i) {
    names_.push_back(absl::StrFormat("w%0*d", digits, i));
    Tensor* t = ws->SetTensor(
        names_.back(),
        Tensor::Uninitialized(
            FLOAT, {static_cast<int64_t>(c_.tensor_bytes / sizeof(float))}));
    uint64_t* words = static_cast<uint64_t*>(t->raw_mutable_data());
    for (size_t w = 0; w < c_.tensor_bytes / 8; ++w) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      words[w] = x;
    }
    tensors_.push_back(t);
  }
  JG_ASSIGN_OR_RETURN(staging_, NewStagingBuffer());
  return absl::OkStatus();
}

void IncrementalBench::Modify(int count, int* next) {
  for (int k = 0; k < count; ++k) {
    Tensor* t = tensors_[(*next + k) % c_.tensors];
    float* data = t->mutable_data<float>();  // a fresh generation
    for (int64_t j = 0; j < t->numel(); j += 1024) {
      uint32_t bits;
      std::memcpy(&bits, &data[j], sizeof(bits));
      bits ^= 0x00A5A5A5u;
      std::memcpy(&data[j], &bits, sizeof(bits));
    }
  }
  *next = (*next + count) % c_.tensors;
}

std::vector<absl::string_view> IncrementalBench::Views(int first,
                                                       int count) const {
  std::vector<absl::string_view> views;
  for (int k = 0; k < count; ++k) {
    const Tensor* t = tensors_[(first + k) % c_.tensors];
    views.emplace_back(static_cast<const char*>(t->raw_data()), t->nbytes());
  }
  return views;
}

// ---------------------------------------------------------------------------

absl::Status IncrementalBench::Run() {
  JG_RETURN_IF_ERROR(Fill());
  std::string counts;
  for (int percent : c_.percents) {
    const int count = TensorsFor(percent, c_.tensors);
    absl::StrAppendFormat(&counts, "%s%d%% = %d tensors (%s)",
                          counts.empty() ? "" : ", ", percent, count,
                          Mb(static_cast<double>(count) * c_.tensor_bytes));
  }
  std::printf(
      "incremental_bench: dir %s\nworkspace: %d float tensors x %zu MiB = "
      "%s in node %s; %d runs + 1 warm-up\nmodified per incremental save "
      "(rounded up to whole tensors): %s\nmemory states:",
      c_.dir.c_str(), c_.tensors, c_.tensor_bytes >> 20,
      Mb(TotalBytes()).c_str(), kNode, c_.runs, counts.c_str());
  for (const MemoryState& state : c_.states) {
    if (state.churn_mib > 0) {
      std::printf(" %s (sync, touch and free %d MiB);", state.name.c_str(),
                  state.churn_mib);
    } else {
      std::printf(" %s (sync, sleep %d ms);", state.name.c_str(),
                  state.settle_ms);
    }
  }
  std::printf(
      "\n\nSAVES: SaveEpoch until durable and committed "
      "(incremental Checkpointer, full_every %d)\n",
      c_.full_every);
  std::fflush(stdout);

  if (c_.saves) {
    JG_RETURN_IF_ERROR(StartSaves());
    for (int run = 0; run <= c_.runs; ++run) {
      record_ = run > 0;
      JG_RETURN_IF_ERROR(SaveRun(run));
    }
    saver_->End();
    saver_.reset();
    for (const MemoryState& state : c_.states) ReportSaves(state);
    JG_RETURN_IF_ERROR(RemovePath(save_dir_));
    JG_RETURN_IF_ERROR(RemovePath(raw_path_));
  }
  if (c_.restores) {
    record_ = false;
    JG_RETURN_IF_ERROR(BuildChain());
    for (int run = 0; run <= c_.runs; ++run) {
      record_ = run > 0;
      JG_RETURN_IF_ERROR(RestoreRun(run));
    }
    for (const MemoryState& state : c_.states) ReportRestores(state);
    JG_RETURN_IF_ERROR(RemovePath(restore_dir_));
  }

  // The summary: of the states (and page-cache states), the worse median;
  // nan for what was not measured.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double bytes = c_.saves ? 0 : nan, save = c_.saves ? 0 : nan;
  double restore = c_.restores ? 0 : nan;
  for (const MemoryState& state : c_.states) {
    if (c_.saves) {
      bytes = std::max(bytes, Ratio(state, "5% wchar", "full wchar").Median());
      save = std::max(save, Ratio(state, "5%", "full").Median());
    }
    for (const char* cache : {"cold", "warm"}) {
      const std::string deep = absl::StrCat("deep ", cache);
      if (!c_.restores || !Has(state, deep)) continue;
      restore = std::max(
          restore, Ratio(state, deep, absl::StrCat("full ", cache)).Median());
    }
  }
  std::printf(
      "\nincremental_bench: bytes_vs_full_at_5pct=%.3f "
      "save_vs_full_at_5pct=%.3f restore_vs_full=%.3f\n",
      bytes, save, restore);
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status IncrementalBench::Cleanup() {
  absl::Status status = RemovePath(save_dir_);
  status.Update(RemovePath(restore_dir_));
  status.Update(RemovePath(raw_path_));
  return status;
}

namespace {

absl::StatusOr<Config> ConfigFromFlags() {
  Config c;
  c.dir = absl::GetFlag(FLAGS_dir);
  if (c.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    c.dir = JoinPath(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp",
                     "jobgraph_incremental_bench");
  }
  if (c.dir[0] != '/' && std::getenv("BUILD_WORKING_DIRECTORY") != nullptr) {
    c.dir = JoinPath(std::getenv("BUILD_WORKING_DIRECTORY"), c.dir);
  }
  c.runs = absl::GetFlag(FLAGS_runs);
  c.tensors = absl::GetFlag(FLAGS_tensors);
  const int tensor_mib = absl::GetFlag(FLAGS_tensor_mib);
  c.full_every = absl::GetFlag(FLAGS_full_every);
  c.chain = absl::GetFlag(FLAGS_chain);
  c.chain_percent = absl::GetFlag(FLAGS_chain_percent);
  if (c.runs < 1 || c.tensors < 1 || tensor_mib < 1 || c.chain < 1 ||
      c.chain_percent < 1 || c.chain_percent > 100) {
    return absl::InvalidArgumentError(
        "--runs, --tensors, --tensor_mib and --chain must be at least 1, "
        "--chain_percent in 1..100");
  }
  c.tensor_bytes = static_cast<size_t>(tensor_mib) << 20;
  for (const std::string& text : absl::GetFlag(FLAGS_percents)) {
    int percent = 0;
    if (!absl::SimpleAtoi(text, &percent) || percent < 1 || percent > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("--percents: '", text, "' is not in 1..100"));
    }
    c.percents.push_back(percent);
  }
  if (std::find(c.percents.begin(), c.percents.end(), 5) == c.percents.end()) {
    return absl::InvalidArgumentError(
        "--percents must include 5 (the summary line's figures)");
  }
  // The increments between two full saves (two states' worth when the full
  // save goes first in one state and last in the next) must stay below
  // full_every, or one of them would be a full save.
  if (2 * static_cast<int>(c.percents.size()) >= c.full_every) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--full_every must exceed twice the number of --percents (",
        2 * c.percents.size(), ")"));
  }
  c.states = {{"churn", absl::GetFlag(FLAGS_churn_mib), 0},
              {"settled", 0, absl::GetFlag(FLAGS_settle_ms)}};
  const std::string cache = absl::GetFlag(FLAGS_restore_cache);
  if (cache != "cold" && cache != "warm" && cache != "both") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--restore_cache is cold, warm or both, not '", cache, "'"));
  }
  c.restore_pairs = absl::GetFlag(FLAGS_restore_pairs);
  c.raw_each_percent = absl::GetFlag(FLAGS_raw_each_percent);
  if (c.restore_pairs < 1) {
    return absl::InvalidArgumentError("--restore_pairs must be at least 1");
  }
  c.saves = absl::GetFlag(FLAGS_saves);
  c.restores = absl::GetFlag(FLAGS_restores);
  c.restore_cold = cache != "warm";
  c.restore_warm = cache != "cold";
  return c;
}

absl::Status Main() {
  JG_ASSIGN_OR_RETURN(Config config, ConfigFromFlags());
  JG_ASSIGN_OR_RETURN(const bool exists, PathExists(config.dir));
  if (!exists) JG_RETURN_IF_ERROR(CreateDir(config.dir));
  // Each run deletes what it finds under its subdirectories, so two runs
  // sharing one would destroy each other's databases mid-write.
  const std::string lock_path = JoinPath(config.dir, "incremental_bench.lock");
  const int lock_fd =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return ErrnoStatus("open", lock_path);
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("another incremental_bench is using ", config.dir,
                     "; give this one another --dir"));
  }
  absl::Status status;
  {
    IncrementalBench bench(config);
    status = bench.Run();
    status.Update(bench.Cleanup());
  }
  ::unlink(lock_path.c_str());
  ::close(lock_fd);
  // The directory itself goes if the bench left it empty.
  ::rmdir(config.dir.c_str());
  return status;
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  jobgraph::bench::InitBench(argc, argv);
  return jobgraph::bench::ExitCode("incremental_bench",
                                   jobgraph::bench::Main());
}

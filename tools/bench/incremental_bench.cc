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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"
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
namespace {

constexpr char kNode[] = "trainer_0";
constexpr size_t kRawChunk = size_t{4} << 20;  // 4 MiB read()s

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

// A memory state before a timed write or restore (see the header).
struct MemoryState {
  std::string name;
  int churn_mib = 0;
  int settle_ms = 0;
};

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

// ---------------------------------------------------------------------------

struct Config {
  std::string dir;
  int runs = 3;
  int tensors = 256;
  size_t tensor_bytes = size_t{4} << 20;
  std::vector<int> percents;
  int full_every = 11;
  int chain = 10;
  int chain_percent = 5;
  std::vector<MemoryState> states;
  bool saves = true;
  bool restores = true;
  bool restore_cold = true;
  bool restore_warm = false;
  int restore_pairs = 2;
  bool raw_each_percent = false;
};

// Tensors that p% of `tensors` stands for: the smallest count at least p%.
int TensorsFor(int percent, int tensors) {
  return static_cast<int>((int64_t{percent} * tensors + 99) / 100);
}

class IncrementalBench {
 public:
  explicit IncrementalBench(Config config)
      : c_(std::move(config)),
        save_dir_(JoinPath(c_.dir, "saves")),
        restore_dir_(JoinPath(c_.dir, "restore")),
        raw_path_(JoinPath(c_.dir, "raw.bin")) {}

  absl::Status Run();
  // Deletes what the bench wrote under the directory.
  absl::Status Cleanup();

 private:
  // The figure `name` of memory state `state`; recorded only in measured
  // runs.
  void Add(const MemoryState& state, const std::string& name, double v) {
    if (record_) s_[absl::StrCat(state.name, "/", name)].Add(v);
  }
  const Sample& Get(const MemoryState& state, const std::string& name) const {
    return s_.at(absl::StrCat(state.name, "/", name));
  }
  bool Has(const MemoryState& state, const std::string& name) const {
    return s_.count(absl::StrCat(state.name, "/", name)) != 0;
  }
  // Per-run ratios x / base of one state.
  Sample Ratio(const MemoryState& state, const std::string& x,
               const std::string& base) const;
  std::string Secs(const MemoryState& state, const std::string& name) const;
  std::string RatioText(const MemoryState& state, const std::string& x,
                        const std::string& base) const;

  absl::Status Fill();
  // Modifies `count` tensors from the rotating position `*next`.
  void Modify(int count, int* next);
  std::vector<absl::string_view> Views(int first, int count) const;
  // Whether the raw writes of p%'s tensors are timed.
  bool HasRaw(int percent) const { return percent == 5 || c_.raw_each_percent; }
  double TotalBytes() const {
    return static_cast<double>(c_.tensors) * c_.tensor_bytes;
  }

  // Saves.
  absl::Status StartSaves();
  absl::Status TimeFullSave(const MemoryState& state);
  absl::Status TimeIncrementalSave(const MemoryState& state, int percent);
  absl::Status TimeSave(const MemoryState& state, const std::string& name,
                        bool full);
  absl::Status TimeRaw(const MemoryState& state, const std::string& name,
                       const std::vector<absl::string_view>& pieces,
                       bool direct);
  absl::Status SaveRun(int run);
  void ReportSaves(const MemoryState& state) const;

  // Restores.
  absl::Status BuildChain();
  absl::Status TimeRestore(const MemoryState& state, int64_t epoch,
                           const std::string& name, bool warm);
  absl::Status RestoreRun(int run);
  void ReportRestores(const MemoryState& state) const;

  const Config c_;
  const std::string save_dir_;
  const std::string restore_dir_;
  const std::string raw_path_;
  LocalSession session_;
  std::vector<std::string> names_;
  std::vector<Tensor*> tensors_;
  StagingBuffer staging_;
  bool record_ = false;
  std::map<std::string, Sample> s_;

  std::unique_ptr<Checkpointer> saver_;
  int64_t epoch_ = 0;      // the saves' last epoch
  int next_modified_ = 0;  // where the next modification starts
  // The tensors the last modification of each percentage changed.
  std::map<int, std::pair<int, int>> modified_;
};

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

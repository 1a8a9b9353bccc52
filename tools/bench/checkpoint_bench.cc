// checkpoint_bench: a checkpoint's save and load through the real path,
// against the raw disk of the same bytes, in one run. What it times, the
// baselines and the protocol: tools/bench/README.md.
//
// The last line is
//   checkpoint_bench: save_vs_raw=<r> load_vs_touched_read=<r>
//   load_vs_fresh_read=<r> small_save_s=<s> small_load_s=<s>
//   peak_rss_vs_size=<r>
// (medians of the large workload's runs; save_vs_raw: the save against the
// faster of the run's two raw writes, write + fsync and O_DIRECT with
// --raw_direct_depth writes in flight; load_vs_touched_read: the measured
// loads, whose tensors reuse the storage pool's buffers, against a read
// into a buffer already touched; load_vs_fresh_read: the process's first
// load, into fresh tensor memory, against a read into a fresh buffer; the
// peak RSS of a process's first save over the checkpoint's size, the worse
// of the two workloads).
//
// Run (--dir defaults to $TMPDIR/jobgraph_checkpoint_bench, else /tmp/...):
//   ./tools/bazel run -c opt //tools/bench:checkpoint_bench
//
// This file turns the flags into workloads and prints the summary; timing
// and reporting one workload is checkpoint_case.h's.

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/checkpoint_case.h"

ABSL_FLAG(std::string, dir, "",
          "Scratch directory (default: $TMPDIR/jobgraph_checkpoint_bench, or "
          "under /tmp; created if missing; relative paths are taken "
          "from where `bazel run` was started). Needs ~2.5x the large "
          "checkpoint free.");
ABSL_FLAG(int, runs, 4,
          "Measured runs (after one warm-up run); medians. Even, so that raw "
          "and checkpoint go first equally often.");
ABSL_FLAG(int, large_blobs, 64, "Large case: number of tensors.");
ABSL_FLAG(int, large_mib, 16, "Large case: MiB per tensor.");
ABSL_FLAG(int, small_blobs, 100000, "Small case: number of tensors.");
ABSL_FLAG(int, small_bytes, 64, "Small case: bytes per tensor (floats).");
ABSL_FLAG(bool, large, true, "Run the large case.");
ABSL_FLAG(bool, small, true, "Run the small case.");
ABSL_FLAG(int, settle_ms, 1000, "Sleep after sync before each timed write.");
ABSL_FLAG(int, churn_mib, 0,
          "Before each timed write, touch and free this much memory.");
ABSL_FLAG(bool, cold, false,
          "Time reads after drop_caches (needs root) instead of warm.");
ABSL_FLAG(std::string, variants, "",
          "Extra save rows through WriteCheckpointDb with other options: "
          "comma-separated, each key=value[/key=value...] with keys flush "
          "(0/1), wbs, mfs, batch, chunk (MiB).");
ABSL_FLAG(int, load_threads, 0,
          "Load's 'threads' argument: threads that read one database (0: "
          "Load's choice, by size and cores).");
ABSL_FLAG(int, raw_direct_depth, 4,
          "Writes in flight (threads) of the O_DIRECT raw write, the second "
          "save baseline beside write + fsync.");
ABSL_FLAG(bool, load_noverify, false,
          "Also time a Load with verify_checksums 0.");

namespace jobgraph {
namespace {

using bench::Check;
using bench::CheckpointCase;
using bench::CheckpointCaseOptions;
using bench::DropCaches;
using bench::ParseVariants;
using bench::RemoveIfExists;
using bench::Variant;

int Main() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = JoinPath(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp",
                   "jobgraph_checkpoint_bench");
  }
  if (dir[0] != '/' && std::getenv("BUILD_WORKING_DIRECTORY") != nullptr) {
    dir = JoinPath(std::getenv("BUILD_WORKING_DIRECTORY"), dir);
  }
  if (!PathExists(dir).value()) Check(CreateDir(dir));
  // Each run deletes what it finds under --dir, so two runs sharing one would
  // destroy each other's databases mid-write: the second one stops here.
  const std::string lock_path = JoinPath(dir, "checkpoint_bench.lock");
  const int lock_fd =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  PCHECK(lock_fd >= 0) << lock_path;
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    LOG(FATAL) << "another checkpoint_bench is using " << dir
               << "; give this one another --dir";
  }
  const int runs = absl::GetFlag(FLAGS_runs);
  CHECK_GE(runs, 1);
  const bool cold = absl::GetFlag(FLAGS_cold);
  if (cold && !DropCaches()) {
    LOG(FATAL) << "--cold needs to write /proc/sys/vm/drop_caches";
  }
  const std::vector<Variant> variants =
      ParseVariants(absl::GetFlag(FLAGS_variants));
  CheckpointCaseOptions options;
  options.churn_mib = absl::GetFlag(FLAGS_churn_mib);
  options.settle_ms = absl::GetFlag(FLAGS_settle_ms);
  options.cold = cold;
  options.load_threads = absl::GetFlag(FLAGS_load_threads);
  options.load_noverify = absl::GetFlag(FLAGS_load_noverify);
  options.raw_direct_depth = absl::GetFlag(FLAGS_raw_direct_depth);
  CHECK_GE(options.raw_direct_depth, 1) << "--raw_direct_depth";
  std::printf(
      "checkpoint_bench: dir %s; LevelDB with the Save op's defaults "
      "(write_buffer %zu MiB, max_file %zu MiB, flush on close %d)\n",
      dir.c_str(), LevelDbOptions().write_buffer_size >> 20,
      LevelDbOptions().max_file_size >> 20,
      LevelDbOptions().flush_memtable_on_close ? 1 : 0);

  double save = 0, load = 0, first_load = 0, small_save_s = 0, small_load_s = 0;
  double peak_rss = -1;
  if (absl::GetFlag(FLAGS_large)) {
    CheckpointCase large(
        "large", JoinPath(dir, "large"), absl::GetFlag(FLAGS_large_blobs),
        static_cast<size_t>(absl::GetFlag(FLAGS_large_mib)) << 20, &variants,
        options);
    RemoveIfExists(JoinPath(dir, "large"));
    Check(CreateDir(JoinPath(dir, "large")));
    large.Run(runs);
    save = large.SaveRatio();
    load = large.LoadRatio();
    first_load = large.FirstLoadVsFreshRead();
    peak_rss = std::max(peak_rss, large.PeakRssVsSize());
  }
  if (absl::GetFlag(FLAGS_small)) {
    CheckpointCase small("small", JoinPath(dir, "small"),
                         absl::GetFlag(FLAGS_small_blobs),
                         absl::GetFlag(FLAGS_small_bytes), &variants, options);
    RemoveIfExists(JoinPath(dir, "small"));
    Check(CreateDir(JoinPath(dir, "small")));
    small.Run(runs);
    small_save_s = small.SaveSeconds();
    small_load_s = small.LoadSeconds();
    peak_rss = std::max(peak_rss, small.PeakRssVsSize());
  }
  // peak_rss_vs_size is the worse of the two workloads (-1: unknown).
  std::printf(
      "\ncheckpoint_bench: save_vs_raw=%.2f load_vs_touched_read=%.2f "
      "load_vs_fresh_read=%.2f small_save_s=%.3f small_load_s=%.3f "
      "peak_rss_vs_size=%.2f\n",
      save, load, first_load, small_save_s, small_load_s, peak_rss);
  return 0;
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return jobgraph::Main();
}

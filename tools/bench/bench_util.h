// What the checkpoint benchmarks share: clocks, this process's CPU time,
// page faults, RSS and I/O counters from /proc, settling and dropping the
// page cache between timed runs, the raw write + fsync baseline, a sample of
// repeated measurements, and main()'s set-up and exit code.
//
// Benchmark code: failures of the environment are fatal (CHECK), since a
// figure measured after one would be wrong; the functions that return a
// status are for the benchmarks that must clean up (remove their
// directories) whatever fails. Functions are thread-compatible.

#ifndef JOBGRAPH_TOOLS_BENCH_BENCH_UTIL_H_
#define JOBGRAPH_TOOLS_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/ops/save_load_ops.h"

namespace jobgraph {
namespace bench {

using Clock = std::chrono::steady_clock;

// Wall seconds since `start`.
double Seconds(Clock::time_point start);
// User + system CPU seconds of this process (all threads), so that CPU cost
// can be compared even when other work on the machine skews wall times.
double CpuSeconds();
// Minor page faults of this process so far.
long MinorFaults();

// The first thing a benchmark's main() does: parses the flags and starts
// glog, logging warnings and worse to stderr only, so that stdout holds the
// benchmark's own lines.
void InitBench(int argc, char** argv);
// main()'s return for a benchmark that ended with `status`: 0 if it is OK,
// else 1 after printing "<bench>: <status>" on stderr.
int ExitCode(const char* bench, const absl::Status& status);

// CHECK-fails with the status unless it is OK.
void Check(const absl::Status& status);
// An internal error "<what> <path>: <strerror(errno)>", for a system call
// on `path` that failed.
absl::Status ErrnoStatus(absl::string_view what, const std::string& path);
// Removes `path` (recursively) if it exists.
absl::Status RemovePath(const std::string& path);
// The same, CHECK-failing on an error.
void RemoveIfExists(const std::string& path);
// Calls `visit` with every regular file under `path` (a file or a
// directory), recursively, and its size; stops at the first error.
absl::Status ForEachFile(
    const std::string& path,
    const std::function<absl::Status(const std::string&, int64_t)>& visit);

// Lets the disk and the page cache settle before a timed run: touches and
// frees `churn_mib` MiB (so every timed write starts with the same pool of
// just-freed pages), syncs, then sleeps `settle_ms`.
void Settle(int64_t churn_mib, int settle_ms);
// Drops the page cache (needs root); false if not permitted.
bool DropCaches();

// A field of /proc/self/status in kB ("VmRSS", "VmHWM"); -1 if absent.
long StatusKb(const char* field);
// A field of /proc/self/io ("wchar": bytes passed to write() and similar;
// "write_bytes": bytes this process caused to be sent to storage;
// "cancelled_write_bytes": of those, bytes whose page-cache pages were
// truncated or deleted before writeback); -1 if absent.
int64_t IoBytes(const char* field);
// Resets VmHWM to the current RSS (Linux >= 4.0). False if not permitted.
bool ResetPeakRss();

// Bytes of the regular files in `dir` (not recursive), and counts.
struct DirInfo {
  int64_t bytes = 0;
  int tables = 0;
  int logs = 0;
  int64_t log_bytes = 0;
};
DirInfo DescribeDir(const std::string& dir);

// Reads every regular file of `path` (a file or a directory) once, so that
// it is in the page cache; `scratch` is the read buffer.
void WarmFiles(const std::string& path, std::vector<char>* scratch);

// RawWrite's `staging`: 4 MiB aligned for O_DIRECT, from NewStagingBuffer.
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using StagingBuffer = std::unique_ptr<char, FreeDeleter>;
absl::StatusOr<StagingBuffer> NewStagingBuffer();

// The baseline a checkpoint's save is compared with: writes `pieces` to a
// new file at `path` in write()s of at most 4 MiB, then fsync, through the
// page cache, or with O_DIRECT from the pieces' own memory where it is
// page-aligned (else through `staging`, from NewStagingBuffer). Returns the
// seconds from open to close.
absl::StatusOr<double> RawWrite(const std::string& path,
                                const std::vector<absl::string_view>& pieces,
                                bool direct, char* staging);

// Repeated measurements of one figure.
struct Sample {
  std::vector<double> values;
  void Add(double v) { values.push_back(v); }
  bool empty() const { return values.empty(); }
  // The median (mean of the middle two for an even count).
  double Median() const;
  double Min() const;
  double Max() const;
};

// One save option set of checkpoint_bench --variants.
struct Variant {
  std::string label;
  CheckpointDbOptions options;
  LevelDbOptions leveldb;
};

// Parses "flush=0,wbs=64,wbs=128/flush=0,chunk=4": one Variant per
// comma-separated spec of '/'-separated key=value pairs (direct:
// LevelDbOptions::write_tables_directly; dio: LevelDbOptions::direct_io; flush:
// LevelDbOptions::flush_memtable_on_close; wbs, mfs: write buffer and table
// size in MiB; batch: writer_batch_bytes in MiB; chunk: chunk_bytes in MiB).
// A malformed spec is fatal.
std::vector<Variant> ParseVariants(const std::string& text);

}  // namespace bench
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_BENCH_BENCH_UTIL_H_

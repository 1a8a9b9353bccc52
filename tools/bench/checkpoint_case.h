// One workload of checkpoint_bench: a Workspace of float tensors whose save
// (Save op + commit, until durable) and load (Load op, CRCs checked) are
// timed against raw writes of the same bytes (write + fsync through the page
// cache, and O_DIRECT with several writes in flight) and a raw read, in
// alternating order over a warm-up and the measured runs, then reported
// (what and how: tools/bench/README.md). checkpoint_bench.cc turns its flags
// into the workloads and options here and prints the summary line from
// their medians.
//
// A CheckpointCase owns its tensors, its figures and what it writes under
// its directory (deleted when Run ends); the variants are borrowed.
// Benchmark code: failures are fatal (CHECK). Not thread-safe: one thread
// constructs and runs a case.

#ifndef JOBGRAPH_TOOLS_BENCH_CHECKPOINT_CASE_H_
#define JOBGRAPH_TOOLS_BENCH_CHECKPOINT_CASE_H_

#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"

namespace jobgraph {
namespace bench {

// What checkpoint_bench's flags set for every workload.
struct CheckpointCaseOptions {
  // Before each timed write: touch and free this many MiB, sync, then sleep
  // settle_ms (Settle).
  int churn_mib = 0;
  int settle_ms = 1000;
  // Time reads after drop_caches (needs root) instead of warm.
  bool cold = false;
  // The Load op's "threads" argument (0: Load's choice).
  int load_threads = 0;
  // Also time a Load with verify_checksums 0.
  bool load_noverify = false;
  // Writes in flight (threads) of the O_DIRECT raw write.
  int raw_direct_depth = 4;
};

class CheckpointCase {
 public:
  // `blobs` tensors of `blob_bytes` (a multiple of 4) each, filled with
  // incompressible bits now, before any timing. `dir` must exist when Run
  // starts; `variants` (extra save rows) must outlive the case.
  CheckpointCase(std::string label, std::string dir, int blobs,
                 size_t blob_bytes, const std::vector<Variant>* variants,
                 const CheckpointCaseOptions& options);

  // One warm-up run and `runs` measured ones, a line per measured run, then
  // the report of their medians.
  void Run(int runs);

  // Medians over the measured runs, once Run has returned.
  double SaveRatio() const;
  double LoadRatio() const;
  // The process's first load (into fresh tensor memory) against the median
  // raw read into a fresh buffer: raw time / load time.
  double FirstLoadVsFreshRead() const;
  double SaveSeconds() const;
  double LoadSeconds() const;
  // The peak RSS increase of the process's first save over the checkpoint's
  // size; -1 when VmHWM could not be reset.
  double PeakRssVsSize() const;

 private:
  double mb() const { return total_bytes_ / 1e6; }
  void Add(const std::string& name, double value);
  double Last(const std::string& name);
  Sample Ratio(const std::string& base, const std::string& x) const;

  // Each returns the write's seconds (also recorded when measuring).
  double TimeRawWrite();
  double TimeRawDirectWrite();
  void FreshCheckpointDir();
  NetDef SaveNet(int epoch) const;
  NetDef LoadNet(const std::string& db, bool verify) const;
  void Commit(int epoch, double save_seconds);
  void TimeSave(int epoch);
  void TimeVariant(const Variant& v, int epoch);
  int VariantIndex(const Variant& v) const;
  double ReadRaw(char* out);
  void Prepare(const std::string& db, bool cold);
  void TimeLoad(const std::string& db, bool verify, const std::string& name);
  void TimeReads(const std::string& db, bool cold);

  std::string Rate(const std::string& name) const;
  std::string Secs(const std::string& name) const;
  std::string RatioText(const std::string& base, const std::string& x) const;
  void Report() const;

  const std::string label_;
  const std::string dir_;
  const int blobs_;
  const size_t blob_bytes_;
  const size_t total_bytes_;
  const std::vector<Variant>* const variants_;
  const CheckpointCaseOptions options_;
  const std::string ckpt_dir_;
  const std::string raw_path_;
  Workspace source_;
  std::vector<std::string> names_;
  std::vector<absl::string_view> views_;
  std::string gathered_;
  // The small case's bytes in one 4 KiB-aligned buffer, for O_DIRECT.
  std::unique_ptr<char, void (*)(void*)> aligned_gathered_{nullptr, &std::free};
  std::vector<char> read_buffer_;
  std::vector<char> scratch_;
  bool record_ = false;
  std::map<std::string, Sample> s_;
  std::string layout_;
  double first_save_rss_increase_ = -1;
  double first_load_seconds_ = -1;
  long first_load_faults_ = 0;
};

}  // namespace bench
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_BENCH_CHECKPOINT_CASE_H_

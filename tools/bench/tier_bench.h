// The parts of tier_bench that its files share: the Config, the TierBench
// class, and the helpers that more than one of its files uses. The bench is
// described in the comment that opens tier_bench.cc ("the header" in the
// comments below); tier_bench.cc also holds the flags, the shared parts of
// the class, Run and main(); tier_bench_saves.cc, tier_bench_restores.cc,
// tier_bench_partner.cc and tier_bench_flush.cc hold its parts 1, 2, 2b and
// 3, and tier_bench_partner_worker.cc the ranks that part 2b starts.

#ifndef JOBGRAPH_TOOLS_BENCH_TIER_BENCH_H_
#define JOBGRAPH_TOOLS_BENCH_TIER_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "tools/bench/bench_util.h"

namespace jobgraph {
namespace bench {

inline constexpr char kNode[] = "trainer_0";

// Part 2b (see the header): the job's second node, the hosts its two ranks
// stand for (rank 0 runs kNode on kHostA, rank 1 kPartnerNode on kHostB),
// and the epoch it saves.
inline constexpr char kPartnerNode[] = "trainer_1";
inline constexpr char kHostA[] = "hA";
inline constexpr char kHostB[] = "hB";
inline constexpr int64_t kPartnerEpoch = 1;
// What the worker's lines on standard output start with (rank 0's figures,
// any rank's error), for the bench that reads them.
inline constexpr char kWorkerLine[] = "tier_partner ";

// "<median> (<min>-<max>)" of `s`, each printed with `format`.
std::string Range(const Sample& s, const char* format);

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

  int state_mib() const {
    return static_cast<int>((static_cast<size_t>(blobs) * blob_bytes) >> 20);
  }
};

// The state of the header in `ws`: c.blobs tensors of c.blob_bytes, named
// w00, w01, ..., the same bytes in every process. Appends the names and
// the tensors.
void FillState(const Config& c, Workspace* ws, std::vector<std::string>* names,
               std::vector<Tensor*>* tensors);
// Whether `restored` holds `tensors` under `names`, bit for bit.
absl::Status CheckSameTensors(const Workspace& restored,
                              const std::vector<std::string>& names,
                              const std::vector<Tensor*>& tensors);

// What EvictFromPageCache did.
struct Eviction {
  int files = 0;
  int64_t bytes = 0;
  // Whether 3 was written to /proc/sys/vm/drop_caches.
  bool dropped_caches = false;
  bool tried_drop_caches = false;
};
// Makes the next read of `path` (a file or a directory) come from the disk;
// see tier_bench_restores.cc.
absl::StatusOr<Eviction> EvictFromPageCache(const std::string& path);
std::string DescribeEviction(const Eviction& e);
// Empties the storage pool, so that the next tensors are fresh mappings
// (what a resuming process loads into), not buffers an earlier restore of
// this process freed.
void EmptyStoragePool();

// Part 2b's ranks, started by the bench under mpirun with --partner_worker:
// `shared_dir` is the job's shared directory, `local_pattern` its local
// tiers' (with %h). See tier_bench_partner_worker.cc.
absl::Status RunPartnerWorker(const Config& c, const std::string& shared_dir,
                              const std::string& local_pattern);

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
        overhead_local_(JoinPath(c_.local_dir, "overhead")),
        overhead_raw_(JoinPath(c_.shared_dir, "overhead.raw")),
        partner_shared_(JoinPath(c_.shared_dir, "partner")),
        partner_local_(JoinPath(c_.local_dir, "partner")) {}

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
  // Removes parts 1 and 2's checkpoints and raw file, which the later
  // parts do not read: their disk writeback and memory are not to weigh
  // on them.
  absl::Status RemoveSaveFiles();
  // Part 2b: runs the worker under mpirun and reads its figures into s_;
  // sets partner_ratio_.
  absl::Status PartnerRestores();
  // Part 2b's end when it cannot run: says why (`reason`, then `details`,
  // one a line), and sets partner_ratio_.
  void PartnerNotAvailable(const std::string& reason,
                           const std::vector<std::string>& details);
  absl::Status FlushOverhead();
  // Part 3's settings (see the header): the background flush on, off, and
  // off with the bench's raw copy of each epoch in its place (the floor),
  // without and with a CRC-32C of what it copies.
  enum class Flush { kOn, kOff, kRawCopy, kCheckedCopy };
  struct EpochRun {
    Sample epoch_s;        // epochs 2..N: compute + save
    Sample compute_s;      // epochs 2..N
    Sample compute_cpu_s;  // the job thread's CPU time in those computes
    Sample save_s;         // epochs 2..N
    // CheckpointStats::commit_micros of those saves: the local commit,
    // which would show a wait on anything the flush holds.
    Sample commit_s;
    // Saves of epochs 2..N that began before the previous epoch's flush
    // was committed in the shared directory; with the raw copy, that came
    // while the previous epoch's copy still ran (and waited for it).
    int saves_beside_flush = 0;
    // The raw copy: each epoch's copy, and the waits for the previous
    // epoch's copy before the saves of epochs 2..N (off the clock).
    Sample copy_s;
    Sample wait_s;
    double end_s = 0;  // End(): the end-of-run flush
    double cpu_s = 0;  // process CPU over epochs 2..N
    std::string flushed;
  };
  absl::StatusOr<EpochRun> RunEpochs(Flush flush, int reps);

  const Config c_;
  const std::string only_dir_, tiered_dir_, tier_dir_, aside_dir_;
  const std::string raw_shared_, raw_local_;
  const std::string overhead_shared_, overhead_local_;
  // Part 3's raw copies: beside overhead_shared_, on the same disk.
  const std::string overhead_raw_;
  const std::string partner_shared_, partner_local_;

  LocalSession session_;
  std::vector<Tensor*> tensors_;
  std::vector<std::string> names_;
  // Part 1's raw writes' buffer, and part 3's raw copies' (one copy at a
  // time, on its thread).
  StagingBuffer staging_;
  // Figures by name, one value per measured run.
  std::map<std::string, Sample> s_;

  // Part 1's Checkpointers and their last epochs.
  std::unique_ptr<Checkpointer> only_, tiered_;
  int64_t only_epoch_ = 0, tiered_epoch_ = 0;
  double flush_s_ = 0;  // part 1's median flush of one epoch
  // Part 2b's figure for the last line: the ratio, or "n/a".
  std::string partner_ratio_ = "n/a";
};

}  // namespace bench
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_BENCH_TIER_BENCH_H_

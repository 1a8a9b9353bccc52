// The parts of incremental_bench that its files share: the memory states,
// the Config, the IncrementalBench class, and the helpers that more than one
// of its files uses. The bench is described in the comment that opens
// incremental_bench.cc ("the header" in the comments below);
// incremental_bench.cc also holds the flags, the shared parts of the class,
// Run and main(); incremental_bench_saves.cc and
// incremental_bench_restores.cc hold its saves and its restores.

#ifndef JOBGRAPH_TOOLS_BENCH_INCREMENTAL_BENCH_H_
#define JOBGRAPH_TOOLS_BENCH_INCREMENTAL_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "tools/bench/bench_util.h"

namespace jobgraph {
namespace bench {

inline constexpr char kNode[] = "trainer_0";

// A memory state before a timed write or restore (see the header).
struct MemoryState {
  std::string name;
  int churn_mib = 0;
  int settle_ms = 0;
};

// Puts the machine in memory state `state`, right before a timed write or
// restore.
absl::Status Settle(const MemoryState& state);

// `bytes` as "<x.x> MB".
std::string Mb(double bytes);

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
int TensorsFor(int percent, int tensors);

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

}  // namespace bench
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_BENCH_INCREMENTAL_BENCH_H_

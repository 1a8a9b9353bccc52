// Local tiers (CheckpointOptions::local_directory) as `ckpt flush` and
// `ckpt list --local` see them: which job a local tier holds, and which of
// its committed epochs continue the shared directory's history, exactly as
// a resume counts them (MergeTierLogs, checkpoint/tier/tier_log.h).
//
// Functions and plain values; thread-compatible.

#ifndef JOBGRAPH_TOOLS_CKPT_TIERS_H_
#define JOBGRAPH_TOOLS_CKPT_TIERS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/tier/tier_log.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace ckpt {

// The nodes of the job whose checkpoints a local tier holds: those that the
// newest (last) entry of its commit log lists. Empty when it lists none.
std::vector<std::string> LocalTierJob(const CommitLog& log);

// A local tier's commit log merged with the shared directory's, for the
// job of `nodes`.
struct LocalTierView {
  std::string local_dir;
  TieredLog merged;

  // Epochs of the job that the local log lists but that a resume does not
  // count (they do not continue the shared history), with the reason;
  // increasing, one group per reason.
  struct Ignored {
    std::vector<int64_t> epochs;
    std::string reason;
  };
  std::vector<Ignored> ignored;

  // Epochs of which the local tier holds one host's part (a job on several
  // hosts, checkpoint/FORMAT.md 3.5: the nodes in the entry's held_node)
  // that continue the shared history as Holds() says for whole copies. No
  // run in one process reads them and `ckpt flush` does not take them (the
  // other hosts' parts are elsewhere); `ckpt list` shows them.
  std::set<int64_t> host_parts;

  // Whether the local tier holds a copy of `epoch` that a resume counts:
  // the same commit as the shared directory's, or one that continues it.
  bool Holds(int64_t epoch) const;
  // The reason `epoch` of the local log is ignored; nullopt when it is not.
  std::optional<std::string> IgnoredBecause(int64_t epoch) const;
};

// Merges the logs (MergeTierLogs) and explains what it ignores. A tier
// whose `read` is nullopt has no commit log.
LocalTierView ViewLocalTier(const TierLogRead& local, const TierLogRead& shared,
                            const std::vector<std::string>& nodes);

// "epochs 8, 9 ignored (reason)" for every group, joined by "; ".
std::string IgnoredText(const LocalTierView& view);

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_TIERS_H_

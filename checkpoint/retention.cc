#include "checkpoint/retention.h"

#include <utility>

#include "checkpoint/background_delete.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/commit_log.h"
#include "checkpoint/failpoint.h"
#include "checkpoint/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<std::vector<int64_t>> ApplyRetention(
    const std::string& dir, const RetentionOptions& retention,
    bool background) {
  std::vector<int64_t> dropped;
  if (retention.keep_last <= 0) return dropped;
  JG_ASSIGN_OR_RETURN(CommitLog log, ReadCommitLog(dir));
  const int n = log.epoch_size();
  std::vector<CommittedEpoch> kept;
  std::vector<CommittedEpoch> removed;
  for (int i = 0; i < n; ++i) {
    const CommittedEpoch& e = log.epoch(i);
    const bool newest = i == n - 1;
    const bool recent = i >= n - retention.keep_last;
    const bool milestone =
        retention.keep_every > 0 && e.epoch() % retention.keep_every == 0;
    (newest || recent || milestone ? kept : removed).push_back(e);
  }
  if (removed.empty()) return dropped;
  log.clear_epoch();
  for (CommittedEpoch& e : kept) *log.add_epoch() = std::move(e);
  JG_RETURN_IF_ERROR(WriteCommitLog(dir, log, /*is_commit=*/false));
  JG_RETURN_IF_ERROR(Failpoint("retention.after_manifest"));
  bool first = true;
  for (const CommittedEpoch& e : removed) {
    for (const std::string& node : e.node()) {
      const std::string path = CheckpointDbPath(dir, node, e.epoch());
      JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
      if (!exists) continue;
      if (background) {
        JG_RETURN_IF_ERROR(DeleteInBackground(path));
      } else {
        JG_RETURN_IF_ERROR(RemoveRecursively(path));
      }
      if (first) {
        first = false;
        JG_RETURN_IF_ERROR(Failpoint("retention.mid_delete"));
      }
    }
    dropped.push_back(e.epoch());
  }
  return dropped;
}

}  // namespace jobgraph

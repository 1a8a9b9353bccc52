#include "checkpoint/commit/retention.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {

std::vector<CommittedEpoch> RetireEpochs(CommitLog& log,
                                         const RetentionOptions& retention,
                                         absl::Span<const std::string> nodes,
                                         absl::Span<const int64_t> pinned) {
  if (retention.keep_last <= 0) return {};
  // Only the job's own entries count and go; others' stay as they are.
  const JobNodes job(nodes);
  std::vector<int> own;
  for (int i = 0; i < log.epoch_size(); ++i) {
    if (job.Owns(log.epoch(i))) own.push_back(i);
  }
  const int n = static_cast<int>(own.size());
  // While the newest entry is a mid-group preemption checkpoint, the
  // newest ordinary epoch stays too: the fallback if the preemption
  // checkpoint cannot be continued (damage, a changed plan).
  int newest_ordinary = -1;
  for (int k = n - 1; k >= 0; --k) {
    const CommittedEpoch& e = log.epoch(own[k]);
    if (!e.has_preemption() || e.preemption().group() == JOB_GROUP_DOWNLOAD) {
      newest_ordinary = k;
      break;
    }
  }
  absl::flat_hash_set<int64_t> keep;
  std::vector<int64_t> to_visit(pinned.begin(), pinned.end());
  for (int k = 0; k < n; ++k) {
    const CommittedEpoch& e = log.epoch(own[k]);
    const bool newest = k == n - 1 || k == newest_ordinary;
    const bool recent = k >= n - retention.keep_last;
    const bool milestone =
        retention.keep_every > 0 && e.epoch() % retention.keep_every == 0;
    if (newest || recent || milestone) to_visit.push_back(e.epoch());
  }
  // A kept epoch keeps the epochs whose databases it reads from, and theirs
  // in turn: every epoch the log lists stays restorable.
  absl::flat_hash_map<int64_t, const CommittedEpoch*> by_epoch;
  for (int i : own) by_epoch[log.epoch(i).epoch()] = &log.epoch(i);
  while (!to_visit.empty()) {
    const int64_t epoch = to_visit.back();
    to_visit.pop_back();
    if (!keep.insert(epoch).second) continue;
    auto it = by_epoch.find(epoch);
    if (it == by_epoch.end()) continue;
    for (int64_t referenced : it->second->referenced_epoch()) {
      to_visit.push_back(referenced);
    }
  }
  return TakeEntries(log, [&](const CommittedEpoch& e) {
    return job.Owns(e) && !keep.contains(e.epoch());
  });
}

absl::StatusOr<std::vector<int64_t>> DeleteRetired(
    const std::string& dir, const std::vector<CommittedEpoch>& retired,
    bool background) {
  std::vector<int64_t> dropped;
  if (retired.empty()) return dropped;
  JG_RETURN_IF_ERROR(Failpoint("retention.after_commit_log"));
  bool first = true;
  for (const CommittedEpoch& e : retired) {
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

absl::StatusOr<std::vector<int64_t>> ApplyRetention(
    const std::string& dir, const RetentionOptions& retention,
    absl::Span<const std::string> nodes, bool background) {
  std::vector<CommittedEpoch> retired;
  if (retention.keep_last <= 0) return std::vector<int64_t>();
  JG_RETURN_IF_ERROR(UpdateCommitLog(
      dir, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        retired = RetireEpochs(log, retention, nodes);
        return !retired.empty();
      }));
  return DeleteRetired(dir, retired, background);
}

}  // namespace jobgraph

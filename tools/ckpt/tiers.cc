#include "tools/ckpt/tiers.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/commit_log.h"
#include "tools/ckpt/references.h"

namespace jobgraph {
namespace ckpt {
std::vector<std::string> LocalTierJob(const CommitLog& log) {
  if (log.epoch_size() == 0) return {};
  const CommittedEpoch& newest = log.epoch(log.epoch_size() - 1);
  return std::vector<std::string>(newest.node().begin(), newest.node().end());
}

bool LocalTierView::Holds(int64_t epoch) const {
  auto it = merged.copies.find(epoch);
  if (it == merged.copies.end()) return false;
  return std::find(it->second.begin(), it->second.end(), local_dir) !=
         it->second.end();
}

std::optional<std::string> LocalTierView::IgnoredBecause(int64_t epoch) const {
  for (const Ignored& group : ignored) {
    if (std::find(group.epochs.begin(), group.epochs.end(), epoch) !=
        group.epochs.end()) {
      return group.reason;
    }
  }
  return std::nullopt;
}

LocalTierView ViewLocalTier(const TierLogRead& local, const TierLogRead& shared,
                            const std::vector<std::string>& nodes) {
  LocalTierView view;
  view.local_dir = local.dir;
  view.merged = MergeTierLogs(local, shared, nodes);
  const std::map<int64_t, const CommittedEpoch*> local_entries =
      JobEntries(local.read, nodes);
  const std::map<int64_t, const CommittedEpoch*> shared_entries =
      JobEntries(shared.read, nodes);
  // The same test as MergeTierLogs: the local tier continues the shared
  // history when it holds the shared newest epoch as the same commit; an
  // empty shared history is continued by any.
  const CommittedEpoch* newest =
      shared_entries.empty() ? nullptr : shared_entries.rbegin()->second;
  auto at_newest = newest == nullptr ? local_entries.end()
                                     : local_entries.find(newest->epoch());
  const bool holds_newest = at_newest != local_entries.end();
  const bool continues =
      newest == nullptr ||
      (holds_newest && SameCommit(*at_newest->second, *newest));
  for (const auto& [epoch, entry] : local_entries) {
    if (view.Holds(epoch)) continue;
    auto shared_it = shared_entries.find(epoch);
    const bool in_shared = shared_it != shared_entries.end();
    if (IsHostPart(*entry, nodes) &&
        (in_shared ? SameCommit(*entry, *shared_it->second) : continues)) {
      view.host_parts.insert(epoch);
      continue;
    }
    // Without a shared history MergeTierLogs counts every whole copy.
    if (newest == nullptr) continue;
    std::string reason;
    if (!continues && holds_newest) {
      reason = absl::StrCat("the shared directory's newest epoch ",
                            newest->epoch(), " is another commit");
    } else if (!continues) {
      reason = absl::StrCat(
          "the local tier does not hold the shared directory's newest epoch ",
          newest->epoch());
    } else {
      // A local tier that continues the shared history counts every epoch
      // but one the shared log lists as another commit.
      reason = "the shared directory holds another commit of the same epoch";
    }
    auto group = std::find_if(
        view.ignored.begin(), view.ignored.end(),
        [&](const LocalTierView::Ignored& g) { return g.reason == reason; });
    if (group == view.ignored.end()) {
      view.ignored.push_back({{}, std::move(reason)});
      group = view.ignored.end() - 1;
    }
    group->epochs.push_back(epoch);
  }
  return view;
}

std::string IgnoredText(const LocalTierView& view) {
  std::vector<std::string> groups;
  for (const LocalTierView::Ignored& group : view.ignored) {
    groups.push_back(absl::StrCat(EpochsText(group.epochs), " ignored (",
                                  group.reason, ")"));
  }
  return absl::StrJoin(groups, "; ");
}

}  // namespace ckpt
}  // namespace jobgraph

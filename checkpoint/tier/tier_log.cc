#include "checkpoint/tier/tier_log.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace jobgraph {
namespace {

std::string EpochList(const std::vector<int64_t>& epochs) {
  std::string out;
  for (int64_t epoch : epochs) {
    if (!out.empty()) out += ", ";
    out += std::to_string(epoch);
  }
  return out;
}

}  // namespace

std::map<int64_t, const CommittedEpoch*> JobEntries(
    const std::optional<CommitLogRead>& read,
    absl::Span<const std::string> nodes) {
  std::map<int64_t, const CommittedEpoch*> entries;
  if (!read.has_value()) return entries;
  const JobNodes own(nodes);
  for (const CommittedEpoch& entry : read->log.epoch()) {
    if (own.Owns(entry)) entries[entry.epoch()] = &entry;
  }
  return entries;
}

bool SameCommit(const CommittedEpoch& a, const CommittedEpoch& b) {
  return a.epoch() == b.epoch() &&
         a.committed_unix_micros() == b.committed_unix_micros() &&
         a.total_bytes() == b.total_bytes() &&
         std::equal(a.node().begin(), a.node().end(), b.node().begin(),
                    b.node().end());
}

bool IsHostPart(const CommittedEpoch& entry,
                absl::Span<const std::string> nodes) {
  return !entry.held_node().empty() &&
         !std::all_of(nodes.begin(), nodes.end(), [&](const std::string& n) {
           return std::find(entry.held_node().begin(), entry.held_node().end(),
                            n) != entry.held_node().end();
         });
}

TieredLog MergeTierLogs(const TierLogRead& local, const TierLogRead& shared,
                        absl::Span<const std::string> nodes) {
  const std::map<int64_t, const CommittedEpoch*> local_entries =
      JobEntries(local.read, nodes);
  const std::map<int64_t, const CommittedEpoch*> shared_entries =
      JobEntries(shared.read, nodes);
  TieredLog merged;
  if (shared.read.has_value()) {
    merged.log.log.set_format_version(shared.read->log.format_version());
    merged.log.log.set_db_type(shared.read->log.db_type());
    merged.log.damage = shared.read->damage;
  } else if (local.read.has_value()) {
    merged.log.log.set_format_version(local.read->log.format_version());
    merged.log.log.set_db_type(local.read->log.db_type());
  }
  if (local.read.has_value() && !local.read->damage.ok()) {
    LOG(WARNING) << "the local tier's commit log is damaged, using its "
                    "previous copy: "
                 << local.read->damage.message();
    if (merged.log.damage.ok()) merged.log.damage = local.read->damage;
  }

  // Whether the local tier continues the shared history (see the header).
  bool continues = shared_entries.empty();
  if (!continues) {
    const CommittedEpoch& newest = *shared_entries.rbegin()->second;
    auto it = local_entries.find(newest.epoch());
    continues = it != local_entries.end() && SameCommit(*it->second, newest);
  }
  merged.local_continues = continues;

  std::map<int64_t, const CommittedEpoch*> chosen;
  for (const auto& [epoch, entry] : shared_entries) {
    chosen[epoch] = entry;
    merged.copies[epoch];
  }
  std::vector<int64_t> partial;
  for (const auto& [epoch, entry] : local_entries) {
    // One host's part of a job on several hosts (host_tiers.h) is no copy
    // of the epoch for a run in one process; nor is it stale.
    if (IsHostPart(*entry, nodes)) {
      partial.push_back(epoch);
      continue;
    }
    auto shared_it = shared_entries.find(epoch);
    const bool in_shared = shared_it != shared_entries.end();
    const bool same = in_shared && SameCommit(*entry, *shared_it->second);
    if (!same && (in_shared || !continues)) {
      merged.ignored_local.push_back(epoch);
      continue;
    }
    chosen[epoch] = entry;
    merged.copies[epoch].push_back(local.dir);
  }
  if (!partial.empty()) {
    LOG(WARNING) << "the local tier " << local.dir << " holds only some nodes' "
                 << "databases of epochs " << EpochList(partial)
                 << " (one host's part of a job on several hosts): a run in "
                 << "one process does not read them there";
  }
  if (!merged.ignored_local.empty()) {
    LOG(WARNING) << "ignoring epochs " << EpochList(merged.ignored_local)
                 << " of the local tier " << local.dir << ": they are not "
                 << "the history of the shared directory " << shared.dir
                 << (continues ? ""
                               : " (the local tier does not hold its "
                                 "newest epoch as the same commit)");
  }
  for (const auto& [epoch, entry] : shared_entries) {
    if (SameCommit(*chosen[epoch], *entry)) {
      merged.copies[epoch].push_back(shared.dir);
    }
  }
  for (const auto& [epoch, entry] : chosen) {
    *merged.log.log.add_epoch() = *entry;
  }
  return merged;
}

}  // namespace jobgraph

#include "checkpoint/tier/host_tiers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace jobgraph {
HostMap MakeHostMap(absl::Span<const std::string> host_of_rank) {
  HostMap map;
  for (size_t rank = 0; rank < host_of_rank.size(); ++rank) {
    auto it = std::find(map.hosts.begin(), map.hosts.end(), host_of_rank[rank]);
    if (it == map.hosts.end()) {
      map.hosts.push_back(host_of_rank[rank]);
      map.leader.push_back(static_cast<int>(rank));
      it = map.hosts.end() - 1;
    }
    map.host_of_rank.push_back(static_cast<int>(it - map.hosts.begin()));
  }
  return map;
}

bool HostTieredLog::InShared(int64_t epoch) const {
  return std::find(in_shared.begin(), in_shared.end(), epoch) !=
         in_shared.end();
}

HostTieredLog MergeHostLogs(absl::Span<const HostLogRead> hosts,
                            const TierLogRead& shared,
                            absl::Span<const std::string> nodes) {
  const std::map<int64_t, const CommittedEpoch*> shared_entries =
      JobEntries(shared.read, nodes);
  HostTieredLog merged;
  bool have_header = shared.read.has_value();
  if (shared.read.has_value()) {
    merged.log.log.set_format_version(shared.read->log.format_version());
    merged.log.log.set_db_type(shared.read->log.db_type());
    merged.log.damage = shared.read->damage;
  }
  const CommittedEpoch* shared_newest =
      shared_entries.empty() ? nullptr : shared_entries.rbegin()->second;
  if (shared_newest != nullptr) merged.newest_listed = shared_newest->epoch();

  // Per epoch, the entries that count: (host index, entry).
  std::map<int64_t, std::vector<std::pair<size_t, const CommittedEpoch*>>>
      counted;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const HostLogRead& host = hosts[h];
    if (!host.read.has_value()) continue;
    if (!have_header) {
      merged.log.log.set_format_version(host.read->log.format_version());
      merged.log.log.set_db_type(host.read->log.db_type());
      have_header = true;
    }
    const std::map<int64_t, const CommittedEpoch*> entries =
        JobEntries(host.read, nodes);
    bool continues = shared_newest == nullptr;
    if (!continues) {
      auto it = entries.find(shared_newest->epoch());
      continues =
          it != entries.end() && SameCommit(*it->second, *shared_newest);
    }
    for (const auto& [epoch, entry] : entries) {
      auto in_shared = shared_entries.find(epoch);
      const bool same = in_shared != shared_entries.end() &&
                        SameCommit(*entry, *in_shared->second);
      if (!same && (in_shared != shared_entries.end() || !continues)) {
        merged.ignored[host.host].push_back(epoch);
        continue;
      }
      counted[epoch].push_back({h, entry});
      merged.newest_listed =
          std::max(merged.newest_listed.value_or(epoch), epoch);
    }
  }

  std::map<int64_t, const CommittedEpoch*> epochs;
  for (const auto& [epoch, entry] : shared_entries) epochs[epoch] = entry;
  for (const auto& [epoch, entries] : counted) {
    if (epochs.count(epoch) > 0) continue;
    // Not in the shared directory: the newest commit among the hosts'.
    const CommittedEpoch* newest = nullptr;
    for (const auto& [h, entry] : entries) {
      if (newest == nullptr ||
          entry->committed_unix_micros() > newest->committed_unix_micros()) {
        newest = entry;
      }
    }
    epochs[epoch] = newest;
  }

  // One history's commits are made in epoch order: an epoch that only the
  // hosts list, committed before an earlier chosen epoch, belongs to a
  // history that a later run abandoned (it resumed from further back, or
  // from scratch, without this host, and died before its first flush).
  std::optional<int64_t> newest_time;
  for (const auto& [epoch, commit] : epochs) {
    const bool in_shared = shared_entries.count(epoch) > 0;
    if (!in_shared && newest_time.has_value() &&
        commit->committed_unix_micros() < *newest_time) {
      for (const auto& [h, entry] : counted[epoch]) {
        merged.ignored[hosts[h].host].push_back(epoch);
      }
      continue;
    }
    std::map<std::string, std::vector<std::string>> holders;
    CommittedEpoch chosen = *commit;
    for (const auto& [h, entry] : counted[epoch]) {
      if (!SameCommit(*entry, *commit)) {
        merged.ignored[hosts[h].host].push_back(epoch);
        continue;
      }
      // The mark after the last epoch reaches the shared log only with the
      // next flush: a host's mark wins, as the local tier's does
      // (tier_log.h).
      if (!chosen.has_preemption() && entry->has_preemption()) {
        *chosen.mutable_preemption() = entry->preemption();
      }
      if (entry->held_node().empty()) {
        for (const std::string& node : nodes) {
          holders[node].push_back(hosts[h].host);
        }
      } else {
        for (const std::string& node : entry->held_node()) {
          if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
            holders[node].push_back(hosts[h].host);
          }
        }
      }
    }
    if (!in_shared) {
      std::vector<std::string> missing;
      for (const std::string& node : nodes) {
        if (holders.count(node) == 0) missing.push_back(node);
      }
      if (!missing.empty()) {
        // Perhaps only for now: the hosts that hold the rest may come back.
        merged.incomplete[epoch] = std::move(missing);
        continue;
      }
    }
    if (in_shared) merged.in_shared.push_back(epoch);
    newest_time =
        std::max(newest_time.value_or(commit->committed_unix_micros()),
                 commit->committed_unix_micros());
    merged.holders[epoch] = std::move(holders);
    chosen.clear_held_node();
    chosen.clear_host();
    *merged.log.log.add_epoch() = std::move(chosen);
  }
  for (auto& [host, ignored] : merged.ignored) {
    std::sort(ignored.begin(), ignored.end());
    ignored.erase(std::unique(ignored.begin(), ignored.end()), ignored.end());
  }
  return merged;
}

}  // namespace jobgraph

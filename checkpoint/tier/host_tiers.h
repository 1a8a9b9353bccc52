// The local tiers of a job whose ranks run on several hosts (MpiSession):
// which rank speaks for each host, which host keeps whose partner copies,
// and the hosts' commit logs and the shared one seen as one.
//
// Each host has one local tier (CheckpointOptions::local_directory, %h
// expanded), written by every rank on it. The host's leader (its lowest
// rank) commits the host's commit log; an entry there lists every node of
// the job, as any entry does, and in CommittedEpoch.held_node the nodes
// whose databases the host holds: those its ranks run, and the partner
// copies of the previous host's (partner = the next host in rank order,
// cyclically). A host commits an epoch only after every node's database is
// durable on two hosts.
//
// Which hosts' epochs count follows tier_log.h, host by host: the shared
// log is the job's history; a host's epochs count when its log holds the
// shared log's newest epoch as the same commit (or the shared log lists no
// epoch of the job); otherwise only its copies of the shared commits do.
// An epoch is a candidate when every node's database is held by some host
// whose entry counts, or the shared log lists it. Where counted entries of
// one epoch are different commits (a host that missed a later run), the
// newest commit is the epoch's. One history's commits are made in epoch
// order: an epoch only the hosts list whose commit is older than an
// earlier chosen epoch's belongs to an abandoned history (a run resumed
// from further back, or from scratch, without this host, and died before
// its first flush) and is stale.
//
// Functions and plain structs; thread-compatible.

#ifndef JOBGRAPH_CHECKPOINT_TIER_HOST_TIERS_H_
#define JOBGRAPH_CHECKPOINT_TIER_HOST_TIERS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/tier/tier_log.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The hosts of a job's ranks.
struct HostMap {
  // Distinct host names, in the order of their lowest rank.
  std::vector<std::string> hosts;
  // Per rank: its host's index in `hosts`.
  std::vector<int> host_of_rank;
  // Per host: its lowest rank, which commits the host's log.
  std::vector<int> leader;

  int num_hosts() const { return static_cast<int>(hosts.size()); }
  bool IsLeader(int rank) const { return leader[host_of_rank[rank]] == rank; }
  // The host that keeps copies of `host`'s databases; -1 with one host.
  int PartnerOf(int host) const {
    return num_hosts() < 2 ? -1 : (host + 1) % num_hosts();
  }
  // The host whose databases `host` keeps copies of; -1 with one host.
  int PartnerSourceOf(int host) const {
    return num_hosts() < 2 ? -1 : (host + num_hosts() - 1) % num_hosts();
  }
};

// The map of ranks whose host names are `host_of_rank` (by rank).
HostMap MakeHostMap(absl::Span<const std::string> host_of_rank);

// One host's local commit log as read (nullopt: none, or unreadable).
struct HostLogRead {
  std::string host;
  std::optional<CommitLogRead> read;
};

struct HostTieredLog {
  // The job's epochs a resume may choose, increasing, one entry each (the
  // epoch's commit; held_node cleared); `damage` is the shared log's.
  CommitLogRead log;
  // For each epoch of `log`, for each node (by database name): the hosts
  // (by name, in host order) whose local tier holds its database.
  std::map<int64_t, std::map<std::string, std::vector<std::string>>> holders;
  // The epochs of `log` that the shared directory holds as that commit.
  std::vector<int64_t> in_shared;
  // Per host: its job's epochs that are not the job's history (stale: the
  // host does not continue the shared history, another commit of the
  // epoch won, or it was committed before an earlier epoch's commit).
  std::map<std::string, std::vector<int64_t>> ignored;
  // Epochs of the history that no host holds every node's database of,
  // and the shared directory does not have: the nodes without a copy.
  // (The hosts that hold them may be missing from this run.)
  std::map<int64_t, std::vector<std::string>> incomplete;
  // The newest epoch of the job any host's log or the shared log counts,
  // complete or not: a run that resumes from an older one must anchor its
  // history in the shared directory before it relies on a local tier.
  std::optional<int64_t> newest_listed;

  bool InShared(int64_t epoch) const;
};

// Merges the hosts' logs and the shared one for the job of `nodes` (see
// above).
HostTieredLog MergeHostLogs(absl::Span<const HostLogRead> hosts,
                            const TierLogRead& shared,
                            absl::Span<const std::string> nodes);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_TIER_HOST_TIERS_H_

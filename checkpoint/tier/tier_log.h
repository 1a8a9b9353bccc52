// The commit logs of a job's two tiers (the local one and the shared
// `directory`, CheckpointOptions) seen as one: which committed epochs a
// resume may choose, and where it reads each.
//
// The shared log is the job's history; a local tier may hold a copy of
// some of its epochs and epochs that were not flushed yet. A local tier
// can also be stale: a run on this host committed epochs locally, the job
// moved to another host and went on from the shared directory, and came
// back. So the local tier's epochs count only where they continue the
// shared history: when the local log lists the shared log's newest epoch
// as the same commit (CommittedEpoch.committed_unix_micros, which a flush
// copies), or when the shared log lists no epoch of the job. Then every
// local epoch is a candidate (but one the shared log lists as another
// commit), and read from the local tier first; otherwise only the local
// copies of the shared log's own commits count, and the other local
// epochs are ignored (and logged). That a local tier which holds the
// shared newest epoch holds no stale epoch below it is kept true by the
// Checkpointer: each run takes the epochs a merge ignored out of its local
// log before it commits there (DropIgnoredLocalEpochs, flush.h).
//
// Functions; thread-compatible.

#ifndef JOBGRAPH_CHECKPOINT_TIER_TIER_LOG_H_
#define JOBGRAPH_CHECKPOINT_TIER_TIER_LOG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "checkpoint/commit/commit_log.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The entries of the job of `nodes` in `read` (none when nullopt), by
// epoch; the last one wins, as the commit log keeps one per epoch of a job.
// The entries point into `read`.
std::map<int64_t, const CommittedEpoch*> JobEntries(
    const std::optional<CommitLogRead>& read,
    absl::Span<const std::string> nodes);

// Whether two entries record the same commit of the same epoch (a flush
// copies an entry with its commit time).
bool SameCommit(const CommittedEpoch& a, const CommittedEpoch& b);

// Whether `entry` is one host's part of an epoch of a job on several hosts
// (host_tiers.h): its held_node lists some of `nodes` but not all.
bool IsHostPart(const CommittedEpoch& entry,
                absl::Span<const std::string> nodes);

// One tier's commit log as read: `read` is nullopt when the tier has none.
struct TierLogRead {
  std::string dir;
  std::optional<CommitLogRead> read;
};

struct TieredLog {
  // The job's epochs a resume may choose, in increasing order, one entry
  // each (the local one where both tiers hold the epoch); `damage` is the
  // shared log's (ReadCommitLogWithFallback), else the local log's.
  CommitLogRead log;
  // For each epoch of `log`: the directories that hold a copy, nearest
  // (local) first.
  std::map<int64_t, std::vector<std::string>> copies;
  // The job's epochs that the local log lists and that do not count.
  std::vector<int64_t> ignored_local;
  // Whether the local tier continues the shared history (it holds the
  // shared log's newest epoch as the same commit, or the shared log lists
  // no epoch of the job).
  bool local_continues = false;
};

// Merges the tiers' logs for the job of `nodes` (see above).
TieredLog MergeTierLogs(const TierLogRead& local, const TierLogRead& shared,
                        absl::Span<const std::string> nodes);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_TIER_TIER_LOG_H_

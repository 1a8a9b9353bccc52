// The flush of one committed epoch from a local tier to the shared
// checkpoint directory (CheckpointOptions::local_directory): what a
// Checkpointer's background flush and `ckpt flush` both run.
//
//   1. read the local commit log's entry of the epoch (with fallback);
//   2. if the shared log lists the same commit already, only carry over a
//      mark the local entry gained since (the loop-finished mark);
//   3. otherwise take the epoch's old entry out of the shared log (its
//      databases are about to be replaced), copy every node's database
//      (CopyCheckpointDb: every file checked against its recorded size and
//      CRC-32C, made durable under a temporary name, then put in place),
//      and commit the entry in the shared log, with its commit time, in
//      the same write as `retention`'s retirements.
// A crash at any point leaves the shared log listing only complete epochs.
// The caller must hold the nodes' locks in both directories, or know that
// no job runs there. Functions; thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_TIER_FLUSH_H_
#define JOBGRAPH_CHECKPOINT_TIER_FLUSH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/tier/tier_log.h"
#include "checkpoint/util/pause_gate.h"

namespace jobgraph {

struct FlushRequest {
  // The local tier and the shared directory.
  std::string local;
  std::string shared;
  // The databases' type (DB registry).
  std::string db_type = "leveldb";
  // The job's nodes, as its databases are named (an entry of the job lists
  // them all).
  std::vector<std::string> nodes;
  int64_t epoch = 0;
  // Applied to the shared commit log in the flush's commit.
  RetentionOptions retention;
  // The epoch's databases are copied by the hosts that hold them (a job on
  // several hosts: CopyFlushedNodes in each), so the local entry may hold
  // some nodes only. Otherwise such an entry is FailedPrecondition.
  bool copied_by_hosts = false;
  // The copies wait here between chunks while a save holds it (the
  // Checkpointer's, pause_gate.h). Not owned. Default: none.
  PauseGate* pause = nullptr;
};

struct FlushResult {
  // The bytes of the database files copied (0 when already there).
  int64_t bytes_copied = 0;
  // Whether the shared log listed the same commit already.
  bool already_there = false;
};

// Flushes `request.epoch` (see above). NotFound when the local log does not
// list it; FailedPrecondition for an epoch whose databases refer to other
// epochs' (incremental saves, which are not flushed); DataLoss naming the
// file when a local copy does not match its record (nothing of it reaches
// the shared log); the copy's and the commit's errors otherwise, naming the
// path.
absl::StatusOr<FlushResult> FlushEpoch(const FlushRequest& request);

// FlushEpoch's steps, for a flush whose copies run in several processes
// (a job on several hosts: each copies the databases of the nodes it
// runs). The caller runs BeginFlush and CommitFlush in one of them, and
// CopyFlushedNodes in each, for every node once, in between.
struct FlushBegun {
  // The local tier's entry of the epoch.
  CommittedEpoch entry;
  // The shared log lists the same commit already (and has been given the
  // local entry's mark, if it gained one): nothing is left to do.
  bool already_there = false;
};
// Steps 1-3 up to the copies: the shared log no longer lists the epoch or
// the job's later ones unless `already_there`. Errors as FlushEpoch's.
absl::StatusOr<FlushBegun> BeginFlush(const FlushRequest& request);
// Copies `nodes`' databases of the epoch (CopyCheckpointDb); returns their
// bytes.
absl::StatusOr<int64_t> CopyFlushedNodes(const FlushRequest& request,
                                         absl::Span<const std::string> nodes);
// Commits `begun.entry` in the shared log (its nodes, bytes, commit time
// and mark; not its held_node) with `request.retention`.
absl::Status CommitFlush(const FlushRequest& request, const FlushBegun& begun);

// Takes the epochs of the job of `nodes` that `merged` ignored (stale
// ones, TieredLog::ignored_local) out of the commit log of the local tier
// `local`, then deletes their databases there, so that the local log
// never again holds an epoch outside the job's history (tier_log.h relies
// on it). Returns them. Call holding the nodes' locks in `local`.
absl::StatusOr<std::vector<int64_t>> DropIgnoredLocalEpochs(
    const std::string& local, const TieredLog& merged,
    const std::vector<std::string>& nodes);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_TIER_FLUSH_H_

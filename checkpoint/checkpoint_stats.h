// What a checkpoint save or restore reports: CheckpointStats, and the
// SaveOutcome that every save ends in. Plain values; thread-compatible.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINT_STATS_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINT_STATS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace jobgraph {

// Size and duration of one save or restore.
struct CheckpointStats {
  int64_t epoch = 0;
  // Databases written or read (one per checkpointed node).
  int num_dbs = 0;
  // Bytes of blob data in those databases (their blob indexes' totals);
  // 0 while a save is in the background.
  int64_t bytes = 0;
  // Of a save's `bytes`, those its databases list by reference to earlier
  // ones instead of writing them (CheckpointOptions::incremental); 0 for a
  // full save and for a restore.
  int64_t referenced_bytes = 0;
  // Returned by a save: the time the caller was blocked (for a background
  // save, the wait for the one before it plus the snapshot). In an outcome:
  // the save's own time, from its start to its commit, without the waits
  // for epoch boundaries of a background save.
  int64_t wall_micros = 0;
  // A save that was still running when SaveEpoch returned.
  bool in_background = false;
  // Of wall_micros of a returned save, the wait for the saves before it.
  int64_t waited_micros = 0;
  // Of an outcome's wall_micros: writing this process's databases (after
  // the prepare and the snapshot), agreeing with the other processes on the
  // outcome (the wait for the slowest; almost nothing in one process), and
  // the commit (on the committing process) with its status reaching all.
  int64_t write_micros = 0;
  int64_t agree_micros = 0;
  int64_t commit_micros = 0;
  // A restore: the directory its databases were read from (with a local
  // tier, CheckpointOptions::local_directory's or `directory`).
  std::string read_from;
  // A restore of a job on several hosts with local tiers: the bytes of the
  // database files read from the local tier of the host that runs the
  // node, fetched from another host's local tier (over MPI), and read
  // from the shared directory, summed over the ranks.
  struct TierBytes {
    int64_t local = 0;
    int64_t partner = 0;
    int64_t shared = 0;
  };
  std::optional<TierBytes> tier_bytes;
};

// What a save records.
enum class SaveKind {
  kEpoch,         // the state after an epoch (epoch 0: after init)
  kPreemption,    // the middle of a group, where a preempted run stopped
  kLoopFinished,  // the mark that the epoch loop ended with this epoch
};

// How one save ended: committed (with its stats), or why not.
struct SaveOutcome {
  int64_t epoch = 0;
  SaveKind kind = SaveKind::kEpoch;
  // Whether the save was still running when SaveEpoch returned.
  bool in_background = false;
  absl::StatusOr<CheckpointStats> stats;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINT_STATS_H_

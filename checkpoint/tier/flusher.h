// Flusher: the background flush of a Checkpointer's local tier to its
// shared directory (CheckpointOptions::local_directory). The save pipeline
// tells it of each local commit; it copies the epochs it is asked to flush
// on a thread of its own (FlushEpoch), newest first: when the flush falls
// behind, an epoch waiting is replaced by a newer one, so the shared
// directory gets the newest state rather than a backlog.
//
// Pinned() names the local epochs that local retention must keep: the one
// being copied, the one waiting, and the newest flushed (what a resume
// checks the local tier against, tier_log.h).
//
// The flusher holds the nodes' locks in the shared directory (NodeLock)
// from Lock, or its first flush, to its end: no other run of the job writes
// there meanwhile.
//
// The copies give way to the saves' writes when the request carries a
// PauseGate (FlushRequest::pause): its waits are the flusher's alone.
//
// Thread-safe: the pipeline calls Committed from its queue's thread, the
// job's thread the rest. The destructor finishes the flush in progress and
// drops one waiting.

#ifndef JOBGRAPH_CHECKPOINT_TIER_FLUSHER_H_
#define JOBGRAPH_CHECKPOINT_TIER_FLUSHER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/tier/flush.h"

namespace jobgraph {

class Flusher {
 public:
  // What the flushes copy: `request` without its epoch.
  explicit Flusher(FlushRequest request);
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  ~Flusher();

  // Takes the nodes' locks in the shared directory (creating it) unless
  // held: FailedPrecondition naming the holder when another run holds one.
  absl::Status Lock();

  // `epoch` is committed in the local tier now (a save, or a mark of it);
  // with `flush`, it is to be copied now.
  void Committed(int64_t epoch, bool flush);

  // The shared directory holds `epoch` of this history already (a resume
  // found both tiers holding it): pinned as the newest flushed.
  void Flushed(int64_t epoch);

  // Asks for the newest committed epoch unless it is flushed already (as
  // it is now): at the end of a run, and before a preempted run exits.
  void FlushNewest();

  // Waits until nothing is being copied or waiting. Returns the failure of
  // the last flush when it failed (naming the epoch), or OK; a failure is
  // returned once.
  absl::Status Drain();

  // The local epochs retention must keep (see above).
  std::vector<int64_t> Pinned() const;

  struct Stats {
    int64_t epochs_flushed = 0;
    int64_t bytes_copied = 0;
    // Time spent copying and committing.
    int64_t flush_micros = 0;
    // Of flush_micros, the time the copies waited for saves' writes
    // (FlushRequest::pause).
    int64_t paused_micros = 0;
    std::optional<int64_t> newest_flushed;
  };
  Stats stats() const;

 private:
  void Run();
  // Lock with mu_ held.
  absl::Status LockLocked();
  // The time the flushes waited at request_.pause so far.
  absl::Duration PausedSoFar() const;

  const FlushRequest request_;
  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex. Guards the members below but thread_.
  mutable std::mutex mu_;
  // Signalled when work arrives (or the end) and when a flush ends.
  std::condition_variable changed_;
  std::optional<int64_t> newest_committed_;
  // Bumped by every Committed: a flush that began before the newest
  // commit has not flushed what that commit changed (a mark).
  int64_t generation_ = 0;
  // The generation the newest committed epoch was flushed at, if it was.
  std::optional<int64_t> clean_generation_;
  std::optional<int64_t> waiting_;
  std::optional<int64_t> copying_;
  int64_t copying_generation_ = 0;  // generation_ when copying_ began
  absl::Status failure_;
  Stats stats_;
  bool stop_ = false;
  std::vector<std::unique_ptr<NodeLock>> locks_;
  std::thread thread_;  // started by the first request
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_TIER_FLUSHER_H_

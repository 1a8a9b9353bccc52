// SavePipeline: every save a Checkpointer makes, in one shape.
//
//   prepare   the directory, the hosted nodes' locks, and, when the commit
//             log may list the epoch already, its entry taken out first
//             (caller's thread);
//   snapshot  the checkpointed blobs of the nodes this process hosts,
//             frozen: tensors are shared copy-on-write (caller's thread);
//   write     each snapshot's database, durable under its final name
//             (WriteCheckpointDb, the one route to a database);
//   agree     on every process's write;
//   commit    the committer records the save in the commit log, retiring
//             what retention drops, in the same write;
//   share     the committer's status reaches every process.
//
// Two seams place the stages; neither adds a path:
//   - the SaveQueue runs write and commit at once (a synchronous save) or on
//     its thread while the job goes on (an asynchronous save);
//   - the Coordinator carries the exchanges (agree, share), and says whether
//     they reach other processes. Then they run only in the job's thread,
//     in Save and Drain: a background save waits at an exchange for the next
//     boundary, and the exchanges of two consecutive saves (the newest write,
//     the commit before it) go in one round (Coordinator::Settle); a save
//     whose commit follows in the same call agrees, commits and shares in
//     one exchange centred on the committer (AgreeAndCommit). In one process
//     they run wherever the save is.
// A synchronous save is the asynchronous pipeline run inline: Save drains
// it before returning.
//
// What a save records (SaveRecord) is the only difference between an
// epoch's save, a preemption checkpoint and the mark after the last epoch.
//
// Every save ends in exactly one SaveOutcome (TakeFinished), the same on
// every process. A database written by a save is committed only when every
// process's write of it succeeded; nothing else ever is.
//
// One pipeline serves one run (Checkpointer::Start to End). It borrows the
// options, the queue and the session given to Save; not thread-safe (the
// job's thread calls it; the queue's thread runs what it hands over).

#ifndef JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_PIPELINE_H_
#define JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_PIPELINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/pipeline/coordinator.h"
#include "checkpoint/pipeline/save_base.h"
#include "checkpoint/pipeline/save_queue.h"
#include "checkpoint/util/pause_gate.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class Session;

// What one save commits.
struct SaveRecord {
  SaveKind kind = SaveKind::kEpoch;
  int64_t epoch = 0;
  // kPreemption: where the run stopped. kLoopFinished: the mark.
  Preemption preemption;
  // Write every blob even where an incremental save would refer to an
  // earlier database (a checkpoint the run publishes must stand alone).
  bool full = false;
};

// A checkpointed node: where its blobs live, and its databases' name.
struct PipelineNode {
  std::string node;
  std::string file_name;
};

// Logs `outcome` as an error if it failed: for outcomes nobody takes.
void LogIfFailed(const SaveOutcome& outcome);

class SavePipeline {
 public:
  // `nodes` are every checkpointed node of the job, in order (a commit
  // lists them all); `options` and `queue` must outlive the pipeline.
  SavePipeline(const CheckpointOptions& options,
               std::vector<PipelineNode> nodes,
               std::unique_ptr<Coordinator> coordinator, SaveQueue* queue);
  SavePipeline(const SavePipeline&) = delete;
  SavePipeline& operator=(const SavePipeline&) = delete;
  // Drains; then releases the locks.
  ~SavePipeline();

  Coordinator& coordinator() { return *coordinator_; }

  // What a local tier's flush (checkpoint/tier/flusher.h) needs of the
  // commits. Set before the first save.
  struct CommitHooks {
    // Called after each commit that the log now lists (an epoch's save, a
    // preemption checkpoint, a mark), in the thread that committed.
    std::function<void(const SaveRecord& record)> committed;
    // Epochs that a commit's retention must keep besides those the
    // pipeline keeps itself; called in the thread that commits.
    std::function<std::vector<int64_t>()> pinned;
    // Runs on every process after its write of a save (given the write's
    // status, which may be a failure: the hook runs all the same), in the
    // thread that wrote (the queue's, for a background save); may be
    // collective over a channel of its own (SideChannel: a local tier's
    // partner copies, made while the job goes on). Its failure fails the
    // save, as a failed write does. Runs for the mark too.
    std::function<absl::Status(const SaveRecord& record,
                               const absl::Status& written)>
        after_write;
    // Runs on every process once the commit of `record` is agreed to have
    // succeeded, on the job's thread, before the save's outcome is known;
    // may be collective (the flush of those tiers).
    std::function<void(const SaveRecord& record)> shared;
    // The nodes whose databases the committing directory holds
    // (CommittedEpoch.held_node), when not all, and the host whose local
    // tier it is (CommittedEpoch.host).
    std::function<std::vector<std::string>()> held_nodes;
    std::string host;
    // Held while a save writes its databases (not while it runs after_write
    // or commits): the local tier's background copies wait at it between
    // chunks, so that they do not share the machine with the write the job
    // may be waiting for (pause_gate.h). Not owned. Default: none.
    PauseGate* write_pause = nullptr;
  };
  void SetCommitHooks(CommitHooks hooks) { hooks_ = std::move(hooks); }

  // Takes the lock of every node this process hosts, unless held already.
  // FailedPrecondition naming the holder when another run holds one.
  absl::Status LockNodes();

  // Runs one save of `record`: `blobs[i]` of node i, frozen in `session`
  // (for kLoopFinished, which writes no database: none, and `session` may
  // be null). Collective across processes.
  //
  // Returns the outcome when the save has finished by then: with an inline
  // queue, with `wait` (the caller needs it: the run ends), or when it
  // failed before it reached the queue in every process alike (alone, or in
  // an agreed prepare). Otherwise the stats of the part done in the
  // caller's thread, in_background set. Either way, the outcome also comes
  // out of TakeFinished.
  absl::StatusOr<CheckpointStats> Save(
      const Session* session, const SaveRecord& record,
      const std::vector<std::vector<std::string>>& blobs, bool wait = false);

  // Incremental saves: after a restore of committed `epoch` put `blobs[i]`
  // of node i in place in `session`, the next save may refer to that
  // epoch's databases (and those they refer to) for the tensors not written
  // since. Reads the blob index of each database of the epoch this process
  // hosts; if one cannot be read, the next save is full (and the reason
  // logged). Call with no save in flight (after Drain).
  void RestoredFrom(const Session& session, int64_t epoch,
                    const std::vector<std::vector<std::string>>& blobs);

  // Brings every save to its outcome. Collective.
  void Drain();

  // The outcomes that are known, oldest first. Waits for nothing and
  // exchanges nothing: in several processes an outcome is known once the
  // processes have agreed on it (in Save or Drain).
  std::vector<SaveOutcome> TakeFinished();

 private:
  struct Flight;
  enum class Stage { kWrite, kAgree, kCommit, kShare, kDone };

  // Directory, locks, and the epoch's old entry (see MayBeListed). An error
  // here is every process's when `*agreed`, else this process's own.
  absl::Status Prepare(const SaveRecord& record, bool* agreed);
  // Whether the commit log may list `epoch` of this job already.
  bool MayBeListed(int64_t epoch) const;
  // Runs the flight's stages that need no exchange with other processes,
  // up to the next one that does (in the queue's thread or the caller's).
  void Advance(Flight& flight);
  // The local stages.
  void Write(Flight& flight);
  // Writes the flight's databases, one per node, side by side: their bytes,
  // or the first node's error; fills in the flight's blob indexes.
  WriteReport WriteNodeDatabases(Flight& flight) const;
  // CommitHooks::after_write, its failure the write's.
  void AfterWrite(Flight& flight);
  void Commit(Flight& flight);
  // A flight's state after the agreement on its write, and after its
  // commit's status reached every process.
  void Agreed(Flight& flight, absl::StatusOr<WriteTotals> agreed);
  // In the job's thread, after the agreement on the flight's write of a
  // background save that several processes commit
  // (Coordinator::several_commit): the commit time they all record.
  void AgreeCommitTime(Flight& flight);
  void Shared(Flight& flight, absl::Status committed);
  // Hands the flight's snapshot to the queue's thread to be freed.
  void ReleaseSnapshots(Flight& flight);
  // Incremental saves: what this process's write tells the commit of the
  // epochs it references (WriteReport::tallies), and the epochs retention
  // must keep for a save that refers to the current base.
  std::vector<int64_t> ReferenceTallies(const Flight& flight) const;
  // The tallies of a process that references nothing (all zero).
  std::vector<int64_t> NoTallies() const;
  std::vector<int64_t> PinnedEpochs() const;
  // In the job's thread: waits for the queue, runs the exchanges that are
  // due in one round, hands what follows to the queue and collects the
  // finished saves; `snapshot_follows` when a save's snapshot comes next
  // (Save), before a commit handed on here may run. Returns whether
  // anything was exchanged or finished.
  bool Settle(bool snapshot_follows);
  // Moves the finished saves at the front of flights_ to finished_.
  void Collect();
  SaveOutcome OutcomeOf(const Flight& flight) const;

  const CheckpointOptions& options_;
  const std::vector<PipelineNode> nodes_;
  const std::vector<std::string> file_names_;  // of nodes_, for commits
  const std::unique_ptr<Coordinator> coordinator_;
  SaveQueue* const queue_;
  std::vector<std::unique_ptr<NodeLock>> locks_;
  // Saves without an outcome yet, oldest first.
  std::deque<std::shared_ptr<Flight>> flights_;
  std::vector<SaveOutcome> finished_;
  // An upper bound of this job's epochs that the commit log lists, the
  // same on every process; unknown (nullopt) until the first save. Only
  // this job adds its entries (it holds its nodes' locks), so a save of a
  // newer epoch has nothing to take out of the log.
  std::optional<int64_t> listed_bound_;
  // Incremental saves: the last committed epoch save of the run, or the
  // epoch the run restored, which the next save refers to.
  SaveBase base_;
  CommitHooks hooks_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_PIPELINE_H_

// Checkpointer: snapshots the root workspaces of a job's checkpointed nodes
// into one database per node per epoch, "<dir>/<node>.<epoch>", commits each
// epoch in the directory's commit log, and restores them (FORMAT.md).
//
// A JobRunner makes one call per phase of a run:
//
//   Start(session, nodes, resume)  checks the options and the node names,
//       locks the nodes in the directory and chooses the epoch to resume
//       from, loading it (into staged blobs) as it checks it;
//   CaptureBlobNames(session)  from scratch, after the init group: fixes
//       each node's checkpointed blobs (its root workspace's blobs now);
//   Restore(session, epoch)    on resume: puts the staged blobs in place;
//   SaveEpoch(session, epoch)  after init (epoch 0) and after every epoch;
//   SavePreempted(...)         after a run stopped on request in the middle
//       of a group: its state and plan position, committed as that epoch;
//   MarkLoopFinished(...)      after a stop once the epoch loop had ended;
//   TakeFinishedSaves()        the outcome of every save, in one place;
//   End()                      waits for the saves, releases the locks.
//
// Every save goes through one pipeline (snapshot, write, agree, commit); a
// synchronous save runs it inline, an asynchronous one (options.async) on a
// thread of its own. A database is committed only once every node's is
// durable, and a failed save leaves the committed epochs as they were.
// With a local tier (options.local_directory) the pipeline commits in that
// directory, and a flush thread copies committed epochs to
// options.directory (checkpoint/tier/flusher.h, FORMAT.md 3.4); a resume
// reads the nearest copy.
//
// As in Caffe2, a node's checkpointed blobs are those in its root
// workspace once the init group has run (the list is itself stored, in
// the "blob_names" blob). A Checkpointer may be reused for several runs of
// the same job, also with a new Session each time: it keeps the blob lists
// it fixed. On several ranks (MpiSession) every call is collective: each
// rank writes the databases of the nodes it hosts, rank 0 commits.
//
// CheckpointManager and MultiNodeCheckpointManager are Caffe2's names for
// it. Not thread-safe: one JobRunner uses it at a time. It borrows the
// session of a run; End must be called (a JobRunner does) while that
// session lives.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/resume_from.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class Session;
class TaskGroup;

// The blob that holds the list of checkpointed blob names, in every node's
// root workspace and in every checkpoint.
inline constexpr char kBlobNamesBlob[] = "blob_names";
// What a restore loads each blob as until every node's load has succeeded.
// Reserved: a restore, and the capture of a node's blob list, drop the
// root-workspace blobs named so.
inline constexpr char kStagedBlobPrefix[] = "__jobgraph_staged__/";

class Checkpointer {
 public:
  explicit Checkpointer(CheckpointOptions options);
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  virtual ~Checkpointer();

  // Starts a run that checkpoints `nodes` (the job's nodes to checkpoint,
  // in order) on `session` (borrowed for the run), and returns the epoch to
  // resume from, or nullopt to start from scratch. Takes each hosted node's
  // lock in the directory (creating the directory; if it cannot be created
  // yet, the first save takes them). A candidate epoch is checked by
  // loading it into staged blobs; damage makes `latest` try the next older
  // one, and Restore then only puts the staged blobs in place.
  // InvalidArgument for missing options, an empty node list, a node name
  // that cannot be a file name, nodes that differ from an earlier run of
  // this Checkpointer, or a node no rank runs; FailedPrecondition naming
  // the holder when another run holds a node; the resume choice's errors
  // (commit/resume_choice.h) otherwise.
  absl::StatusOr<std::optional<int64_t>> Start(
      Session& session, const std::vector<std::string>& nodes,
      const ResumeFrom& resume);
  // Start without a session: one process, and the chosen epoch is only
  // verified (Restore then reads it).
  absl::StatusOr<std::optional<int64_t>> Start(
      const std::vector<std::string>& nodes, const ResumeFrom& resume);

  // Set by Start when the epoch to resume from is a preemption checkpoint.
  const std::optional<Preemption>& resumed_preemption() const;

  // From scratch, after the init group has run: fixes every node's
  // checkpointed blobs as the blobs in its root workspace now. A reused
  // Checkpointer keeps the lists of its first run (Caffe2) and writes them
  // into `session`'s "blob_names" blobs.
  absl::Status CaptureBlobNames(Session& session);

  // On resume: loads every blob of each node's database of `epoch` into the
  // node's root workspace and fixes the checkpointed blobs as those. All or
  // nothing: on an error every workspace is as it was. Errors name the
  // epoch and the directory; damage is DataLoss.
  absl::StatusOr<CheckpointStats> Restore(Session& session, int64_t epoch);

  // Saves every node's checkpointed blobs as `epoch` and commits it. A
  // synchronous save returns its outcome: the stats, or why nothing was
  // committed (earlier epochs stay as they were). An asynchronous one
  // returns once the blobs are frozen (in_background set); its outcome
  // comes later. Either way the outcome also comes out of
  // TakeFinishedSaves. With `full`, an incremental Checkpointer writes
  // every blob into the epoch's databases (which then stand alone, to be
  // published). FailedPrecondition before the blobs are fixed.
  absl::StatusOr<CheckpointStats> SaveEpoch(Session& session, int64_t epoch,
                                            bool full = false);

  // Saves a run that stopped on request in the middle of `stopped` (the
  // init group for epoch 0, else the epoch group) of `epoch`, and commits
  // it marked with `preemption`: every node's root-workspace blobs that its
  // plan position names, the position included. Waits for every save
  // before it, and returns its outcome. FailedPrecondition when a node that
  // runs tasks in `stopped` is not checkpointed (the group could not
  // continue from the checkpoint) or holds no plan position.
  absl::StatusOr<CheckpointStats> SavePreempted(Session& session, int64_t epoch,
                                                const Preemption& preemption,
                                                const TaskGroup& stopped);

  // Marks the committed `epoch` as the last of the run's epoch loop
  // (preemption.group must be JOB_GROUP_DOWNLOAD), so that a resume runs
  // the download and exit groups. Waits for every save before it. NotFound
  // if `epoch` is not committed.
  absl::Status MarkLoopFinished(int64_t epoch, const Preemption& preemption);

  // The outcomes of the saves that have ended since the last call, oldest
  // first: one per SaveEpoch, SavePreempted and MarkLoopFinished. On
  // several ranks an outcome is known once the ranks agreed on it (at the
  // next save, or WaitForBackgroundSave). Outcomes nobody takes are kept up
  // to a bound, and failures among them are logged.
  std::vector<SaveOutcome> TakeFinishedSaves();

  // Waits until every save has its outcome (collective on several ranks).
  void WaitForBackgroundSave();

  // With a local tier (CheckpointOptions::local_directory): waits for
  // every save, copies the newest epoch committed in the local tier to the
  // shared directory unless it is there already, and waits for every copy.
  // FailedPrecondition naming both directories (and `ckpt flush`) when the
  // last copy failed. OK without a local tier or outside a run. With local
  // tiers on several hosts (MpiSession) it is collective: every rank calls
  // it.
  absl::Status FlushToShared();

  // Ends the run: waits for every save, releases the nodes' locks (also
  // done by the destructor).
  void End();

  // Loads `blob_names` from each of `nodes`' databases of `epoch` into that
  // node's root workspace, leaving blobs a database lacks untouched. Checks
  // first that every node's database exists; returns false, loading
  // nothing, if one does not.
  absl::StatusOr<bool> LoadBlobs(Session& session,
                                 const std::vector<std::string>& nodes,
                                 const std::vector<std::string>& blob_names,
                                 int64_t epoch);

  // "<dir>/<name>.<epoch>" for checkpointed `node` (of the last Start, or
  // of LoadBlobs), where <name> is options().node_name if set; nullopt for
  // any other node.
  std::optional<std::string> DbPath(const std::string& node,
                                    int64_t epoch) const;

  // The checkpointed nodes, as given to Start.
  std::vector<std::string> nodes() const;
  const CheckpointOptions& options() const;

 protected:
  // For CheckpointManager: refuse jobs with more than one checkpointed node.
  Checkpointer(CheckpointOptions options, bool single_node);

 private:
  class Impl;  // checkpointer_impl.h
  std::unique_ptr<Impl> impl_;
};

// Caffe2's single-node manager: a Checkpointer that refuses jobs with more
// than one checkpointed node.
class CheckpointManager : public Checkpointer {
 public:
  explicit CheckpointManager(CheckpointOptions options)
      : Checkpointer(std::move(options), /*single_node=*/true) {}
};

// Caffe2's multi-node manager is the Checkpointer itself.
using MultiNodeCheckpointManager = Checkpointer;

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINTER_H_

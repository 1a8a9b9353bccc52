// Job: the four task groups of a resumable training or batch job, and the
// conditions that end its epoch loop.
//
//   init      runs once, only when the job starts from scratch (GLOBAL);
//   epoch     runs again and again until a stop condition is true;
//   download  runs once after the loop (pull results back);
//   exit      runs last.
//
// A stop condition is a blob on a node; after every epoch the runner fetches
// every condition, and the loop ends after the first epoch in which any is
// true. The nodes whose root workspaces are checkpointed are the ones given to
// SetNodesToCheckpoint, or else the nodes of the init group's tasks.
//
// A Job owns its groups. Not thread-safe: build it, then hand it to a
// JobRunner.

#ifndef JOBGRAPH_CHECKPOINT_JOB_H_
#define JOBGRAPH_CHECKPOINT_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/net_builder.h"
#include "engine/task.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class Job {
 public:
  Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  TaskGroup& init_group() { return init_; }
  TaskGroup& epoch_group() { return epoch_; }
  TaskGroup& download_group() { return download_; }
  TaskGroup& exit_group() { return exit_; }
  const TaskGroup& init_group() const { return init_; }
  const TaskGroup& epoch_group() const { return epoch_; }
  const TaskGroup& download_group() const { return download_; }
  const TaskGroup& exit_group() const { return exit_; }

  // Ends the epoch loop once `blob` (a one-element bool or number on
  // blob.node()) is true after an epoch. The blob is made an output of the
  // epoch group, so the session creates it in the node's root workspace and
  // PRIVATE epoch tasks can set it.
  void AddStopCondition(const BlobRef& blob);
  void AddStopCondition(const TaskOutput& output);
  const std::vector<TaskOutput>& stop_conditions() const { return stops_; }

  // Checkpoints exactly these nodes, in this order.
  void SetNodesToCheckpoint(std::vector<std::string> nodes) {
    nodes_to_checkpoint_ = std::move(nodes);
  }
  // The explicit list if one was given and is non-empty, else the init
  // group's nodes in creation order.
  std::vector<std::string> nodes_to_checkpoint() const;

  // Every node the job runs tasks on or reads a stop condition from, in the
  // order they first appear (init, epoch, download, exit): the order in
  // which an MpiSession places nodes on ranks.
  std::vector<std::string> nodes() const;

  // The whole job as a proto; `--dump_plan` prints it.
  absl::StatusOr<JobDef> Build() const;
  std::string DebugString() const;

 private:
  TaskGroup init_;
  TaskGroup epoch_;
  TaskGroup download_;
  TaskGroup exit_;
  std::vector<TaskOutput> stops_;
  std::vector<std::string> nodes_to_checkpoint_;
  std::string error_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_JOB_H_

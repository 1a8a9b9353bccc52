// Session: runs TaskGroups on nodes and lets callers fetch blobs by name.
//
// A session keeps one root workspace per node for its whole life, so blobs
// written by GLOBAL tasks (and by PRIVATE tasks into names that exist in the
// root) persist from one Run to the next. Callers never get pointers into a
// node's workspace through this interface: outputs are fetched by name and
// copied, so a session may run nodes in other processes.
//
// A run can be stopped and continued later (preemption): a Run given a
// RunOptions::stop control stops at the next point between nets once a stop
// is requested there, returns a status for which IsStopRequest() is true, and
// leaves in each node's root workspace the blob kPlanPositionBlob, a
// serialized PlanPosition (plan_executor.h) saying where that node was. A
// checkpoint of the root workspace taken then (the blobs named in
// PlanPosition.root_blob, the position included) lets a later Run of the same
// group with RunOptions::resume, in a session holding those blobs, continue
// exactly there.
//
// LocalSession runs every node in this process: the tasks of one group on all
// its nodes run concurrently, each node in its own root workspace (nodes never
// see each other's blobs). Run() is not reentrant; RequestStop() may be called
// from any thread (a signal handler's flag, for instance).

#ifndef JOBGRAPH_ENGINE_SESSION_H_
#define JOBGRAPH_ENGINE_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/collectives.h"
#include "engine/plan_executor.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// What one node runs for a TaskGroup: its tasks' nets and steps, the tasks
// running concurrently when there are several, and the outputs to pre-create.
struct NodePlan {
  std::string node;
  PlanDef plan;
  std::vector<std::string> outputs;
};

// Splits a group by node, in the order nodes first appear. Errors when two
// tasks of one node define a net of the same name.
absl::StatusOr<std::vector<NodePlan>> PlanByNode(const TaskGroupDef& group);

// The blob in a node's root workspace that holds where a stopped run of the
// node was: a one-element STRING tensor, a serialized PlanPosition.
inline constexpr char kPlanPositionBlob[] = "__plan_position__";

struct RunOptions {
  // When a stop is requested here (borrowed; may be null), the run stops at
  // the next point between nets and leaves each node's position behind.
  const RunControl* stop = nullptr;
  // Continue a stopped run of this group: every node reads (and removes) its
  // kPlanPositionBlob, which must exist.
  bool resume = false;
  // The collectives of the run (borrowed; may be null), for a session that
  // runs part of a group's nodes. Null: a group that uses collectives gets
  // one over its own nodes.
  Collectives* collectives = nullptr;
};

// A blob of a node's root workspace, frozen for an asynchronous checkpoint.
struct BlobSnapshot {
  std::string name;
  std::unique_ptr<Blob> blob;
};

class Session;

// Collectives for a thread of their own, over the ranks of the session that
// opened the channel (Session::OpenSideChannel): what one thread exchanges
// here never meets the session's own collectives, so the two threads need
// not agree on which exchange comes first. Every rank calls the channel's
// collectives in the same order, from one thread at a time; the channel
// must not outlive its session.
class SideChannel {
 public:
  virtual ~SideChannel() = default;
  virtual int rank() const = 0;
  virtual int num_ranks() const = 0;
  // Session::AllToAll on the channel. Waits for the other ranks to arrive
  // without spinning on a core, which the job's threads need meanwhile.
  virtual absl::StatusOr<std::vector<std::string>> AllToAll(
      std::vector<std::string> to_each) = 0;
};

// A SideChannel over `session` itself, for a caller on the session's own
// thread; `session` must outlive it.
std::unique_ptr<SideChannel> SessionChannel(const Session& session);

class Session {
 public:
  virtual ~Session() = default;

  // Runs the group to completion; the first error of any node is returned,
  // prefixed by the node's name.
  virtual absl::Status Run(const TaskGroupDef& group,
                           const RunOptions& options) = 0;
  absl::Status Run(const TaskGroupDef& group) { return Run(group, {}); }
  absl::Status Run(const TaskGroup& group, const RunOptions& options = {});

  // A copy of the tensor in blob `blob` of `node`'s root workspace.
  virtual absl::StatusOr<Tensor> FetchBlob(absl::string_view node,
                                           absl::string_view blob) const = 0;
  // The first blob of `output`.
  absl::StatusOr<Tensor> Fetch(const TaskOutput& output) const;

  // Freezes blobs `names` of `node`'s root workspace, for a checkpoint that
  // is written while the session runs on: later writes to the workspace
  // never change the snapshot. Tensors share their storage copy-on-write
  // (Tensor::ShareStorage), so this costs per blob, not per byte; other
  // blobs are copied through their serializers. Call between Runs, for a
  // node hosted in this process. Errors name the node and the blob.
  virtual absl::StatusOr<std::vector<BlobSnapshot>> SnapshotBlobs(
      absl::string_view node, const std::vector<std::string>& names) const = 0;

  // Asks running and future Runs to stop at the next point between nets;
  // they then fail with a Cancelled error that is not a stop request (no
  // positions are kept: a stopped session runs nothing more).
  virtual void RequestStop() = 0;
  virtual bool StopRequested() const = 0;

  // --- Ranks. A session may run its nodes in several processes ("ranks")
  // that all run this same program (SPMD), each hosting some of the nodes.
  // Run, FetchBlob and the calls below are then collective: every rank makes
  // the same calls in the same order and gets the same result. LocalSession
  // is the one-rank case.

  virtual int rank() const { return 0; }
  virtual int num_ranks() const { return 1; }
  // Whether this rank runs `node`'s tasks and holds its workspace.
  virtual bool HostsNode(absl::string_view node) const { return true; }
  // Every rank's `value`, in rank order.
  virtual absl::StatusOr<std::vector<std::string>> AllGather(
      std::string value) const {
    return std::vector<std::string>{std::move(value)};
  }
  // The element-wise sum of every rank's `values` (the same length on every
  // rank): one small collective, for the common paths of the agreements
  // below.
  virtual absl::StatusOr<std::vector<int64_t>> AllReduceSum(
      std::vector<int64_t> values) const {
    return values;
  }
  // Rank `root`'s `value` (the others' are ignored).
  virtual absl::StatusOr<std::string> Broadcast(std::string value,
                                                int root) const {
    return value;
  }
  // The element-wise sum of every rank's `values` (the same length on every
  // rank), at rank `root` only; the other ranks get their own `values` back.
  // Half an all-reduce, for an agreement that one rank settles.
  virtual absl::StatusOr<std::vector<int64_t>> ReduceSumToRoot(
      std::vector<int64_t> values, int root) const {
    return values;
  }
  // Rank `root`'s `values` (of the same length on every rank): one small
  // collective, where Broadcast of a string takes two.
  virtual absl::StatusOr<std::vector<int64_t>> BroadcastInts(
      std::vector<int64_t> values, int root) const {
    return values;
  }
  // Collective: sends `to_each[r]` to rank r (to_each has num_ranks()
  // elements) and returns what every rank sent this one, by sending rank.
  // Sizes are 64-bit: a piece may exceed 2 GiB. InvalidArgument, naming the
  // count, when `to_each` does not have num_ranks() elements; that is checked
  // before any exchange, so ranks that all pass the same wrong count all get
  // it, while a wrong count on some ranks only is a program error (the others
  // wait for them). One rank: `to_each` back.
  virtual absl::StatusOr<std::vector<std::string>> AllToAll(
      std::vector<std::string> to_each) const;
  // Collective: a channel of its own for the collectives of one thread
  // other than the caller's (a background save's partner copies, while the
  // job's thread goes on calling this session). One rank needs none, and
  // gets one that exchanges nothing; a session of several ranks gives one
  // when it overrides this (MpiSession does), else Unimplemented, the same
  // on every rank.
  virtual absl::StatusOr<std::unique_ptr<SideChannel>> OpenSideChannel() const;
  // Runs the tasks of `group` that are on nodes this rank hosts and returns
  // this rank's outcome, without agreeing on it with the other ranks: for a
  // caller that folds the outcome into an agreement of its own (a
  // checkpoint's commit, which saves a collective per epoch that way). Not
  // collective, so the group must not use collective operators
  // (InvalidArgument). One rank: Run.
  virtual absl::Status RunHosted(const TaskGroupDef& group) {
    return Run(group, {});
  }
  absl::Status RunHosted(const TaskGroup& group);

  // FetchBlob of a node this rank hosts, without involving other ranks.
  virtual absl::StatusOr<Tensor> FetchHostedBlob(absl::string_view node,
                                                 absl::string_view blob) const {
    return FetchBlob(node, blob);
  }
};

// Collective over the ranks of `session`: the first error of any rank (in
// rank order, its message prefixed by "rank N: " when there are several), or
// OK if every rank's `local` is OK. One small all-reduce when every rank is
// OK; the messages are exchanged only when one is not.
absl::Status AgreeOnStatus(const Session& session, const absl::Status& local);
// Collective: true on every rank if `local` is true on any.
absl::StatusOr<bool> AnyRank(const Session& session, bool local);
// Collective: rank 0 runs `fn`; every rank gets its status (one small
// all-reduce when it is OK).
absl::Status OnRankZero(const Session& session,
                        const std::function<absl::Status()>& fn);
// Collective, once every rank knows the code of rank 0's `status` (from an
// exchange of the caller's): rank 0's `status` on every rank, its message
// broadcast only when the code is not OK. Other ranks' `status` is unused.
absl::Status RankZeroStatus(const Session& session, int64_t code,
                            const absl::Status& status);

class LocalSession : public Session {
 public:
  LocalSession() = default;
  LocalSession(const LocalSession&) = delete;
  LocalSession& operator=(const LocalSession&) = delete;

  using Session::Run;
  absl::Status Run(const TaskGroupDef& group,
                   const RunOptions& options) override;
  absl::StatusOr<Tensor> FetchBlob(absl::string_view node,
                                   absl::string_view blob) const override;
  absl::StatusOr<std::vector<BlobSnapshot>> SnapshotBlobs(
      absl::string_view node,
      const std::vector<std::string>& names) const override;
  void RequestStop() override { control_.stop_requested.store(true); }
  bool StopRequested() const override { return control_.StopRequested(); }

  // The root workspace of `node`, created empty on first use. Owned by the
  // session; valid for its life. For tests and in-process tools.
  Workspace* NodeWorkspace(absl::string_view node);
  // Nodes that have a root workspace, sorted.
  std::vector<std::string> nodes() const;

  // Leaves a "finished" plan position (kPlanPositionBlob) in each of
  // `nodes`' root workspaces, for a group this session ran to its end while
  // the same group stopped on request elsewhere (another rank): continuing
  // it then runs nothing on these nodes.
  void MarkFinished(const std::string& plan_group,
                    const std::vector<std::string>& nodes);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Workspace>, std::less<>> workspaces_
      ABSL_GUARDED_BY(mu_);
  RunControl control_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_SESSION_H_

// MpiSession: a Session whose nodes run in the ranks of an Open MPI job.
//
// Every rank runs the same program (SPMD): the same builder code, the same
// JobRunner, the same calls on the session. Each rank hosts a fixed subset of
// the job's nodes and runs only their tasks, in a LocalSession of its own;
// the session's calls are collective over the ranks:
//
//   Run(group)          each rank runs its nodes' tasks, then the ranks agree
//                       on the outcome: OK everywhere, or the first error (in
//                       rank order) everywhere, naming the rank and the node.
//                       No rank starts the next call while another still
//                       runs this one. A run stopped on request on any rank
//                       is stopped on every rank (ranks whose nodes finished
//                       keep a "finished" position).
//   FetchBlob(node, b)  the rank hosting `node` sends the tensor to all, so
//                       stop conditions read the same everywhere.
//   AllGather, Broadcast, AllReduceSum, ReduceSumToRoot, BroadcastInts,
//   AllToAll            (session.h) over all ranks.
//
// Collective operators (Allreduce, Broadcast, Barrier) exchange between
// ranks inside a Run. A group that uses them and fails on one rank cannot be
// agreed on (the other ranks may wait in a collective for the failed one):
// the failing rank logs its error and aborts the MPI job (MPI_Abort), as a
// crashed rank would.
//
// MPI is initialized on first use (MPI_THREAD_SERIALIZED: a Run's node
// threads call MPI one at a time) and finalized at process exit. A process
// can hold any number of MpiSessions, one at a time in use.
//
// Thread-safety: as Session; one thread drives the session.

#ifndef JOBGRAPH_ENGINE_MPI_MPI_SESSION_H_
#define JOBGRAPH_ENGINE_MPI_MPI_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/session.h"

namespace jobgraph {

struct MpiSessionOptions {
  // The rank that hosts each node. Empty (the default): node i of the
  // session's node list on rank i % (number of ranks). Otherwise it must
  // name every node, with ranks in [0, number of ranks), each rank hosting
  // at least one node.
  std::map<std::string, int> node_ranks;
};

// True when this process was started by an MPI launcher (mpirun, or srun
// with PMI/PMIx) as part of an MPI job.
bool StartedByMpiLauncher();

class MpiSession : public Session {
 public:
  // A session over `nodes` (the job's nodes in order, Job::nodes()),
  // initializing MPI if needed. InvalidArgument when there are more ranks
  // than nodes (naming both numbers), for a bad `node_ranks`, or for a
  // node name given twice; Unavailable when MPI cannot start.
  static absl::StatusOr<std::unique_ptr<MpiSession>> Create(
      std::vector<std::string> nodes, MpiSessionOptions options = {});
  ~MpiSession() override;

  using Session::Run;
  using Session::RunHosted;
  absl::Status Run(const TaskGroupDef& group,
                   const RunOptions& options) override;
  absl::Status RunHosted(const TaskGroupDef& group) override;
  absl::StatusOr<Tensor> FetchBlob(absl::string_view node,
                                   absl::string_view blob) const override;
  absl::StatusOr<Tensor> FetchHostedBlob(absl::string_view node,
                                         absl::string_view blob) const override;
  absl::StatusOr<std::vector<BlobSnapshot>> SnapshotBlobs(
      absl::string_view node,
      const std::vector<std::string>& names) const override;
  void RequestStop() override { local_.RequestStop(); }
  bool StopRequested() const override { return local_.StopRequested(); }

  int rank() const override { return rank_; }
  int num_ranks() const override { return size_; }
  bool HostsNode(absl::string_view node) const override;
  absl::StatusOr<std::vector<std::string>> AllGather(
      std::string value) const override;
  absl::StatusOr<std::string> Broadcast(std::string value,
                                        int root) const override;
  absl::StatusOr<std::vector<int64_t>> AllReduceSum(
      std::vector<int64_t> values) const override;
  absl::StatusOr<std::vector<int64_t>> ReduceSumToRoot(
      std::vector<int64_t> values, int root) const override;
  absl::StatusOr<std::vector<int64_t>> BroadcastInts(
      std::vector<int64_t> values, int root) const override;
  // The sizes first (one MPI_Alltoall), then each piece straight from the
  // sender's string into the receiver's, in messages of at most a fixed
  // number of bytes (MPI counts are ints), all posted at once. The piece
  // for this rank itself is moved, not sent.
  absl::StatusOr<std::vector<std::string>> AllToAll(
      std::vector<std::string> to_each) const override;

  // A duplicate of the session's communicator. Its AllToAll waits for the
  // other ranks in naps, off the cores. Every MPI call of the process, the
  // channel's and the session's, is made under one lock: MPI runs at
  // MPI_THREAD_SERIALIZED (mpi_exchange.cc says why that cannot deadlock).
  absl::StatusOr<std::unique_ptr<SideChannel>> OpenSideChannel() const override;

  // Lowers the bytes one message of AllToAll carries (512 MiB by default),
  // so that a test can take the path of a piece in several messages with
  // small pieces. `bytes` >= 1, and the same on every rank: the ranks would
  // otherwise cut a piece into different messages.
  void SetAllToAllRoundBytesForTesting(int64_t bytes);

  // The rank that hosts `node`; -1 for a node the session does not know.
  int RankOf(absl::string_view node) const;
  // The session's nodes, in order.
  const std::vector<std::string>& nodes() const { return nodes_; }
  // This rank's nodes (for tests and tools).
  LocalSession& local() { return local_; }

 private:
  struct Comms;
  MpiSession(std::vector<std::string> nodes, std::map<std::string, int> ranks,
             int rank, int size, std::unique_ptr<Comms> comms);
  // `group` with only the tasks of the nodes this rank hosts; InvalidArgument
  // naming the node when a task is on a node of no rank. Depends only on the
  // group, so an error is the same on every rank.
  absl::StatusOr<TaskGroupDef> HostedPart(const TaskGroupDef& group) const;

  const std::vector<std::string> nodes_;
  const std::map<std::string, int, std::less<>> node_ranks_;
  const int rank_;
  const int size_;
  // The most bytes one message of AllToAll carries.
  int64_t all_to_all_round_bytes_;
  std::unique_ptr<Comms> comms_;
  LocalSession local_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_MPI_MPI_SESSION_H_

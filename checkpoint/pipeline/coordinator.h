// Coordinator: the seam of the save pipeline (save_pipeline.h) that knows
// how many processes take part in a checkpoint. It decides which process
// writes which node's databases and which one writes the commit log, and it
// carries every agreement between them: whether every process is ready to
// save, whether every process wrote its databases, the committer's status,
// and the commit log read when a run starts.
//
// Two implementations:
//   NewLocalCoordinator()         one process hosts every node and commits;
//                                 every exchange is a local function call;
//   NewSessionCoordinator(s)      the ranks of a Session (MpiSession): rank r
//                                 hosts the nodes the session places there,
//                                 rank 0 commits (or, with local tiers on
//                                 several hosts, each host's leader in its
//                                 host's log), and every exchange is a
//                                 collective over the session's ranks.
//
// The exchanges marked "Collective" must be called by every process in the
// same order, from one thread per process (the job's thread: a session's
// collectives are not thread-safe), and return the same result on every
// process. Statuses cross processes as StatusProto (proto/jobgraph.proto).
// A failure of the transport itself (MPI) ends the job: Open MPI's errors
// are fatal, and the exchanges CHECK what the session returns, since the
// processes could no longer agree on what they did.

#ifndef JOBGRAPH_CHECKPOINT_PIPELINE_COORDINATOR_H_
#define JOBGRAPH_CHECKPOINT_PIPELINE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpoint/commit/commit_log.h"

namespace jobgraph {

class Session;

// What one process reports of its part of a save: the bytes of blob data in
// the databases it wrote, or why it could not write them.
struct WriteReport {
  absl::Status status;
  int64_t bytes = 0;
  // Counts the processes add up, element by element (the same length on
  // every process): what the commit needs to know of every process's
  // databases beyond their bytes (the epochs they reference).
  std::vector<int64_t> tallies;
};

// Every process's writes, added up.
struct WriteTotals {
  int64_t bytes = 0;
  std::vector<int64_t> tallies;
  // With several committers (SessionCoordinatorOptions): the commit time
  // they all record (CommittedEpoch.committed_unix_micros), so that their
  // logs name the same commit. Unset: each records its own now.
  std::optional<int64_t> commit_unix_micros;
};

// One exchange of the save pipeline. A process brings the report of the
// newest save's write (if one wrote since the last exchange) and, on the
// committer, the status of the commit it ran since then (if one ran); every
// process takes away the agreement on both. Which parts are present must be
// the same on every process.
struct SettleRound {
  std::optional<WriteReport> write;
  // Read on the committer only.
  std::optional<absl::Status> commit;
};
struct Settled {
  // Every process's write: the totals, or the first failure (naming the
  // rank when there are several).
  std::optional<absl::StatusOr<WriteTotals>> write;
  // The committer's status, on every process.
  std::optional<absl::Status> commit;
};

// What AgreeAndCommit settles: every process's write (the total bytes, or
// the first failure), and the committer's commit status (OK when no commit
// was tried because a write failed).
struct CommitRound {
  absl::StatusOr<WriteTotals> write;
  absl::Status commit;
  // When this process knew the agreement's part it takes part in: the
  // committer every write, the others that theirs reached the committer.
  absl::Time agreed_at;
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Whether this process writes the commit log.
  virtual bool commits() const = 0;
  // Whether the processes are more than this one: then the exchanges run on
  // the job's thread only, at the points where every process calls them.
  virtual bool spans_processes() const = 0;
  // Whether several processes commit, each in its own directory (the hosts'
  // local tiers): they then record one commit time, agreed on.
  virtual bool several_commit() const { return false; }
  // Whether this process writes `node`'s databases (and holds its lock).
  virtual bool Hosts(absl::string_view node) const = 0;

  // Collective: InvalidArgument naming the nodes of `nodes` that no process
  // hosts (their databases would never be written). CHECK-fails for a node
  // hosted twice, which a session never does.
  virtual absl::Status CheckPlacement(
      const std::vector<std::string>& nodes) = 0;

  // Collective: the first failure of any process (named by its rank when
  // there are several), or OK.
  virtual absl::Status Agree(const absl::Status& local) = 0;

  // Collective: Agree, and then the committer's `value` on every process.
  virtual absl::StatusOr<int64_t> AgreeWithCommitter(const absl::Status& local,
                                                     int64_t value) = 0;

  // Collective: the committer's `read` of the commit log, on every process.
  virtual absl::StatusOr<CommitLogRead> ShareCommitLog(
      const std::function<absl::StatusOr<CommitLogRead>()>& read) = 0;

  // Collective: one exchange of the save pipeline (see SettleRound).
  virtual Settled Settle(const SettleRound& round) = 0;

  // Collective: a save whose commit follows its write in the same call.
  // Every process's `write` reaches the committer, which runs
  // `commit(totals)` when every write succeeded; the outcome then reaches
  // every process. Two exchanges at the committer's centre (a reduce to it,
  // a broadcast from it) where Settle twice takes two all-reduces.
  virtual CommitRound AgreeAndCommit(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals& totals)>& commit) = 0;
};

// One process that does everything itself.
std::unique_ptr<Coordinator> NewLocalCoordinator();

struct SessionCoordinatorOptions {
  // The ranks that commit, each in its own directory (a host's local tier:
  // checkpoint/tier/host_tiers.h), by rank; rank 0 must be one. Empty (the
  // default): rank 0 alone. With several, AgreeAndCommit gives them one
  // commit time (WriteTotals::commit_unix_micros), AgreeWithCommitter the
  // largest of their values, and the commit statuses are agreed as the
  // first failure of any of them.
  std::vector<bool> committers;
};

// The ranks of `session` (borrowed; must outlive the coordinator). With one
// rank it behaves as NewLocalCoordinator().
std::unique_ptr<Coordinator> NewSessionCoordinator(
    const Session* session, SessionCoordinatorOptions options = {});

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_PIPELINE_COORDINATOR_H_

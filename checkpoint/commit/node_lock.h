// NodeLock: the claim of one running job on one node's checkpoints in a
// checkpoint directory, so that two runs of the same job (a requeue racing a
// still-running job is the usual way) cannot save the same epochs over each
// other.
//
// The lock is the file "<dir>/<node>.lock", held with flock(2) for as long as
// the NodeLock lives. The file names its holder ("host <name> pid <pid>") so
// that a refused job can say who holds it. The kernel drops the lock when the
// holder dies, however it dies; a file left behind by a killed holder is
// simply locked again by the next run. Jobs with disjoint nodes may share a
// directory.
//
// A NodeLock owns its file descriptor. Acquire and the destructor may be
// called from any thread; the lock excludes other processes and other
// NodeLocks of the same process alike.

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_NODE_LOCK_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_NODE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace jobgraph {

class NodeLock {
 public:
  // Takes the lock of `node` in `dir` (which must exist) without waiting.
  // FailedPrecondition naming the node, the directory and the holder when
  // another NodeLock holds it; other errors name the lock file.
  static absl::StatusOr<std::unique_ptr<NodeLock>> Acquire(
      const std::string& dir, const std::string& node);

  // Removes the lock file, then releases the lock.
  ~NodeLock();
  NodeLock(const NodeLock&) = delete;
  NodeLock& operator=(const NodeLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  NodeLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

// "<dir>/<node>.lock".
std::string NodeLockPath(const std::string& dir, const std::string& node);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_NODE_LOCK_H_

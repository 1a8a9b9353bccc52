// An in-memory DB for unit tests, registered as type "memory".
//
// Databases live in one process-wide store keyed by path, so a database
// written and closed under a path can be reopened for reading under it, as
// with LevelDB; nothing touches the disk and nothing survives the process.
// It behaves like the LevelDB backend where tests could notice: keys sort
// bytewise, kNew on an existing path is AlreadyExists, kRead on a missing one
// is NotFound, and a path can be open through only one DB at a time
// (FailedPrecondition otherwise, where LevelDB fails to take its lock).
//
// The functions below are thread-safe; DB objects follow db.h.

#ifndef JOBGRAPH_CHECKPOINT_MEMORY_DB_H_
#define JOBGRAPH_CHECKPOINT_MEMORY_DB_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/db.h"

namespace jobgraph {

inline constexpr char kMemoryDbType[] = "memory";

// The factory registered as "memory"; prefer DbRegistry::Open.
absl::StatusOr<std::unique_ptr<DB>> OpenMemoryDb(const std::string& path,
                                                 DbMode mode,
                                                 const DbOptions& options);

// Direct access to the process-wide store, for tests and for the layers above
// that need the file-system-like operations (exists, rename, delete).
namespace memory_db {

// Whether a database exists at `path`.
bool Exists(const std::string& path);
// The paths of all databases, sorted.
std::vector<std::string> Paths();
// Deletes the database at `path`. NotFound if there is none,
// FailedPrecondition while it is open.
absl::Status Remove(const std::string& path);
// Moves the database at `from` to `to`. NotFound if `from` does not exist,
// AlreadyExists if `to` does, FailedPrecondition while `from` is open.
absl::Status Rename(const std::string& from, const std::string& to);
// Forgets every database. DBs that are open keep working on their data, which
// is no longer reachable by path. Call between tests.
void Clear();

}  // namespace memory_db
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_MEMORY_DB_H_

// An in-memory DB type for unit tests, registered as "memory".
//
// Databases live in one process-wide store keyed by path, so a database
// written and closed under a path can be reopened for reading under it, as
// with LevelDB; nothing touches the disk and nothing survives the process.
// It behaves like the LevelDB adapter where tests could notice: keys sort
// bytewise, kNew on an existing path is AlreadyExists, kRead on a missing one
// is NotFound, and a path can be open through only one DB at a time
// (FailedPrecondition otherwise, where LevelDB fails to take its lock).
// Installing, removing and checking for databases go through its DbType
// (DbRegistry::Global().Find(kMemoryDbType)): Install moves a database to
// its final path under one lock, replacing the database there, and refuses
// (FailedPrecondition) while either is open. Paths need no directories.
//
// The store is thread-safe; DB objects follow db.h.

#ifndef JOBGRAPH_CHECKPOINT_DB_MEMORY_DB_H_
#define JOBGRAPH_CHECKPOINT_DB_MEMORY_DB_H_

#include <string>
#include <vector>

namespace jobgraph {

inline constexpr char kMemoryDbType[] = "memory";

// Inspection of the process-wide store, for tests.
namespace memory_db {

// The paths of all databases, sorted.
std::vector<std::string> Paths();
// Forgets every database. DBs that are open keep working on their data, which
// is no longer reachable by path. Call between tests.
void Clear();

}  // namespace memory_db
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_DB_MEMORY_DB_H_

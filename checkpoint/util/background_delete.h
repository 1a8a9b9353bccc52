// Deletes files and directory trees on a background thread.
//
// Deleting a checkpoint database can take as long as writing it (on disks
// mounted with `discard`, freeing blocks is synchronous; tools/bench/README.md
// has the figures). Installing a re-saved LevelDB database (leveldb_db.h)
// replaces the old one atomically and leaves the old copy, already renamed
// out of the way, to this deleter, so the job does not wait for it.
//
// One process-wide thread, started at the first DeleteInBackground() and
// never stopped, deletes the queued paths in order. Failures are logged (a
// leftover is harmless: it has a temporary name nothing reads) and counted.
// Deletions still queued when the process exits do not happen.
//
// Thread-safe: both functions may be called from any thread.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_BACKGROUND_DELETE_H_
#define JOBGRAPH_CHECKPOINT_UTIL_BACKGROUND_DELETE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace jobgraph {

// Queues `path` (a file or a directory tree, see RemoveRecursively) for
// deletion and returns at once. InvalidArgument, and nothing queued, for an
// empty path or "/"; whether the deletion succeeds shows only in the log and
// in BackgroundDeleteFailures().
absl::Status DeleteInBackground(std::string path);

// Blocks until every path queued before the call has been deleted or has
// failed to be.
void WaitForBackgroundDeletes();

// The number of queued deletions that have failed since the process started
// (a path that no longer exists counts as deleted, not as failed).
int64_t BackgroundDeleteFailures();

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_BACKGROUND_DELETE_H_

// Where things live in a checkpoint directory, and which node names may be
// used there:
//
//   <dir>/<node>.<epoch>     one database per checkpointed node per epoch
//   <dir>/MANIFEST.jobgraph  the commit log (commit_log.h)
//
// Node names become file names, so they are restricted to characters that
// cannot escape the directory. Pure functions; thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINT_PATHS_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINT_PATHS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

// The file name of the commit log in a checkpoint directory. The name is part
// of the on-disk format and predates the term "commit log".
inline constexpr absl::string_view kCommitLogFileName = "MANIFEST.jobgraph";

// "<dir>/<node>.<epoch>": where a node's database for an epoch lives.
std::string CheckpointDbPath(absl::string_view dir, absl::string_view node,
                             int64_t epoch);

// Node names become file names: only letters, digits, '_', '-' and '.', not
// starting with '.', at most 200 characters. InvalidArgument naming the node
// and the rule otherwise.
absl::Status ValidateNodeName(absl::string_view node);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINT_PATHS_H_

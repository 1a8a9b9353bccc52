// Where things live in a checkpoint directory, and which node names may be
// used there:
//
//   <dir>/<node>.<epoch>     one database per checkpointed node per epoch
//   <dir>/MANIFEST.jobgraph  the commit log (commit_log.h)
//
// Node names become file names, so they are restricted to characters that
// cannot escape the directory. Functions; thread-safe. Only
// PrepareCheckpointDirectory touches the file system.

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_CHECKPOINT_PATHS_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_CHECKPOINT_PATHS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

// The file name of the commit log in a checkpoint directory. The name is part
// of the on-disk format and predates the term "commit log".
inline constexpr absl::string_view kCommitLogFileName = "MANIFEST.jobgraph";

// Makes sure `dir` exists (creating it and its parents) and that this
// process may create databases in it. Unavailable either way, as Caffe2's
// cp_accessible() answers: a save cannot happen now, and a later one may.
absl::Status PrepareCheckpointDirectory(const std::string& dir);

// "<dir>/<node>.<epoch>": where a node's database for an epoch lives.
std::string CheckpointDbPath(absl::string_view dir, absl::string_view node,
                             int64_t epoch);

// Node names become file names: only letters, digits, '_', '-' and '.', not
// starting with '.', at most 200 characters. InvalidArgument naming the node
// and the rule otherwise.
absl::Status ValidateNodeName(absl::string_view node);

// A decimal number without sign or leading zeros, as jobgraph writes epochs
// and pids into names; nullopt for anything else.
std::optional<int64_t> ParseDecimal(absl::string_view text);

// The node and epoch that a database's directory name "<node>.<epoch>"
// stands for.
struct CheckpointDbName {
  std::string node;
  int64_t epoch = 0;
};

// "<node>.<epoch>" with a valid node name (ValidateNodeName) and a decimal
// epoch (ParseDecimal); the epoch follows the last dot. nullopt for anything
// else, temporaries included.
std::optional<CheckpointDbName> ParseCheckpointDbName(
    absl::string_view basename);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_CHECKPOINT_PATHS_H_

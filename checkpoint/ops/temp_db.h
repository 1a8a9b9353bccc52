// The temporary database of the commit protocol that WriteCheckpointDb and
// CopyCheckpointDb (save_load_ops.h) share: a database is made complete and
// durable under "<dir>/.<name>.tmp-<pid>-<n>", the form IsSaveTempName
// recognises, and then installed under its final name "<dir>/<name>".
// Internal to the save_load_ops target; defined in save_op.cc, which owns
// the temporary names.
//
// Functions only; thread-safe (temporary names are unique in the process).

#ifndef JOBGRAPH_CHECKPOINT_OPS_TEMP_DB_H_
#define JOBGRAPH_CHECKPOINT_OPS_TEMP_DB_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"

namespace jobgraph {
namespace temp_db {

// A database path without trailing slashes, split into its directory and
// its last component.
struct SplitPath {
  std::string path;
  std::string dir;
  std::string base;
};

// InvalidArgument naming `path` when it has no last component to name a
// database ("", "/", "a/..").
absl::StatusOr<SplitPath> Split(const std::string& path);

// The protocol's steps around `write`, which must leave a finished, closed
// (hence durable) database of `type` at the temporary path it is given, or
// nothing there:
//  1. type.CheckInstallable(split.path), so that nothing is written when
//     the final path cannot take the database;
//  2. write(temp), for a fresh "<dir>/.<base>.tmp-<pid>-<n>" (a leftover
//     of that exact name, which only a crashed process with the same pid
//     leaves, is removed first), then Failpoint(failpoint);
//  3. type.Install(temp, split.path).
// On an error the temporary database is removed (best effort) and
// split.path holds what it held before (or the new database, when only
// making Install's change durable failed: DbType::Install).
absl::Status InstallThroughTemp(
    const DbType& type, const SplitPath& split, absl::string_view failpoint,
    const std::function<absl::Status(const std::string& temp)>& write);

}  // namespace temp_db
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_OPS_TEMP_DB_H_

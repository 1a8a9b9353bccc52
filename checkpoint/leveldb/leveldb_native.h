// A database opened with LevelDB's own DB::Open, with its cursor and writer:
// a kNew database that is not written directly (leveldb_direct.h), and, for
// reading, the private copy of a database whose log still holds data, which
// only LevelDB's recovery reads (leveldb_db.cc decides which and makes the
// copy). The read-only reader (leveldb_tables.h) serves every other read.
// Kept apart from LevelDbType's open logic because it is everything that
// talks to leveldb::DB: its options, the Envs it writes through
// (leveldb_write_env.h), and the conversion of its leveldb::Status into
// absl::Status. Internal to the LevelDB adapter.
//
// Ownership: the DB owns LevelDB's DB, its block cache and Envs, and the
// copy it was opened in, which it removes when released.
// Thread-safety: as db.h says for every DB.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_NATIVE_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_NATIVE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_options.h"

namespace jobgraph {

// Opens the database at `path` through DB::Open (for kNew it creates it in
// the existing, empty directory). `open_path`, when not empty, is where
// LevelDB opens it instead: a private copy of `path`, removed when the DB is
// released; errors still name `path`. `tuning` supplies the LevelDB options.
// `on_release` runs once, after LevelDB is closed, when the DB is closed or
// destroyed (a failed open included).
absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbNative(
    const std::string& path, DbMode mode, const DbOptions& options,
    const LevelDbOptions& tuning, std::function<void()> on_release,
    std::string open_path = "");

// `status` with `open_path` (where LevelDB opened a private copy of the
// database, which is gone by the time anyone reads the message) replaced by
// `path`, the database's own.
absl::Status NamingDatabase(absl::Status status, const std::string& open_path,
                            const std::string& path);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_NATIVE_H_

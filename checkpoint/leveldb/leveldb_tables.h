// A LevelDB database read without LevelDB's DB::Open: its MANIFEST-* file is
// parsed (every record's CRC checked; leveldb_manifest.h), the live table
// files it lists are checked against the directory (each present with its
// recorded size), and the tables are read through LevelDB's public Table API
// (each block and footer checked first; leveldb_table_checks.h) and merged.
// Nothing in the directory is created, written, renamed or deleted, so a
// committed checkpoint stays byte- and mtime-identical and can be read from
// read-only storage. Internal to the LevelDB adapter.
//
// A database held in memory (leveldb_held.h) is read the same way from its
// bytes.
//
// Only databases whose contents are all in tables qualify: a non-empty log
// file (a database closed without flushing its memtable) needs LevelDB's
// recovery, and OpenLevelDbTables then returns Unimplemented so that the
// caller can fall back to DB::Open on a copy (leveldb_db.h).
//
// The returned DB owns its open table files; it is thread-compatible, like
// every DB.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_held.h"

namespace jobgraph {

// Opens the database at `path` for reading (DbMode::kRead). DataLoss naming
// the file for a damaged CURRENT or MANIFEST-* file, a listed table that is
// missing or has the wrong size, or a table that does not open.
// `on_release` runs once when the DB is closed or destroyed.
absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbTables(
    const std::string& path, const DbOptions& options,
    std::function<void()> on_release);

// The same for the database held in memory as `path` (leveldb_held.h),
// whose bytes the DB shares until it is closed. Nothing on disk is read;
// VerifyFiles has nothing to read (every file was checked when it was
// held).
absl::StatusOr<std::unique_ptr<DB>> OpenHeldLevelDbTables(
    const std::string& path, std::shared_ptr<const HeldLevelDb> held,
    const DbOptions& options);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_

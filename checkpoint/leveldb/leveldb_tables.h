// A LevelDB database read without LevelDB's DB::Open: its MANIFEST-* file is
// parsed (every record's CRC checked), the live table files it lists are
// checked against the directory (each present with its recorded size), and
// the tables are read through LevelDB's public Table API and merged. Nothing
// in the directory is created, written, renamed or deleted, so a committed
// checkpoint stays byte- and mtime-identical and can be read from read-only
// storage. Internal to the LevelDB adapter.
//
// Only databases whose contents are all in tables qualify: a non-empty log
// file (a database closed without flushing its memtable) needs LevelDB's
// recovery, and OpenLevelDbTables then returns Unimplemented so that the
// caller can fall back to DB::Open on a copy (leveldb_db.h).
//
// The returned DB is thread-compatible, like every DB.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/db/db.h"
#include "leveldb/env.h"

namespace jobgraph {

// Opens the database at `path` for reading (DbMode::kRead). DataLoss naming
// the file for a damaged CURRENT or MANIFEST-* file, a listed table that is
// missing or has the wrong size, or a table that does not open.
// `on_release` runs once when the DB is closed or destroyed.
absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbTables(
    const std::string& path, const DbOptions& options,
    std::function<void()> on_release);

// Checks the database at `path` against its JOBGRAPH_FILES (DB::VerifyFiles
// of a database read from its tables; also used before a database with a
// non-empty log is recovered).
absl::Status VerifyLevelDbFileList(const std::string& path,
                                   const DB::FileCheck& check);

// What a writer recorded of a file as it wrote it.
struct WrittenFile {
  uint64_t size = 0;
  uint32_t crc = 0;
};

// Writes JOBGRAPH_FILES into the closed database at `path`: every other file
// of the directory with its size and CRC-32C, as `recorded` returns them for
// the file's full path; a file it does not know, or whose size differs from
// the record (LOCK, created by a lock), is read once. Written atomically and
// durably (WriteFileAtomically).
absl::Status WriteLevelDbFileList(
    const std::string& path,
    const std::function<std::optional<WrittenFile>(const std::string&)>&
        recorded);

// An Env that reads table files (*.ldb, *.sst) checking the structure of
// every block before LevelDB parses it, whose own block reader trusts
// damaged entries with out-of-bounds copies; the default Env otherwise.
// Lives for the whole process; thread-safe.
leveldb::Env* BlockCheckingTableEnv();

// DataLoss naming the table when a table file's footer places a block past
// the end of the file, which LevelDB's Table::Open would trust with an
// allocation of that size. Checks every table file of the directory.
absl::Status CheckLevelDbTableFooters(const std::string& path);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLES_H_

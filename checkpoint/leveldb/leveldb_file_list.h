// JOBGRAPH_FILES, jobgraph's own record of a LevelDB database's files: the
// name, size and CRC-32C of every other file in the directory, as the
// writers saw the bytes pass (a DbFileList in a checksummed frame;
// checkpoint/FORMAT.md). Every way of closing a kNew database writes it
// (leveldb_native.cc through LevelDB, leveldb_direct.cc without), and every
// way of reading one checks against it (DB::VerifyFiles, and the copy made
// before LevelDB's recovery in leveldb_db.cc). A file of its own because the
// writers and the readers all use it and it is jobgraph's format, not
// LevelDB's. The copy of a database (LevelDbType::Copy, leveldb_copy.cc)
// checks every byte it copies against it, and so do Pack and Unpack
// (leveldb_pack.cc), the latter against the list the packed bytes carry.
// Internal to the LevelDB adapter.
//
// Ownership: nothing outlives a call. Thread-safe; a result describes the
// directory only while no one else writes to it (the DB holding the path).

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILE_LIST_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILE_LIST_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"

namespace jobgraph {

// One file as JOBGRAPH_FILES records it.
struct ListedFile {
  std::string name;  // a name in the database's directory, never a path
  uint64_t size = 0;
  uint32_t crc = 0;  // CRC-32C of the file's bytes
};

// The files recorded in the JOBGRAPH_FILES of the database at `path`, in
// the record's order, after checking the record itself: its checksummed
// frame, that it parses, and that every entry is a plain file name (no
// '/', not "." or "..", not JOBGRAPH_FILES), listed once, with a size that
// is not negative. NotFound naming the record's path when the database has
// none (an unfinished database, or one written before such records);
// DataLoss naming it when it is damaged. `bytes`, when given, receives the
// record's bytes as they were read and checked, so that a copy writes
// exactly what was checked.
absl::StatusOr<std::vector<ListedFile>> ReadLevelDbFileList(
    const std::string& path, std::string* bytes = nullptr);

// Checks the database at `path` against its JOBGRAPH_FILES (DB::VerifyFiles
// of a database read from its tables or through LevelDB; also used before a
// database with a non-empty log is recovered).
absl::Status VerifyLevelDbFileList(const std::string& path,
                                   const DB::FileCheck& check);

// The files that `bytes`, the content of a JOBGRAPH_FILES, records, after
// the checks ReadLevelDbFileList makes; DataLoss naming `what` (e.g. "file
// list <path>") when they fail. For a record that did not come from a file
// of a database (the one a packed database carries, leveldb_pack.cc).
absl::StatusOr<std::vector<ListedFile>> ParseLevelDbFileList(
    absl::string_view bytes, absl::string_view what);

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

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FILE_LIST_H_

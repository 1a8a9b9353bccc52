// The descriptor of a LevelDB database read without LevelDB: CURRENT, the
// MANIFEST-* file it names, that file's log records (every record's CRC
// checked) and the VersionEdits in them, reduced to the live table files.
// Kept apart from the table reader (leveldb_tables.cc) because it reads
// LevelDB's log format, which nothing else of the reader does, and it is
// where a damaged descriptor is found. Internal to the LevelDB adapter.
//
// Reads the files and returns copies; owns nothing afterwards. Thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_MANIFEST_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_MANIFEST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace jobgraph {

// A live table as the descriptor records it.
struct LevelDbTableMeta {
  uint64_t size = 0;
  std::string smallest;  // internal keys
  std::string largest;
};

// The live table files of the database at `path`, by file number, as the
// MANIFEST-* file named by CURRENT lists them. DataLoss naming the file for
// a damaged CURRENT or MANIFEST-* file (or one CURRENT names that does not
// exist); FailedPrecondition for a comparator other than LevelDB's bytewise
// one.
absl::StatusOr<std::map<uint64_t, LevelDbTableMeta>> ReadLevelDbLiveTables(
    const std::string& path);

// The same, reading the database's files through `read` (by file name;
// NotFound for a file that is not there): a database held in memory
// (leveldb_held.h).
absl::StatusOr<std::map<uint64_t, LevelDbTableMeta>> ReadLevelDbLiveTables(
    const std::string& path,
    const std::function<absl::StatusOr<std::string>(const std::string& name)>&
        read);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_MANIFEST_H_

// The small LevelDB database of db_files_fuzzer, whose JOBGRAPH_FILES each
// input replaces. make_corpus writes the same database to take its pristine
// file list as a seed: the one kind of input that verifies, so it must come
// from this very database (same keys, values and options).

#ifndef JOBGRAPH_TESTS_FUZZ_DB_FILES_FIXTURE_H_
#define JOBGRAPH_TESTS_FUZZ_DB_FILES_FIXTURE_H_

#include <memory>
#include <string>

#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace fuzz {

// The file list of a LevelDB database (checkpoint/leveldb/leveldb_files.h,
// private to the LevelDB adapter).
inline constexpr char kDbFileList[] = "JOBGRAPH_FILES";

// Writes the database at `path` (which must not exist) and closes it.
inline void WriteDbFilesFixture(const std::string& path) {
  DbOptions options;
  options.durable_close = false;
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open(kDefaultDbType, path, DbMode::kNew, options);
  FUZZ_CHECK(db.ok(), db.status().ToString());
  {
    absl::StatusOr<std::unique_ptr<Writer>> writer = (*db)->NewWriter();
    FUZZ_CHECK(writer.ok(), writer.status().ToString());
    FUZZ_CHECK((*writer)->Put("a", "value of a").ok(), "put");
    FUZZ_CHECK((*writer)->Put("b", std::string(300, 'b')).ok(), "put");
    FUZZ_CHECK((*writer)->Flush().ok(), "flush");
  }
  absl::Status closed = (*db)->Close();
  FUZZ_CHECK(closed.ok(), closed.ToString());
}

}  // namespace fuzz
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_FUZZ_DB_FILES_FIXTURE_H_

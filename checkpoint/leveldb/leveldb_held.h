// Packed LevelDB databases (leveldb_pack.cc) held in memory under a path:
// LevelDbType::HoldPacked checks one and registers it here, and the
// read-only reader (leveldb_tables.cc) opens a held path from these bytes
// instead of the file system. What a resume fetches from another host is
// loaded this way once, without being written anywhere and read back.
// Internal to the LevelDB adapter.
//
// The registry is one for the process and thread-safe. A held database is
// shared: a reader that opened it keeps its bytes alive past a release.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_HELD_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_HELD_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

struct HeldLevelDb {
  // The packed database; `files` are views into it.
  std::string packed;
  // Every file of the database (JOBGRAPH_FILES included) by name, each
  // checked against the list when it was held.
  std::map<std::string, absl::string_view, std::less<>> files;
};

// Registers `held` under `path` (as CanonicalPath would not: the path is a
// name here, compared as given). AlreadyExists naming the path when one is
// held there.
absl::Status RegisterHeldLevelDb(const std::string& path,
                                 std::shared_ptr<const HeldLevelDb> held);
// The database held under `path`, or null.
std::shared_ptr<const HeldLevelDb> FindHeldLevelDb(const std::string& path);
// Forgets the database held under `path`; nothing when there is none.
void ForgetHeldLevelDb(const std::string& path);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_HELD_H_

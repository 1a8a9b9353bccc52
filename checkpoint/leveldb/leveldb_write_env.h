// The leveldb::Envs that a kNew database is written through when LevelDB
// itself writes it (leveldb_native.cc). ChecksummingEnv records the size and
// CRC-32C of every file as its bytes pass, so that JOBGRAPH_FILES
// (leveldb_file_list.h) is written at close without reading the database
// back, and it is where io_faults reach LevelDB's writes. NewDiscardLogsEnv
// drops what LevelDB appends to its logs, for databases that flush their
// memtable on close. Kept apart from the DB because LevelDB calls them, from
// its background thread too, while the DB only reads the records at close.
// Internal to the LevelDB adapter.
//
// Ownership: the DB that opens LevelDB owns its Envs and destroys LevelDB
// first; every file they return refers to its Env (LevelDB owns the file).
// Thread-safety: thread-safe, as LevelDB requires of an Env.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_WRITE_ENV_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_WRITE_ENV_H_

#include <map>
#include <memory>
#include <mutex>  // NOLINT(build/c++11)
#include <optional>
#include <string>

#include "checkpoint/leveldb/leveldb_file_list.h"
#include "leveldb/env.h"
#include "leveldb/status.h"

namespace jobgraph {

// Records the size and CRC-32C of every file written through it, as the
// bytes pass (no second read), following renames and removals. The records
// become the database's JOBGRAPH_FILES list at close. Thread-safe: LevelDB
// writes tables from its background thread.
class ChecksummingEnv final : public leveldb::EnvWrapper {
 public:
  ChecksummingEnv() : EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status NewWritableFile(const std::string& name,
                                  leveldb::WritableFile** result) override;
  leveldb::Status NewAppendableFile(const std::string& name,
                                    leveldb::WritableFile** result) override;
  leveldb::Status RenameFile(const std::string& from,
                             const std::string& to) override;
  leveldb::Status RemoveFile(const std::string& name) override;

  // The record of `path`, if every byte of it was written through this Env.
  std::optional<WrittenFile> Find(const std::string& path) const;

 private:
  class File;

  void Set(const std::string& name, WrittenFile file);
  void Forget(const std::string& name);

  mutable std::mutex mu_;
  std::map<std::string, WrittenFile> files_;
};

// `target`, except that new log files ("<number>.log") discard their
// contents. Only for kNew databases that flush their memtable on close.
// `target` must outlive the returned Env.
std::unique_ptr<leveldb::Env> NewDiscardLogsEnv(leveldb::Env* target);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_WRITE_ENV_H_

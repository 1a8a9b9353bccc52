// What a checkpoint directory holds, as far as `ckpt` is concerned: the
// commit log, the per-node databases "<node>.<epoch>", the temporary
// databases of saves (".<node>.<epoch>.tmp-<pid>-<n>") and the temporary
// files of commit log writes ("MANIFEST.jobgraph.tmp-<pid>[-<n>]"). Everything
// else is someone else's and is ignored (and never deleted).
//
// Scanning only lists and stats names; it opens no database.
//
// Thread-compatible: the functions hold no state.

#ifndef JOBGRAPH_TOOLS_CKPT_CHECKPOINT_DIR_H_
#define JOBGRAPH_TOOLS_CKPT_CHECKPOINT_DIR_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/db/db.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace ckpt {

// A database name "<node>.<epoch>" split in two.
// For a save's temporary name (IsSaveTempName): the database it was for and
// the pid of the process that made it. Either may be unknown.
struct SaveTempName {
  std::optional<CheckpointDbName> db;
  std::optional<int64_t> pid;
};
SaveTempName ParseSaveTempName(absl::string_view basename);

// "MANIFEST.jobgraph.tmp-<pid>" (WriteCommitLog) or
// "MANIFEST.jobgraph.tmp-<pid>-<n>" (WriteFileAtomically), or the same of
// the previous copy ("MANIFEST.jobgraph.prev.tmp-<pid>-<n>"); the pid, or
// nullopt when `basename` is not such a name.
std::optional<int64_t> ParseCommitLogTempName(absl::string_view basename);

struct CheckpointDir {
  std::string path;
  // The commit log when log_status is OK. NotFound: there is
  // none (nothing was ever committed). Other codes: it exists but cannot be
  // read (DataLoss when damaged, FailedPrecondition for a newer format).
  absl::Status log_status;
  CommitLog commit_log;
  // OK, or why the commit log itself is damaged or missing while its previous
  // copy is intact: `commit_log` is then that copy and log_status is OK.
  absl::Status log_damage;

  // Directories named "<node>.<epoch>", sorted by epoch, then node.
  struct Database {
    CheckpointDbName name;
    std::string path;
  };
  std::vector<Database> databases;

  // Directories with a save's temporary name, sorted by name.
  struct SaveTemp {
    std::string basename;
    std::string path;
    SaveTempName parsed;
  };
  std::vector<SaveTemp> save_temps;

  // Regular files with a commit log write's temporary name, sorted.
  struct CommitLogTemp {
    std::string basename;
    std::string path;
    int64_t pid = 0;
  };
  std::vector<CommitLogTemp> commit_log_temps;

  // True when the commit log lists `node` in epoch `epoch`.
  bool IsCommitted(const std::string& node, int64_t epoch) const;
  // The db_type to open databases with: the commit log's, else kDefaultDbType.
  std::string DbType() const;
};

// Scans `dir`. NotFound when it does not exist, FailedPrecondition when it
// is not a directory or holds nothing of a jobgraph checkpoint (no commit log,
// no database, no temporary; a hint is added when `dir` is itself a
// database). A commit log that cannot be read is not an error here: see
// CheckpointDir::log_status.
absl::StatusOr<CheckpointDir> ScanCheckpointDir(const std::string& dir);

// ScanCheckpointDir for a command: on failure prints "ckpt: <error>" to
// `err` and returns nullopt (the command then exits with kExitUsage).
std::optional<CheckpointDir> ScanOrReport(const std::string& dir,
                                          std::ostream& err);

// The DB type a command opens databases with: `flag` if set, else the
// directory's (CheckpointDir::DbType).
std::string DbTypeFor(const CheckpointDir& dir, const std::string& flag);

// Whether a process that may still be using a temporary is alive: `pid`
// exists on this machine, or (for a save's temporary database, whose type is
// `db_type`; null for other temporaries) the DB type says another process
// has the database open (DbType::OpenInAnotherProcess). Returns the reason,
// or nullopt when neither holds. A checkpoint directory shared between
// machines can only be judged by the DB type's locks (and only where the
// file system keeps them across machines), so `gc` is meant for when no job
// writes to the directory.
std::optional<std::string> TempInUse(const std::string& path,
                                     std::optional<int64_t> pid,
                                     const DbType* db_type);

// The size of the regular files directly inside `dir` (the databases of
// directory-backed types keep no subdirectories), or of the file at `dir`.
absl::StatusOr<int64_t> DiskBytes(const std::string& dir);

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_CHECKPOINT_DIR_H_

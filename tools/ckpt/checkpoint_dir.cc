#include "tools/ckpt/checkpoint_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace ckpt {
namespace {

constexpr absl::string_view kSaveTempMarker = ".tmp-";

enum class FileType { kMissing, kDirectory, kRegular, kOther };

absl::StatusOr<FileType> TypeOf(const std::string& path) {
  struct stat st;
  // lstat: a symlink is never followed, so nothing outside the directory is
  // ever taken for part of the checkpoint.
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return FileType::kMissing;
    return absl::ErrnoToStatus(errno, absl::StrCat("lstat ", path));
  }
  if (S_ISDIR(st.st_mode)) return FileType::kDirectory;
  if (S_ISREG(st.st_mode)) return FileType::kRegular;
  return FileType::kOther;
}

}  // namespace

SaveTempName ParseSaveTempName(absl::string_view basename) {
  SaveTempName parsed;
  if (!IsSaveTempName(basename)) return parsed;
  absl::ConsumePrefix(&basename, ".");
  const size_t marker = basename.rfind(kSaveTempMarker);
  parsed.db = ParseCheckpointDbName(basename.substr(0, marker));
  absl::string_view suffix = basename.substr(marker + kSaveTempMarker.size());
  parsed.pid = ParseDecimal(suffix.substr(0, suffix.find('-')));
  return parsed;
}

std::optional<int64_t> ParseCommitLogTempName(absl::string_view basename) {
  // Temporaries of the log and of its previous copy.
  const std::string prefix = absl::StrCat(kCommitLogFileName, ".tmp-");
  const std::string previous_prefix =
      absl::StrCat(kCommitLogFileName, kPreviousCommitLogSuffix, ".tmp-");
  if (!absl::ConsumePrefix(&basename, prefix) &&
      !absl::ConsumePrefix(&basename, previous_prefix)) {
    return std::nullopt;
  }
  const size_t dash = basename.find('-');
  std::optional<int64_t> pid = ParseDecimal(basename.substr(0, dash));
  if (!pid.has_value()) return std::nullopt;
  if (dash != absl::string_view::npos &&
      !ParseDecimal(basename.substr(dash + 1)).has_value()) {
    return std::nullopt;
  }
  return pid;
}

bool CheckpointDir::IsCommitted(const std::string& node, int64_t epoch) const {
  if (!log_status.ok()) return false;
  for (const CommittedEpoch& e : commit_log.epoch()) {
    if (e.epoch() != epoch) continue;
    return std::find(e.node().begin(), e.node().end(), node) != e.node().end();
  }
  return false;
}

std::string CheckpointDir::DbType() const {
  if (log_status.ok() && !commit_log.db_type().empty()) {
    return commit_log.db_type();
  }
  return kDefaultDbType;
}

absl::StatusOr<CheckpointDir> ScanCheckpointDir(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(FileType type, TypeOf(dir));
  if (type == FileType::kMissing) {
    return absl::NotFoundError(absl::StrCat(dir, " does not exist"));
  }
  if (type != FileType::kDirectory) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a directory"));
  }
  CheckpointDir result;
  result.path = dir;
  absl::StatusOr<CommitLogRead> log = ReadCommitLogWithFallback(dir);
  if (log.ok()) {
    result.commit_log = std::move(log->log);
    result.log_damage = log->damage;
  } else {
    result.log_status = log.status();
  }

  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name);
    if (std::optional<CheckpointDbName> db = ParseCheckpointDbName(name)) {
      JG_ASSIGN_OR_RETURN(FileType t, TypeOf(path));
      if (t == FileType::kDirectory) {
        result.databases.push_back({*std::move(db), path});
      }
    } else if (IsSaveTempName(name)) {
      JG_ASSIGN_OR_RETURN(FileType t, TypeOf(path));
      if (t == FileType::kDirectory) {
        result.save_temps.push_back({name, path, ParseSaveTempName(name)});
      }
    } else if (std::optional<int64_t> pid = ParseCommitLogTempName(name)) {
      JG_ASSIGN_OR_RETURN(FileType t, TypeOf(path));
      if (t == FileType::kRegular) {
        result.commit_log_temps.push_back({name, path, *pid});
      }
    }
  }
  std::sort(
      result.databases.begin(), result.databases.end(),
      [](const CheckpointDir::Database& a, const CheckpointDir::Database& b) {
        return std::tie(a.name.epoch, a.name.node) <
               std::tie(b.name.epoch, b.name.node);
      });

  if (absl::IsNotFound(result.log_status) && result.databases.empty() &&
      result.save_temps.empty() && result.commit_log_temps.empty()) {
    std::string message =
        absl::StrCat(dir, " is not a jobgraph checkpoint directory: it has no ",
                     kCommitLogFileName, " and no <node>.<epoch> databases");
    // Only a hint: any error just leaves it out.
    absl::StatusOr<const DbType*> type =
        DbRegistry::Global().Find(result.DbType());
    absl::StatusOr<bool> is_database =
        type.ok() ? (*type)->Exists(dir) : type.status();
    if (is_database.ok() && *is_database) {
      absl::StrAppend(&message,
                      " (it looks like one database: use `ckpt show` on it)");
    }
    return absl::FailedPreconditionError(message);
  }
  return result;
}

std::optional<std::string> TempInUse(const std::string& path,
                                     std::optional<int64_t> pid,
                                     const DbType* db_type) {
  // kill(0) or kill(-1) would mean process groups; only real pids count.
  if (pid.has_value() && *pid > 0 && *pid <= INT_MAX) {
    const pid_t p = static_cast<pid_t>(*pid);
    if (::kill(p, 0) == 0 || errno == EPERM) {
      return absl::StrCat("process ", *pid, " that made it is running");
    }
  }
  if (db_type != nullptr) {
    if (std::optional<int64_t> holder = db_type->OpenInAnotherProcess(path)) {
      return absl::StrCat("process ", *holder, " has the database open");
    }
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> DiskBytes(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("lstat ", dir));
  }
  if (!S_ISDIR(st.st_mode)) return static_cast<int64_t>(st.st_size);
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  int64_t total = 0;
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name);
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += st.st_size;
    }
  }
  return total;
}

std::optional<CheckpointDir> ScanOrReport(const std::string& dir,
                                          std::ostream& err) {
  absl::StatusOr<CheckpointDir> scanned = ScanCheckpointDir(dir);
  if (!scanned.ok()) {
    err << "ckpt: " << scanned.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(scanned);
}

std::string DbTypeFor(const CheckpointDir& dir, const std::string& flag) {
  return flag.empty() ? dir.DbType() : flag;
}

}  // namespace ckpt
}  // namespace jobgraph

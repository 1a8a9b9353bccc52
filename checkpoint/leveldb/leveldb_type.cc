// The file-system side of LevelDbType (leveldb_db.h): recognising, installing
// and removing LevelDB database directories. Opening is in leveldb_db.cc.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_held.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// What is at a path, as far as installing a database there is concerned.
enum class Contents {
  kNothing,
  kEmptyDirectory,  // rename(2) replaces it
  kDatabase,        // a LevelDB database, possibly damaged
  kNotADirectory,
  kForeignDirectory,  // a non-empty directory without LevelDB's files
};

absl::StatusOr<Contents> Inspect(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) return Contents::kNothing;
    return absl::ErrnoToStatus(error, absl::StrCat("lstat ", path));
  }
  if (!S_ISDIR(st.st_mode)) return Contents::kNotADirectory;
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  if (names.empty()) return Contents::kEmptyDirectory;
  // A LevelDB database always has a LOCK file and a MANIFEST-* descriptor
  // besides CURRENT; any of them marks it as one, so a damaged checkpoint
  // (CURRENT lost) is still replaced when its epoch is saved again.
  const bool is_leveldb =
      std::any_of(names.begin(), names.end(), [](const std::string& name) {
        return name == kLevelDbCurrentFile || name == kLevelDbLockFile ||
               name == kDbFileListName ||
               absl::StartsWith(name, kLevelDbManifestPrefix);
      });
  return is_leveldb ? Contents::kDatabase : Contents::kForeignDirectory;
}

// What is at `path`, or FailedPrecondition when it is something that
// installing a database there must not replace.
absl::StatusOr<Contents> InspectReplaceable(const std::string& path) {
  JG_ASSIGN_OR_RETURN(Contents contents, Inspect(path));
  // Replacing deletes the old copy, so only ever replace what is plainly a
  // database: a mistyped path must not cost a user their files.
  if (contents == Contents::kNotADirectory) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " exists and is not a directory, so it is not a database that "
        "saving may replace; remove it or choose another path"));
  }
  if (contents == Contents::kForeignDirectory) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is a non-empty directory that is not a LevelDB database (no ",
        kLevelDbCurrentFile, ", ", kLevelDbLockFile, " or ",
        kLevelDbManifestPrefix,
        "* file), so saving may not replace it; remove it or choose another "
        "path"));
  }
  return contents;
}

absl::Status CheckParentDir(const std::string& path) {
  const std::string dir = ParentDir(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the directory ", dir, " that should hold checkpoint database ", path,
          " does not exist; create it first (the checkpoint manager does)"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("stat ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ", which should hold checkpoint database ", path,
                     ", is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> LevelDbType::Exists(const std::string& path) const {
  if (FindHeldLevelDb(path) != nullptr) return true;
  JG_ASSIGN_OR_RETURN(Contents contents, Inspect(path));
  return contents == Contents::kDatabase;
}

absl::Status LevelDbType::CheckInstallable(const std::string& path) const {
  JG_RETURN_IF_ERROR(CheckParentDir(path));
  return InspectReplaceable(path).status();
}

absl::Status LevelDbType::Install(const std::string& temp_path,
                                  const std::string& final_path) const {
  JG_ASSIGN_OR_RETURN(bool have_new, Exists(temp_path));
  if (!have_new) {
    return absl::NotFoundError(absl::StrCat(
        "no LevelDB database at ", temp_path, " to install as ", final_path));
  }
  // Inspected again even after CheckInstallable: the final path may have
  // changed while the new database was written.
  JG_ASSIGN_OR_RETURN(Contents existing, InspectReplaceable(final_path));
  if (existing != Contents::kDatabase) {
    // rename(2) replaces an empty directory.
    return RenameAndSync(temp_path, final_path);
  }
  // rename(2) cannot replace a non-empty directory; exchanging the two is
  // just as atomic and leaves the old copy under the temporary name.
  JG_RETURN_IF_ERROR(ExchangeAndSync(temp_path, final_path));
  // The new database is in place; a leftover old copy only costs space, and
  // deleting it takes as long as writing it did.
  absl::Status deleting = DeleteInBackground(temp_path);
  if (!deleting.ok()) LOG(WARNING) << deleting;
  return absl::OkStatus();
}

absl::Status LevelDbType::Remove(const std::string& path) const {
  return RemoveRecursively(path);
}

std::optional<int64_t> LevelDbType::OpenInAnotherProcess(
    const std::string& path) const {
  const std::string lock = JoinPath(path, kLevelDbLockFile);
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // F_GETLK reports a conflicting lock of another process, never our own.
  struct flock query = {};
  query.l_type = F_WRLCK;
  query.l_whence = SEEK_SET;
  const bool locked =
      ::fcntl(fd, F_GETLK, &query) == 0 && query.l_type != F_UNLCK;
  ::close(fd);
  if (!locked) return std::nullopt;
  return static_cast<int64_t>(query.l_pid);
}

}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_db.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/leveldb/leveldb_direct.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_native.h"
#include "checkpoint/leveldb/leveldb_table_checks.h"
#include "checkpoint/leveldb/leveldb_tables.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// Paths (canonical) of the databases open in this process. LevelDB would
// refuse a second open with "lock ... already held by process", an I/O error;
// this gives a clear FailedPrecondition instead.
class OpenPaths {
 public:
  static OpenPaths& Get() {
    static OpenPaths* open_paths = new OpenPaths;  // Never destroyed.
    return *open_paths;
  }
  bool Acquire(const std::string& canonical) {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_.insert(canonical).second;
  }
  void Release(const std::string& canonical) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.erase(canonical);
  }

 private:
  std::mutex mu_;
  std::set<std::string> paths_ ABSL_GUARDED_BY(mu_);
};

absl::Status ValidateTuning(const LevelDbOptions& tuning,
                            const std::string& path) {
  // LevelDB clips these silently, after an int cast that wraps values of
  // 2 GiB and more to the minimum; a wrong value should be loud instead.
  struct Range {
    const char* name;
    size_t value;
    size_t min;
    size_t max;
  };
  const Range ranges[] = {
      {"write_buffer_size", tuning.write_buffer_size, size_t{64} << 10,
       size_t{1} << 30},
      {"max_file_size", tuning.max_file_size, size_t{1} << 20, size_t{1} << 30},
      {"block_size", tuning.block_size, size_t{1} << 10, size_t{4} << 20},
  };
  for (const Range& range : ranges) {
    if (range.value < range.min || range.value > range.max) {
      return absl::InvalidArgumentError(
          absl::StrCat("LevelDB database ", path, ": ", range.name, " = ",
                       range.value, " is outside [", range.min, ", ", range.max,
                       "]; LevelDB would silently clip it"));
    }
  }
  return absl::OkStatus();
}

// Writes `bytes` to a new file `path` (no fsync: a scratch copy).
absl::Status WriteScratchFile(const std::string& path,
                              absl::string_view bytes) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("write ", path));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", path));
  }
  return absl::OkStatus();
}

// DataLoss naming the file when the database at `path` holds a file that
// LevelDB would take for one of its own, numbered 0, a number it never
// writes: its recovery asserts (aborting the process) on such a log.
absl::Status CheckFileNumbers(const std::string& path) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    absl::string_view number = name;
    if (!absl::ConsumePrefix(&number, "MANIFEST-") &&
        !absl::ConsumeSuffix(&number, ".log") &&
        !absl::ConsumeSuffix(&number, ".ldb") &&
        !absl::ConsumeSuffix(&number, ".sst") &&
        !absl::ConsumeSuffix(&number, ".dbtmp")) {
      continue;
    }
    if (!number.empty() &&
        number.find_first_not_of('0') == absl::string_view::npos) {
      return absl::DataLossError(
          absl::StrCat("LevelDB database ", path, " is damaged: it holds ",
                       name, ", a file number LevelDB never writes"));
    }
  }
  return absl::OkStatus();
}

// Copies the database at `path` into a new directory under the temp
// directory for LevelDB's recovery, and returns its path. Tables are
// hard-linked when the temp directory is on the same file system (LevelDB
// never changes a table file; it only creates and deletes them), copied
// otherwise; the other files (CURRENT, the descriptor, logs) are copied,
// since the recovery rewrites and deletes them.
absl::StatusOr<std::string> CopyToScratch(const std::string& path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string scratch = JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "jobgraph_leveldb_recovery.XXXXXX");
  if (::mkdtemp(scratch.data()) == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("create a directory to recover LevelDB database ",
                            path, " in (", scratch, "); set TMPDIR"));
  }
  absl::Status status = [&]() -> absl::Status {
    JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
    for (const std::string& name : names) {
      const std::string from = JoinPath(path, name);
      const std::string to = JoinPath(scratch, name);
      struct stat st;
      if (::stat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if ((absl::EndsWith(name, ".ldb") || absl::EndsWith(name, ".sst")) &&
          ::link(from.c_str(), to.c_str()) == 0) {
        continue;
      }
      JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(from));
      JG_RETURN_IF_ERROR(WriteScratchFile(to, bytes));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    RemoveRecursively(scratch).IgnoreError();
    return absl::Status(
        status.code(),
        absl::StrCat("cannot copy LevelDB database ", path,
                     " to recover it (set TMPDIR to a directory with room): ",
                     status.message()));
  }
  return scratch;
}

absl::StatusOr<std::string> CanonicalPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("resolve path ", path));
  }
  return std::string(buffer);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DB>> LevelDbType::OpenImpl(
    const std::string& path, DbMode mode, const DbOptions& options) const {
  JG_RETURN_IF_ERROR(ValidateTuning(options_, path));
  LevelDbOptions tuning = options_;
  if (options.write_only) {
    JG_ASSIGN_OR_RETURN(tuning.direct_io, DirectIoSetting(options_.direct_io));
  }
  if (mode == DbMode::kRead) {
    // A packed copy held in memory under this path is what is read there.
    if (std::shared_ptr<const HeldLevelDb> held = FindHeldLevelDb(path)) {
      return OpenHeldLevelDbTables(path, std::move(held), options);
    }
  }
  bool created = false;
  if (mode == DbMode::kNew) {
    // Creating the directory ourselves makes "already exists" atomic and
    // keeps LevelDB from creating a database inside some existing directory.
    absl::Status status = CreateDir(path);
    if (absl::IsAlreadyExists(status)) {
      return absl::AlreadyExistsError(
          absl::StrCat("LevelDB database ", path,
                       " already exists; mode new creates a fresh database"));
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("cannot create LevelDB database ", path,
                                       ": ", status.message()));
    }
    created = true;
  } else {
    // Checked here so that opening a wrong path leaves nothing behind
    // (LevelDB would create its LOCK file first).
    JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
    if (!exists) {
      return absl::NotFoundError(
          absl::StrCat("LevelDB database ", path, " does not exist"));
    }
    JG_ASSIGN_OR_RETURN(bool has_current,
                        PathExists(JoinPath(path, kLevelDbCurrentFile)));
    if (!has_current) {
      return absl::NotFoundError(absl::StrCat(
          "no LevelDB database at ", path,
          ": it has no CURRENT file (an empty or foreign directory, or a "
          "database whose creation did not finish)"));
    }
  }

  if (mode == DbMode::kRead) {
    // A finished database is read without DB::Open, which would rewrite its
    // descriptor and log (leveldb_tables.h); only one whose log still holds
    // data needs LevelDB's recovery.
    JG_ASSIGN_OR_RETURN(std::string canonical, CanonicalPath(path));
    if (!OpenPaths::Get().Acquire(canonical)) {
      return absl::FailedPreconditionError(
          absl::StrCat("LevelDB database ", path,
                       " is already open in this process; close it first"));
    }
    absl::StatusOr<std::unique_ptr<DB>> tables = OpenLevelDbTables(
        path, options, [canonical] { OpenPaths::Get().Release(canonical); });
    // A failed open released the path already.
    if (!absl::IsUnimplemented(tables.status())) return tables;
    // A log that holds data needs LevelDB's recovery, which rewrites the
    // descriptor and the log: it runs on a private copy, so that the
    // database itself is never written (and may be read-only). The copy is
    // checked against the database's file list, when it has one, and its
    // table footers are checked before LevelDB trusts them. The path stays
    // held from the copy to the close.
    VLOG(1) << tables.status().message() << "; recovering a copy of it";
    if (!OpenPaths::Get().Acquire(canonical)) {
      return absl::FailedPreconditionError(
          absl::StrCat("LevelDB database ", path,
                       " is already open in this process; close it first"));
    }
    absl::Status names = CheckFileNumbers(path);
    if (!names.ok()) {
      OpenPaths::Get().Release(canonical);
      return names;
    }
    absl::StatusOr<std::string> scratch = CopyToScratch(path);
    absl::Status checked = scratch.status();
    if (checked.ok()) {
      DB::FileCheck check;
      check.record_required = false;
      check.read_contents = true;
      checked = VerifyLevelDbFileList(*scratch, check);
      if (checked.ok()) checked = CheckLevelDbTableFooters(*scratch);
      checked = NamingDatabase(checked, *scratch, path);
      if (!checked.ok()) RemoveRecursively(*scratch).IgnoreError();
    }
    if (!checked.ok()) {
      OpenPaths::Get().Release(canonical);
      return checked;
    }
    // A failed open removes the copy and releases the path.
    return OpenLevelDbNative(
        path, mode, options, options_,
        [canonical] { OpenPaths::Get().Release(canonical); }, *scratch);
  }

  absl::Status status;
  absl::StatusOr<std::string> canonical = CanonicalPath(path);
  if (!canonical.ok()) {
    status = canonical.status();
  } else if (!OpenPaths::Get().Acquire(*canonical)) {
    status = absl::FailedPreconditionError(
        absl::StrCat("LevelDB database ", path,
                     " is already open in this process; close it first"));
  } else if (options.write_only && options_.write_tables_directly) {
    const std::string held = *canonical;
    absl::StatusOr<std::unique_ptr<DB>> db = OpenLevelDbDirect(
        path, options, tuning, [held] { OpenPaths::Get().Release(held); });
    if (db.ok()) return db;
    status = db.status();  // the DB released the path
  } else {
    const std::string held = *canonical;
    absl::StatusOr<std::unique_ptr<DB>> db =
        OpenLevelDbNative(path, mode, options, options_,
                          [held] { OpenPaths::Get().Release(held); });
    if (db.ok()) return db;
    status = db.status();  // the DB released the path
  }
  if (created) {
    // Leave no half-made database behind under the final name.
    absl::Status cleanup = RemoveRecursively(path);
    if (!cleanup.ok()) LOG(WARNING) << cleanup;
  }
  return status;
}

JG_REGISTER_DB_TYPE(kLevelDbType, std::make_shared<LevelDbType>());
JG_REGISTER_DB_TYPE(kLevelDbTypeAlias, std::make_shared<LevelDbType>());

}  // namespace jobgraph

#include "checkpoint/util/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/util/io_faults.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// "<what> <path>: <strerror>", with the absl code that matches errno.
absl::Status PosixError(int error, absl::string_view what,
                        absl::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

// Closes `fd` on scope exit unless Release()d; used on error paths only, since
// a close(2) error after writing must be reported, not ignored.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

int OpenNoIntr(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// fsync(2) of `fd`, open on `path` (for the message).
absl::Status Fsync(int fd, const std::string& path) {
  if (int e = io_faults::Next()) return PosixError(e, "fsync", path);
  if (::fsync(fd) != 0) return PosixError(errno, "fsync", path);
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path, int extra_flags) {
  int fd = OpenNoIntr(path.c_str(), O_RDONLY | extra_flags);
  if (fd < 0) return PosixError(errno, "open for fsync", path);
  FdCloser closer(fd);
  return Fsync(fd, path);
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  if (int e = io_faults::Next()) return PosixError(e, "write", path);
  while (!data.empty()) {
    // Linux writes at most ~2 GiB per call; larger requests come back short.
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return PosixError(errno, "stat", path);
  if (S_ISDIR(st.st_mode)) {
    JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
    for (const std::string& name : names) {
      JG_RETURN_IF_ERROR(RemoveTree(JoinPath(path, name)));
    }
    if (::rmdir(path.c_str()) != 0) {
      return PosixError(errno, "remove directory", path);
    }
    return absl::OkStatus();
  }
  if (::unlink(path.c_str()) != 0) return PosixError(errno, "unlink", path);
  return absl::OkStatus();
}

}  // namespace

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

std::string ParentDir(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  // Collapse "a//b" to "a" and keep "/" for "/b".
  while (slash > 0 && path[slash - 1] == '/') --slash;
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

absl::StatusOr<bool> PathExists(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return PosixError(errno, "stat", path);
}

absl::Status CreateDir(const std::string& path) {
  if (int e = io_faults::Next()) {
    return PosixError(e, "create directory", path);
  }
  if (::mkdir(path.c_str(), 0755) == 0) return absl::OkStatus();
  int error = errno;
  if (error == ENOENT) {
    return absl::NotFoundError(
        absl::StrCat("create directory ", path, ": parent directory ",
                     ParentDir(path), " does not exist"));
  }
  return PosixError(error, "create directory", path);
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return PosixError(errno, "list directory", path);
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    absl::string_view name(entry->d_name);
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  int error = errno;
  ::closedir(dir);
  if (error != 0) return PosixError(error, "list directory", path);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status FsyncFile(const std::string& path) { return FsyncPath(path, 0); }

absl::Status FsyncDir(const std::string& path) {
  return FsyncPath(path, O_DIRECTORY);
}

absl::Status FsyncFilesIn(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return PosixError(errno, "stat", path);
    if (!S_ISREG(st.st_mode)) continue;
    JG_RETURN_IF_ERROR(FsyncFile(path));
  }
  return absl::OkStatus();
}

absl::Status FsyncDirContents(const std::string& dir) {
  JG_RETURN_IF_ERROR(FsyncFilesIn(dir));
  return FsyncDir(dir);
}

namespace {

// "<path>.tmp-<pid>-<n>", unique in this process.
std::string TempPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
}

}  // namespace

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(
    const std::string& path) {
  std::string tmp = TempPathFor(path);
  const int fd = OpenNoIntr(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "write ", path, ": directory ", ParentDir(path), " does not exist"));
    }
    return PosixError(error, "create", tmp);
  }
  return AtomicFileWriter(path, std::move(tmp), fd);
}

AtomicFileWriter::AtomicFileWriter(std::string path, std::string tmp, int fd)
    : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other)
    : path_(std::move(other.path_)),
      tmp_(std::move(other.tmp_)),
      fd_(std::exchange(other.fd_, -1)),
      committing_(std::exchange(other.committing_, true)),
      renamed_(std::exchange(other.renamed_, true)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  // Best effort; whatever failed has been reported.
  if (!renamed_) ::unlink(tmp_.c_str());
}

absl::Status AtomicFileWriter::Commit(
    absl::string_view contents,
    const std::function<absl::Status()>& before_rename, int dir_fd) {
  CHECK(!std::exchange(committing_, true))
      << "AtomicFileWriter::Commit called twice for " << path_;
  JG_RETURN_IF_ERROR(WriteAll(fd_, contents, tmp_));
  JG_RETURN_IF_ERROR(Fsync(fd_, tmp_));
  if (int e = io_faults::Next()) return PosixError(e, "close", tmp_);
  if (::close(std::exchange(fd_, -1)) != 0) {
    return PosixError(errno, "close", tmp_);
  }
  if (before_rename) JG_RETURN_IF_ERROR(before_rename());
  if (int e = io_faults::Next()) {
    return PosixError(e, absl::StrCat("rename ", tmp_, " to"), path_);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return PosixError(errno, absl::StrCat("rename ", tmp_, " to"), path_);
  }
  renamed_ = true;
  const std::string parent = ParentDir(path_);
  return dir_fd < 0 ? FsyncDir(parent) : Fsync(dir_fd, parent);
}

absl::Status WriteFileAtomically(
    const std::string& path, absl::string_view contents,
    const std::function<absl::Status()>& before_rename) {
  JG_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  return writer.Commit(contents, before_rename);
}

absl::StatusOr<bool> LinkFileAtomically(const std::string& existing,
                                        const std::string& path) {
  const std::string tmp = TempPathFor(path);
  int error = io_faults::Next();
  if (error == 0 && ::link(existing.c_str(), tmp.c_str()) != 0) error = errno;
  if (error == EPERM || error == ENOTSUP || error == EOPNOTSUPP ||
      error == EMLINK || error == EXDEV) {
    return false;
  }
  if (error != 0) {
    return PosixError(error, absl::StrCat("link ", existing, " to"), tmp);
  }
  error = io_faults::Next();
  if (error == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) error = errno;
  // rename(2) does nothing, successfully, when both names are links to one
  // file (`path` already was a name of `existing`): the temporary name must
  // then go. Otherwise it is gone already (ENOENT).
  ::unlink(tmp.c_str());
  if (error != 0) {
    return PosixError(error, absl::StrCat("rename ", tmp, " to"), path);
  }
  return true;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = OpenNoIntr(path.c_str(), O_RDONLY);
  if (fd < 0) return PosixError(errno, "open", path);
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return PosixError(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("read ", path, ": not a regular file"));
  }
  std::string contents;
  contents.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (true) {
    // Keep reading past the size fstat saw, in case the file grew.
    if (done == contents.size()) contents.resize(contents.size() + 4096);
    ssize_t n = ::read(fd, &contents[done], contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, "read", path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  contents.resize(done);
  return contents;
}

absl::Status RenameAndSync(const std::string& from, const std::string& to) {
  if (int e = io_faults::Next()) {
    return PosixError(e, absl::StrCat("rename ", from, " to"), to);
  }
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return PosixError(errno, absl::StrCat("rename ", from, " to"), to);
  }
  const std::string to_parent = ParentDir(to);
  const std::string from_parent = ParentDir(from);
  JG_RETURN_IF_ERROR(FsyncDir(to_parent));
  if (from_parent != to_parent) JG_RETURN_IF_ERROR(FsyncDir(from_parent));
  return absl::OkStatus();
}

absl::Status ExchangeAndSync(const std::string& a, const std::string& b) {
  if (int e = io_faults::Next()) {
    return PosixError(e, absl::StrCat("exchange ", a, " with"), b);
  }
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) !=
      0) {
    return PosixError(errno, absl::StrCat("exchange ", a, " with"), b);
  }
  const std::string a_parent = ParentDir(a);
  const std::string b_parent = ParentDir(b);
  JG_RETURN_IF_ERROR(FsyncDir(a_parent));
  if (b_parent != a_parent) JG_RETURN_IF_ERROR(FsyncDir(b_parent));
  return absl::OkStatus();
}

absl::Status RemoveRecursively(const std::string& path) {
  return RemoveTree(path);
}

}  // namespace jobgraph

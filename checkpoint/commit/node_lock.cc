#include "checkpoint/commit/node_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

absl::Status LockFileError(absl::string_view what, const std::string& path) {
  const int err = errno;
  const std::string message = absl::StrCat("cannot ", what, " lock file ", path,
                                           ": ", std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == ENOSPC) return absl::ResourceExhaustedError(message);
  return absl::UnavailableError(message);
}

std::string Holder() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) {
    std::strcpy(host, "unknown");
  }
  return absl::StrCat("host ", host, " pid ", ::getpid());
}

// What the holder wrote, for the refusal message.
std::string ReadHolder(int fd) {
  char buffer[512] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "a process that has not written its name yet";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buffer, n)));
}

}  // namespace

std::string NodeLockPath(const std::string& dir, const std::string& node) {
  return JoinPath(dir, absl::StrCat(node, ".lock"));
}

absl::StatusOr<std::unique_ptr<NodeLock>> NodeLock::Acquire(
    const std::string& dir, const std::string& node) {
  const std::string path = NodeLockPath(dir, node);
  // A releasing holder unlinks the file while it still holds the lock, so a
  // lock taken on a file that is no longer at `path` is stale: try again on
  // the new file. Two attempts suffice unless other runs keep starting and
  // ending; a few more cost nothing.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return LockFileError("open", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) {
        absl::Status error = LockFileError("lock", path);
        ::close(fd);
        return error;
      }
      const std::string holder = ReadHolder(fd);
      ::close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", node, "' of checkpoint directory ", dir,
          " is in use by another run (", holder, "; lock file ", path,
          "). Two runs of one job would save the same epochs over each "
          "other: wait for that run to end, or stop it, then start again."));
    }
    struct stat held;
    struct stat named;
    if (::fstat(fd, &held) != 0) {
      absl::Status error = LockFileError("stat", path);
      ::close(fd);
      return error;
    }
    if (::stat(path.c_str(), &named) != 0 || named.st_ino != held.st_ino ||
        named.st_dev != held.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string holder = Holder() + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, holder.data(), holder.size(), 0) !=
            static_cast<ssize_t>(holder.size())) {
      absl::Status error = LockFileError("write", path);
      ::unlink(path.c_str());
      ::close(fd);
      return error;
    }
    return std::unique_ptr<NodeLock>(new NodeLock(path, fd));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot lock ", path, ": it was replaced 8 times while locking it"));
}

NodeLock::~NodeLock() {
  if (::unlink(path_.c_str()) != 0) {
    PLOG(WARNING) << "cannot remove lock file " << path_;
  }
  ::close(fd_);
}

}  // namespace jobgraph

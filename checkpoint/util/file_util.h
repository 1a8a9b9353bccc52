// POSIX file-system helpers for the checkpoint layer's durability protocol.
//
// A checkpoint is committed by writing under a temporary name, making every
// byte durable, renaming, and syncing the directory that holds the new name
// (checkpoint/FORMAT.md describes the protocol). These helpers are
// the building blocks: each makes exactly one step durable and returns an
// absl::Status whose message names the path and the errno text, so callers can
// return it unchanged.
//
// The functions hold no state and are safe to call from any thread. Concurrent
// changes to the same paths race exactly as the underlying system calls do.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_FILE_UTIL_H_
#define JOBGRAPH_CHECKPOINT_UTIL_FILE_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

// "dir/name"; no slash is doubled and an empty `dir` yields `name`.
std::string JoinPath(absl::string_view dir, absl::string_view name);

// The directory that holds `path`: "a/b" -> "a", "b" -> ".", "/b" -> "/".
// Trailing slashes are ignored ("a/b/" -> "a").
std::string ParentDir(absl::string_view path);

// Whether anything (file, directory, dangling symlink) exists at `path`. An
// error other than "does not exist" (e.g. EACCES on a parent) is returned.
absl::StatusOr<bool> PathExists(const std::string& path);

// mkdir(path, 0755). AlreadyExists if `path` exists, NotFound if its parent
// does not: parents are never created implicitly, the caller decides.
absl::Status CreateDir(const std::string& path);

// The names in directory `path`, sorted bytewise, without "." and "..".
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);

// fsync(2) of the file or directory at `path` (opened read-only). For a
// directory this makes its entries (creations, renames, deletions) durable.
absl::Status FsyncFile(const std::string& path);
absl::Status FsyncDir(const std::string& path);

// Fsyncs every regular file directly inside `dir` (not recursively), then
// `dir` itself. Used to make a closed LevelDB database durable: LevelDB closes
// rotated logs without syncing them, and this reaches every one. A writeback
// error that happened before this call is still reported (Linux >= 4.16
// reports an unseen error to the next fsync even through a new descriptor).
absl::Status FsyncDirContents(const std::string& dir);
// The same without the fsync of `dir`, for a caller whose next step syncs
// the directory anyway (an atomic write of a file into it).
absl::Status FsyncFilesIn(const std::string& dir);

// Replaces `path` with `contents` atomically and durably: writes
// "<path>.tmp-<pid>-<n>", fsyncs it, renames it over `path` and fsyncs the
// parent directory. After a crash `path` holds either the old or the new
// contents, never a mix; a stray "<path>.tmp-*" may be left behind. NotFound
// (naming the directory) if the parent directory does not exist.
// `before_rename`, when set, runs once the temporary file is durable and
// before the rename; an error from it abandons the write (the commit
// protocol's failpoints hook in there).
absl::Status WriteFileAtomically(
    const std::string& path, absl::string_view contents,
    const std::function<absl::Status()>& before_rename = nullptr);

// WriteFileAtomically in two steps, for a caller that creates the temporary
// file ahead of time, while it waits for the contents (the commit of an MPI
// job, whose rank 0 prepares while the ranks agree). A writer destroyed
// before a successful rename removes its temporary file. Movable; not
// thread-safe.
class AtomicFileWriter {
 public:
  // Creates "<path>.tmp-<pid>-<n>". NotFound (naming the directory) if the
  // parent directory does not exist.
  static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other);
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  ~AtomicFileWriter();

  // Writes `contents` into the temporary file, fsyncs and closes it, runs
  // `before_rename` (as for WriteFileAtomically), renames it over the path
  // and fsyncs the parent directory: through `dir_fd` when it is an open
  // descriptor of that directory (saving an open(2)), else by its name.
  // Call once, even after a failure (the file is then partly written).
  absl::Status Commit(absl::string_view contents,
                      const std::function<absl::Status()>& before_rename,
                      int dir_fd = -1);

 private:
  AtomicFileWriter(std::string path, std::string tmp, int fd);

  std::string path_;
  std::string tmp_;
  int fd_;  // of the temporary file until Commit closes it
  bool committing_ = false;
  bool renamed_ = false;
};

// Gives the file at `existing` the further name `path`, replacing what
// `path` was, atomically: link(2) to "<path>.tmp-<pid>-<n>", then rename(2)
// over `path`. Writes no data and does not fsync the directory: for a copy of
// a file whose content is already durable, made durable by the caller's next
// fsync of the directory. False, with nothing changed, when the file system
// gives no second name (EPERM, ENOTSUP, EMLINK, EXDEV): the caller copies
// instead.
absl::StatusOr<bool> LinkFileAtomically(const std::string& existing,
                                        const std::string& path);

// The whole content of the regular file at `path`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// rename(2) of `from` to `to`, then fsync of the parent directory of `to`
// (and of `from`'s, if different), so the new name survives a crash. As with
// rename(2), a directory can replace only an empty directory.
absl::Status RenameAndSync(const std::string& from, const std::string& to);

// Atomically swaps the names `a` and `b` (renameat2 RENAME_EXCHANGE; both
// must exist, either may be a directory), then fsyncs their parent
// directories. This is how a non-empty directory is replaced atomically:
// exchange, then delete the old one (now at `a`) off the critical path.
absl::Status ExchangeAndSync(const std::string& a, const std::string& b);

// Deletes `path` and, for a directory, everything below it. Symlinks are
// removed, never followed. NotFound if `path` does not exist. Does not fsync
// the parent: a deletion that is lost in a crash is harmless to the commit
// protocol. Deleting takes time in proportion to the bytes (see
// background_delete.h): callers run it off the critical path.
absl::Status RemoveRecursively(const std::string& path);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_FILE_UTIL_H_

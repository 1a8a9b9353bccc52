// LevelDbType::Copy (leveldb_db.h): a finished database copied file by file,
// every byte checked against the database's JOBGRAPH_FILES on its way
// through the copy buffer, so that each source byte is read once. A file of
// its own beside leveldb_db.cc (opening) and leveldb_type.cc (recognising,
// installing, removing).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/staged_direct_writer.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// Tables are up to 64 MiB (LevelDbOptions::max_file_size) and more: a few
// MiB per read(2) and write(2) keeps the system calls few and the buffer
// cheap to allocate once per copy.
constexpr size_t kCopyBufferBytes = size_t{4} << 20;

// Closes a descriptor on scope exit unless Release()d: for error paths, since
// a close(2) error of a written file must be reported, not ignored.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

int OpenNoIntr(const std::string& path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path) {
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("write ", path));
  }
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// DataLoss for a source file that is not what JOBGRAPH_FILES records.
absl::Status Damaged(const std::string& source, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(source, " ", what, "; the database is damaged"));
}

// Copies the file `listed` of the database at `from` to the same name in
// `to`, through `buffer` (kCopyBufferBytes), and checks its size and CRC-32C
// against the record. With `direct_io` the copy is written with O_DIRECT
// where the file system takes it (StagedDirectWriter), as the save writes
// tables: through the page cache, a flush of a large epoch spent more CPU
// than the save itself (page allocation and writeback of every byte; the
// tier_bench run of 2d6d9bf), on the core the job computes on. The copy is
// not synced here: Copy() syncs them all.
absl::Status CopyListedFile(const std::string& from, const std::string& to,
                            const ListedFile& listed, char* buffer,
                            bool direct_io) {
  const std::string source = JoinPath(from, listed.name);
  const std::string target = JoinPath(to, listed.name);
  ScopedFd in(OpenNoIntr(source, O_RDONLY));
  if (in.get() < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return Damaged(source, absl::StrCat("is missing, though ",
                                          kDbFileListName, " lists it"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("open ", source));
  }
  struct stat st;
  if (::fstat(in.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", source));
  }
  if (!S_ISREG(st.st_mode)) {
    return Damaged(source, absl::StrCat("is not a regular file, though ",
                                        kDbFileListName, " lists a file"));
  }
  // A truncated or extended file fails before anything is copied.
  if (static_cast<uint64_t>(st.st_size) != listed.size) {
    return Damaged(source,
                   absl::StrCat("has ", st.st_size, " bytes, ", kDbFileListName,
                                " records ", listed.size));
  }
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("create ", target));
  }
  ScopedFd out(OpenNoIntr(target, O_WRONLY | O_CREAT | O_EXCL, 0644));
  if (out.get() < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("create ", target));
  }
  std::unique_ptr<StagedDirectWriter> direct;
  if (direct_io) {
    direct = StagedDirectWriter::Start(
        out.get(), target,
        /*large=*/listed.size >= StagedDirectWriter::kLargeAfterBytes);
  }
  uint64_t size = 0;
  uint32_t crc = 0;
  while (true) {
    const ssize_t n = ::read(in.get(), buffer, kCopyBufferBytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", source));
    }
    if (n == 0) break;
    // Checksummed from the buffer the write takes it from: the bytes
    // checked are the bytes copied.
    crc = crc32c::Extend(crc, buffer, static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
    JG_RETURN_IF_ERROR(
        direct != nullptr
            ? direct->Append(absl::string_view(buffer, static_cast<size_t>(n)))
            : WriteAll(out.get(), buffer, static_cast<size_t>(n), target));
  }
  if (direct != nullptr) {
    JG_RETURN_IF_ERROR(direct->Finish());
    direct.reset();  // its threads are done with the descriptor
  }
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("close ", target));
  }
  if (::close(out.Release()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", target));
  }
  // The size again: the file may have changed since the fstat.
  if (size != listed.size) {
    return Damaged(source,
                   absl::StrCat("has ", size, " bytes, ", kDbFileListName,
                                " records ", listed.size));
  }
  if (crc != listed.crc) {
    return Damaged(source,
                   absl::StrCat("has CRC-32C ", absl::Hex(crc, absl::kZeroPad8),
                                ", ", kDbFileListName, " records ",
                                absl::Hex(listed.crc, absl::kZeroPad8)));
  }
  return absl::OkStatus();
}

// What Copy() does once `to` exists: the files, their fsyncs, then the list.
// Returns the bytes of the files written.
absl::StatusOr<int64_t> CopyFiles(const std::string& from,
                                  const std::string& to,
                                  const std::vector<ListedFile>& files,
                                  absl::string_view list_bytes,
                                  bool direct_io) {
  // Not zeroed: every byte is read into before it is used.
  std::unique_ptr<char[]> buffer(new char[kCopyBufferBytes]);
  int64_t bytes = static_cast<int64_t>(list_bytes.size());
  for (const ListedFile& file : files) {
    JG_RETURN_IF_ERROR(CopyListedFile(from, to, file, buffer.get(), direct_io));
    bytes += static_cast<int64_t>(file.size);
  }
  // As a database's own close does (leveldb_direct.cc): every file durable
  // first, then the list, written atomically with its fsync, the rename and
  // the directory's fsync, which makes every entry of `to` durable with it.
  // So the list appears only once every file it lists is durable. (`to` is
  // a fresh name in its parent; Install's rename and fsync of the parent
  // make the copy's final name durable.)
  JG_RETURN_IF_ERROR(FsyncFilesIn(to));
  JG_RETURN_IF_ERROR(
      WriteFileAtomically(JoinPath(to, kDbFileListName), list_bytes));
  return bytes;
}

}  // namespace

absl::StatusOr<int64_t> LevelDbType::Copy(const std::string& from,
                                          const std::string& to) const {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot copy LevelDB database ", from,
                                     " to ", to, ": ", status.message()));
  };
  struct stat st;
  if (::stat(from.c_str(), &st) != 0) {
    const int error = errno;
    if (error != ENOENT && error != ENOTDIR) {
      return failed(absl::ErrnoToStatus(error, absl::StrCat("stat ", from)));
    }
    return failed(absl::NotFoundError("it does not exist"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return failed(absl::NotFoundError(
        "it is not a directory, so not a LevelDB database"));
  }
  std::string list_bytes;
  absl::StatusOr<std::vector<ListedFile>> files =
      ReadLevelDbFileList(from, &list_bytes);
  if (absl::IsNotFound(files.status())) {
    // CURRENT is written before the list: without either, this is no
    // finished database (as opening it for reading says too).
    absl::StatusOr<bool> has_current =
        PathExists(JoinPath(from, kLevelDbCurrentFile));
    if (!has_current.ok()) return failed(has_current.status());
    if (!*has_current) {
      return failed(absl::NotFoundError(
          absl::StrCat("it has neither ", kLevelDbCurrentFile, " nor ",
                       kDbFileListName, ", so it holds no finished database")));
    }
    // jobgraph has written the list into every database it closed since
    // the format had one; a copy that cannot be checked could carry damage
    // unseen into the shared directory.
    return failed(absl::FailedPreconditionError(absl::StrCat(
        "it has no file list ", kDbFileListName,
        " (it was written by another program, or by jobgraph before the "
        "list existed), so its files cannot be checked as they are "
        "copied")));
  }
  if (!files.ok()) return failed(files.status());
  absl::StatusOr<bool> direct_io = DirectIoSetting(options_.direct_io);
  if (!direct_io.ok()) return failed(direct_io.status());

  // Nothing may be at `to`: mkdir(2) fails atomically otherwise, and what
  // is there is left alone.
  absl::Status status = CreateDir(to);
  if (absl::IsAlreadyExists(status)) {
    return failed(absl::AlreadyExistsError(
        absl::StrCat(to, " already exists; a copy needs a fresh path")));
  }
  if (!status.ok()) return failed(status);
  absl::StatusOr<int64_t> bytes =
      CopyFiles(from, to, *files, list_bytes, *direct_io);
  if (!bytes.ok()) {
    absl::Status removed = RemoveRecursively(to);
    if (!removed.ok()) {
      LOG(WARNING) << "cannot remove " << to
                   << ", the partial copy of LevelDB database " << from << ": "
                   << removed;
    }
    return failed(bytes.status());
  }
  return bytes;
}

}  // namespace jobgraph

// LevelDbType::Copy (leveldb_db.h): a finished database copied file by file,
// every byte checked against the database's JOBGRAPH_FILES on its way
// through the buffer it is written from, so that each source byte is read
// once. Also the
// steps it shares with Pack and Unpack (leveldb_copy.h). A file of its own
// beside leveldb_db.cc (opening) and leveldb_type.cc (recognising,
// installing, removing).

#include "checkpoint/leveldb/leveldb_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
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
namespace leveldb_copy {
namespace {

// DataLoss unless `st`, of `source`, is a regular file of listed.size bytes.
absl::Status CheckListedStat(const std::string& source,
                             const ListedFile& listed, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    return Damaged(source, absl::StrCat("is not a regular file, though ",
                                        kDbFileListName, " lists a file"));
  }
  if (static_cast<uint64_t>(st.st_size) != listed.size) {
    return Damaged(source,
                   absl::StrCat("has ", st.st_size, " bytes, ", kDbFileListName,
                                " records ", listed.size));
  }
  return absl::OkStatus();
}

absl::Status MissingOrError(int error, const std::string& source,
                            absl::string_view call) {
  if (error == ENOENT) {
    return Damaged(source, absl::StrCat("is missing, though ", kDbFileListName,
                                        " lists it"));
  }
  return absl::ErrnoToStatus(error, absl::StrCat(call, " ", source));
}

}  // namespace

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

int OpenNoIntr(const std::string& path, int flags, mode_t mode) {
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

absl::Status Damaged(const std::string& source, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(source, " ", what, "; the database is damaged"));
}

absl::StatusOr<std::vector<ListedFile>> ReadFileListToCopy(
    const std::string& from, std::string* list_bytes) {
  struct stat st;
  if (::stat(from.c_str(), &st) != 0) {
    const int error = errno;
    if (error != ENOENT && error != ENOTDIR) {
      return absl::ErrnoToStatus(error, absl::StrCat("stat ", from));
    }
    return absl::NotFoundError("it does not exist");
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        "it is not a directory, so not a LevelDB database");
  }
  absl::StatusOr<std::vector<ListedFile>> files =
      ReadLevelDbFileList(from, list_bytes);
  if (!absl::IsNotFound(files.status())) return files;
  // CURRENT is written before the list: without either, this is no
  // finished database (as opening it for reading says too).
  JG_ASSIGN_OR_RETURN(bool has_current,
                      PathExists(JoinPath(from, kLevelDbCurrentFile)));
  if (!has_current) {
    return absl::NotFoundError(
        absl::StrCat("it has neither ", kLevelDbCurrentFile, " nor ",
                     kDbFileListName, ", so it holds no finished database"));
  }
  // jobgraph has written the list into every database it closed since the
  // format had one; a copy that cannot be checked could carry damage unseen
  // into the shared directory (or to another machine).
  return absl::FailedPreconditionError(absl::StrCat(
      "it has no file list ", kDbFileListName,
      " (it was written by another program, or by jobgraph before the "
      "list existed), so its files cannot be checked as they are "
      "copied"));
}

absl::Status StatListedFile(const std::string& source,
                            const ListedFile& listed) {
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) {
    return MissingOrError(errno, source, "stat");
  }
  return CheckListedStat(source, listed, st);
}

absl::StatusOr<ScopedFd> OpenListedFile(const std::string& source,
                                        const ListedFile& listed) {
  ScopedFd in(OpenNoIntr(source, O_RDONLY));
  if (in.get() < 0) return MissingOrError(errno, source, "open");
  struct stat st;
  if (::fstat(in.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", source));
  }
  JG_RETURN_IF_ERROR(CheckListedStat(source, listed, st));
  return in;
}

absl::Status CheckListedBytes(const std::string& source,
                              const ListedFile& listed, uint64_t size,
                              uint32_t crc) {
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

absl::StatusOr<std::unique_ptr<CopiedFile>> CopiedFile::Create(
    const std::string& path, uint64_t size, bool direct_io) {
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("create ", path));
  }
  ScopedFd fd(OpenNoIntr(path, O_WRONLY | O_CREAT | O_EXCL, 0644));
  if (fd.get() < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
  }
  std::unique_ptr<StagedDirectWriter> direct;
  if (direct_io) {
    direct = StagedDirectWriter::Start(
        fd.get(), path,
        /*large=*/size >= StagedDirectWriter::kLargeAfterBytes,
        StagedDirectWriter::Writers::kCaller);
  }
  return std::unique_ptr<CopiedFile>(
      new CopiedFile(path, std::move(fd), std::move(direct)));
}

CopiedFile::CopiedFile(std::string path, ScopedFd fd,
                       std::unique_ptr<StagedDirectWriter> direct)
    : path_(std::move(path)), fd_(std::move(fd)), direct_(std::move(direct)) {}

// `direct_` is declared after `fd_`, so it is destroyed first: its threads
// are done with the descriptor before it is closed.
CopiedFile::~CopiedFile() = default;

absl::Status CopiedFile::Append(absl::string_view data) {
  return direct_ != nullptr
             ? direct_->Append(data)
             : WriteAll(fd_.get(), data.data(), data.size(), path_);
}

absl::StatusOr<absl::Span<char>> CopiedFile::Reserve(
    absl::Span<char> fallback) {
  if (direct_ != nullptr) return direct_->Reserve();
  reserved_ = fallback.data();
  return fallback;
}

absl::Status CopiedFile::Commit(size_t n) {
  if (direct_ != nullptr) return direct_->Commit(n);
  return WriteAll(fd_.get(), reserved_, n, path_);
}

absl::Status CopiedFile::Close() {
  if (direct_ != nullptr) {
    JG_RETURN_IF_ERROR(direct_->Finish());
    direct_.reset();  // its threads are done with the descriptor
  }
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("close ", path_));
  }
  if (::close(fd_.Release()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", path_));
  }
  return absl::OkStatus();
}

absl::Status CreateCopyDir(const std::string& to) {
  // mkdir(2) fails atomically when anything is there.
  absl::Status status = CreateDir(to);
  if (absl::IsAlreadyExists(status)) {
    return absl::AlreadyExistsError(
        absl::StrCat(to, " already exists; a copy needs a fresh path"));
  }
  return status;
}

absl::Status FinishCopy(const std::string& to, absl::string_view list_bytes) {
  // As a database's own close does (leveldb_direct.cc): every file durable
  // first, then the list, written atomically with its fsync, the rename and
  // the directory's fsync, which makes every entry of `to` durable with it.
  // (`to` is a fresh name in its parent; Install's rename and fsync of the
  // parent make the copy's final name durable.)
  JG_RETURN_IF_ERROR(FsyncFilesIn(to));
  return WriteFileAtomically(JoinPath(to, kDbFileListName), list_bytes);
}

void RemovePartialCopy(const std::string& to, absl::string_view what) {
  absl::Status removed = RemoveRecursively(to);
  if (!removed.ok()) {
    LOG(WARNING) << "cannot remove " << to << ", the partial copy of " << what
                 << ": " << removed;
  }
}

}  // namespace leveldb_copy

namespace {

using leveldb_copy::CheckListedBytes;
using leveldb_copy::CopiedFile;
using leveldb_copy::OpenListedFile;
using leveldb_copy::ScopedFd;

// Without O_DIRECT the copy reads into a buffer of its own: tables are up
// to 64 MiB (LevelDbOptions::max_file_size) and more, and a few MiB per
// read(2) and write(2) keep the system calls few and the buffer cheap to
// allocate once per copy.
constexpr size_t kCopyBufferBytes = size_t{4} << 20;

// Copies the file `listed` of the database at `from` to the same name in
// `to` and checks its size and CRC-32C against the record. With `direct_io`
// the copy is written with O_DIRECT where the file system takes it
// (StagedDirectWriter), as the save writes tables: through the page cache, a
// flush of a large epoch spent more CPU than the save itself (page
// allocation and writeback of every byte; the tier_bench run of 2d6d9bf), on
// the core the job computes on. Each read(2) lands in the direct writer's
// staging buffer and is written from there by this thread (no writer
// threads: Writers::kCaller), so the CPU passes over the bytes twice (the
// read and the checksum) and the copy takes one core. With the writer's
// three threads beside it, the flush cost an epoch twice what a bare
// read(2) + write(2) copy of the same bytes did; so, about as much
// (tier_bench part 3, tools/bench/README.md). Without O_DIRECT the bytes go
// through `*buffer` (kCopyBufferBytes, allocated on first use). Before each
// chunk the copy waits at `pause` (if set) while a save holds it. The copy
// is not synced here: Copy() syncs them all (after a wait at `pause`).
absl::Status CopyListedFile(const std::string& from, const std::string& to,
                            const ListedFile& listed,
                            std::unique_ptr<char[]>* buffer, bool direct_io,
                            PauseGate* pause) {
  const std::string source = JoinPath(from, listed.name);
  JG_ASSIGN_OR_RETURN(ScopedFd in, OpenListedFile(source, listed));
  JG_ASSIGN_OR_RETURN(
      std::unique_ptr<CopiedFile> out,
      CopiedFile::Create(JoinPath(to, listed.name), listed.size, direct_io));
  absl::Span<char> fallback;
  if (!out->direct()) {
    // Not zeroed: every byte is read into before it is used.
    if (*buffer == nullptr) buffer->reset(new char[kCopyBufferBytes]);
    fallback = absl::Span<char>(buffer->get(), kCopyBufferBytes);
  }
  uint64_t size = 0;
  uint32_t crc = 0;
  while (true) {
    if (pause != nullptr) pause->WaitWhileHeld();
    JG_ASSIGN_OR_RETURN(absl::Span<char> space, out->Reserve(fallback));
    const ssize_t n = ::read(in.get(), space.data(), space.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", source));
    }
    if (n == 0) break;
    // Checksummed in the buffer the write takes it from: the bytes checked
    // are the bytes copied.
    crc = crc32c::Extend(crc, space.data(), static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
    JG_RETURN_IF_ERROR(out->Commit(static_cast<size_t>(n)));
  }
  JG_RETURN_IF_ERROR(out->Close());
  // The size again: the file may have changed since it was opened.
  return CheckListedBytes(source, listed, size, crc);
}

// What Copy() does once `to` exists: the files, their fsyncs, then the list.
// Returns the bytes of the files written.
absl::StatusOr<int64_t> CopyFiles(const std::string& from,
                                  const std::string& to,
                                  const std::vector<ListedFile>& files,
                                  absl::string_view list_bytes, bool direct_io,
                                  PauseGate* pause) {
  std::unique_ptr<char[]> buffer;  // CopyListedFile's, without O_DIRECT
  int64_t bytes = static_cast<int64_t>(list_bytes.size());
  for (const ListedFile& file : files) {
    JG_RETURN_IF_ERROR(
        CopyListedFile(from, to, file, &buffer, direct_io, pause));
    bytes += static_cast<int64_t>(file.size);
  }
  // The fsyncs of every file: the copy's last I/O.
  if (pause != nullptr) pause->WaitWhileHeld();
  JG_RETURN_IF_ERROR(leveldb_copy::FinishCopy(to, list_bytes));
  return bytes;
}

}  // namespace

absl::StatusOr<int64_t> LevelDbType::Copy(const std::string& from,
                                          const std::string& to,
                                          const CopyOptions& options) const {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot copy LevelDB database ", from,
                                     " to ", to, ": ", status.message()));
  };
  std::string list_bytes;
  absl::StatusOr<std::vector<ListedFile>> files =
      leveldb_copy::ReadFileListToCopy(from, &list_bytes);
  if (!files.ok()) return failed(files.status());
  absl::StatusOr<bool> direct_io = DirectIoSetting(options_.direct_io);
  if (!direct_io.ok()) return failed(direct_io.status());

  // Nothing may be at `to`, and what is there is left alone.
  absl::Status status = leveldb_copy::CreateCopyDir(to);
  if (!status.ok()) return failed(status);
  absl::StatusOr<int64_t> bytes =
      CopyFiles(from, to, *files, list_bytes, *direct_io, options.pause);
  if (!bytes.ok()) {
    leveldb_copy::RemovePartialCopy(to,
                                    absl::StrCat("LevelDB database ", from));
    return failed(bytes.status());
  }
  return bytes;
}

}  // namespace jobgraph

// The steps of LevelDbType::Copy (leveldb_copy.cc) that Pack and Unpack
// (leveldb_pack.cc) take too: reading a finished database's files checked
// against its JOBGRAPH_FILES, with the same DataLoss messages, and putting
// files into a fresh directory durably, list last. Shared so that a database
// moved to another machine is checked and made durable exactly as a local
// copy is. Internal to the LevelDB adapter.
//
// Functions and single-owner objects; thread-safe as the file system is.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_COPY_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_COPY_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/staged_direct_writer.h"

namespace jobgraph {
namespace leveldb_copy {

// Closes a descriptor on scope exit unless Release()d: for error paths, since
// a close(2) error of a written file must be reported, not ignored.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&&) = delete;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// open(2) with O_CLOEXEC, retried on EINTR.
int OpenNoIntr(const std::string& path, int flags, mode_t mode = 0);

// Writes all of data[0, size) to `fd`, the file `path` (for messages).
absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path);

// DataLoss for a source file that is not what JOBGRAPH_FILES records:
// "<source> <what>; the database is damaged".
absl::Status Damaged(const std::string& source, absl::string_view what);

// The files of the finished database at `from` as its JOBGRAPH_FILES lists
// them, the list's bytes in `*list_bytes`. NotFound when no finished
// database is there; FailedPrecondition for one without the list, whose
// files cannot be checked; DataLoss when the list is damaged. Messages say
// what is wrong with `from`; the caller says what it was doing.
absl::StatusOr<std::vector<ListedFile>> ReadFileListToCopy(
    const std::string& from, std::string* list_bytes);

// Checks that `source`, the listed file `listed` of a database, is there as
// a regular file with the recorded size (DataLoss otherwise), so that a
// truncated or extended file fails before anything is read.
absl::Status StatListedFile(const std::string& source,
                            const ListedFile& listed);
// The same, on `source` opened for reading.
absl::StatusOr<ScopedFd> OpenListedFile(const std::string& source,
                                        const ListedFile& listed);

// DataLoss unless `size` bytes with CRC-32C `crc`, read from `source`, are
// what `listed` records.
absl::Status CheckListedBytes(const std::string& source,
                              const ListedFile& listed, uint64_t size,
                              uint32_t crc);

// A file of a copy: created (nothing may be at its path), appended to, and
// closed, with O_DIRECT where the file system takes it when `direct_io`
// (StagedDirectWriter), as the save writes tables, but written by the
// caller's thread (Writers::kCaller): copies run in the background, beside
// the job, and should take one core at most. Not synced: FinishCopy
// syncs every file of the copy. Destroyed without Close(), it is left
// incomplete for the caller to remove.
class CopiedFile {
 public:
  // `size`: the bytes the file will have, which sizes the direct writer's
  // buffers.
  static absl::StatusOr<std::unique_ptr<CopiedFile>> Create(
      const std::string& path, uint64_t size, bool direct_io);
  CopiedFile(const CopiedFile&) = delete;
  CopiedFile& operator=(const CopiedFile&) = delete;
  ~CopiedFile();

  absl::Status Append(absl::string_view data);
  // Whether the file is written with O_DIRECT (its file system took it).
  bool direct() const { return direct_ != nullptr; }
  // For a caller that reads the bytes in place: where to put the next ones,
  // the direct writer's staging buffer (so they are not copied again on
  // their way to the disk), or `fallback` when the file is not direct().
  // Commit(n) then appends the first n bytes of what it returned.
  absl::StatusOr<absl::Span<char>> Reserve(absl::Span<char> fallback);
  absl::Status Commit(size_t n);
  // Writes what is staged and closes the file; call once.
  absl::Status Close();

 private:
  CopiedFile(std::string path, ScopedFd fd,
             std::unique_ptr<StagedDirectWriter> direct);

  const std::string path_;
  ScopedFd fd_;
  std::unique_ptr<StagedDirectWriter> direct_;
  const char* reserved_ = nullptr;  // what Reserve returned without direct_
};

// mkdir(2) of `to`: AlreadyExists naming it when anything is there, which is
// then left alone.
absl::Status CreateCopyDir(const std::string& to);

// Once every listed file is in `to`: makes them durable, then writes the
// list, atomically and durably, so that the list appears only once every
// file it lists is durable.
absl::Status FinishCopy(const std::string& to, absl::string_view list_bytes);

// Removes the partial copy at `to` after an error, logging (not returning)
// a failure to; `what` says what it is a partial copy of.
void RemovePartialCopy(const std::string& to, absl::string_view what);

}  // namespace leveldb_copy
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_COPY_H_

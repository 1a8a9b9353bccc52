// FileCursor: the reading position of a text-file reader, held in a blob of
// the node's root workspace. The file is newline-delimited text; one line is
// one record (without its '\n'; a '\r' before it is kept).
//
// The position is the byte offset of the next unread line, so it is
// checkpointed exactly and a restored cursor continues with the next line.
// The file is read with pread through a window of at most `buffer_bytes`
// beyond the longest line being read, never loaded whole. The open
// descriptor and the window are a cache, not state: a restored cursor reopens
// the file on its first read and checks that the offset is within the file and
// at the start of a line.
//
// Errors name the file and, for data errors, the byte offset:
//   NotFound / PermissionDenied (from errno)  the file cannot be opened;
//   DataLoss  the last line has no trailing newline (a truncated file), or a
//             restored offset is past the end or inside a line.
// A failed read leaves the position unchanged.
//
// Checkpointed as BlobProto.type "std::unique_ptr<FileCursor>": an int64
// tensor [offset] and the path in `content`.
//
// Thread-safe: reads take the mutex; concurrent readers get disjoint lines.

#ifndef JOBGRAPH_ENGINE_DATA_FILE_CURSOR_H_
#define JOBGRAPH_ENGINE_DATA_FILE_CURSOR_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jobgraph {

inline constexpr char kFileCursorTypeName[] = "std::unique_ptr<FileCursor>";

class FileCursor {
 public:
  FileCursor() = default;
  explicit FileCursor(std::string path, int64_t offset = 0)
      : path_(std::move(path)), offset_(offset) {}
  FileCursor(const FileCursor&) = delete;
  FileCursor& operator=(const FileCursor&) = delete;
  ~FileCursor();

  const std::string& path() const { return path_; }

  // Sets `lines` to the next at most `max_lines` complete lines and advances
  // past them; empty at the end of the file. `buffer_bytes` > 0 is how much
  // is read from the file at a time.
  absl::Status ReadLines(int64_t max_lines, int64_t buffer_bytes,
                         std::vector<std::string>* lines);

  int64_t offset() const;
  // Moves to `offset` (0 rewinds); it is validated by the next read.
  void set_offset(int64_t offset);

 private:
  // Opens the file if it is not open and validates offset_.
  absl::Status EnsureOpen() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends up to `bytes` bytes read at the end of the window; returns how
  // many (0 at the end of the file).
  absl::StatusOr<size_t> ExtendWindow(int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable std::mutex mu_;
  int64_t offset_ ABSL_GUARDED_BY(mu_) = 0;
  bool offset_checked_ ABSL_GUARDED_BY(mu_) = false;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  // Bytes [window_begin_, window_begin_ + window_.size()) of the file.
  std::string window_ ABSL_GUARDED_BY(mu_);
  int64_t window_begin_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_FILE_CURSOR_H_

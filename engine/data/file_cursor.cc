#include "engine/data/file_cursor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/data/cursor_proto.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"

namespace jobgraph {

FileCursor::~FileCursor() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) close(fd_);
}

int64_t FileCursor::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

void FileCursor::set_offset(int64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  offset_ = offset;
  offset_checked_ = false;
}

absl::StatusOr<size_t> FileCursor::ExtendWindow(int64_t bytes) {
  const size_t old = window_.size();
  const int64_t at = window_begin_ + static_cast<int64_t>(old);
  window_.resize(old + bytes);
  ssize_t n;
  do {
    n = pread(fd_, &window_[old], bytes, at);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int error = errno;
    window_.resize(old);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot read file '", path_,
                                                   "' at byte offset ", at));
  }
  window_.resize(old + n);
  return static_cast<size_t>(n);
}

absl::Status FileCursor::EnsureOpen() {
  if (fd_ < 0) {
    int fd;
    do {
      fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot open file '", path_, "'"));
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("'", path_, "' is a directory, not a text file"));
    }
    fd_ = fd;
    window_.clear();
    window_begin_ = 0;
  }
  if (offset_checked_) return absl::OkStatus();
  if (offset_ < 0) {
    return absl::DataLossError(
        absl::StrCat("negative offset ", offset_, " in file '", path_, "'"));
  }
  if (offset_ > 0) {
    // A position saved by this reader is just after a '\n'. Anything else
    // means the file changed (or the offset was not ours), and reading on
    // would return a partial line as if it were a record.
    window_.clear();
    window_begin_ = offset_ - 1;
    JG_ASSIGN_OR_RETURN(size_t got, ExtendWindow(1));
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(
          "byte offset ", offset_, " is past the end of file '", path_,
          "' (did the file shrink since the position was saved?)"));
    }
    if (window_[0] != '\n') {
      return absl::DataLossError(absl::StrCat(
          "byte offset ", offset_, " of file '", path_,
          "' is not at the start of a line (did the file change since the "
          "position was saved?)"));
    }
  }
  offset_checked_ = true;
  return absl::OkStatus();
}

absl::Status FileCursor::ReadLines(int64_t max_lines, int64_t buffer_bytes,
                                   std::vector<std::string>* lines) {
  lines->clear();
  std::lock_guard<std::mutex> lock(mu_);
  JG_RETURN_IF_ERROR(EnsureOpen());
  int64_t pos = offset_;
  if (pos < window_begin_ ||
      pos > window_begin_ + static_cast<int64_t>(window_.size())) {
    window_.clear();
    window_begin_ = pos;
  }
  std::vector<std::string> out;
  // Window bytes before `scan` are known to hold no '\n' of the current line,
  // so a line longer than one buffer is scanned once, not once per refill.
  size_t scan = pos - window_begin_;
  while (static_cast<int64_t>(out.size()) < max_lines) {
    const size_t start = pos - window_begin_;
    const char* base = window_.data();
    const void* newline = std::memchr(base + scan, '\n', window_.size() - scan);
    if (newline != nullptr) {
      const size_t end = static_cast<const char*>(newline) - base;
      out.emplace_back(base + start, end - start);
      pos = window_begin_ + static_cast<int64_t>(end) + 1;
      scan = end + 1;
      continue;
    }
    // No complete line left in the window: drop the lines already returned,
    // so the window holds at most one line plus one buffer, and read more.
    window_.erase(0, start);
    window_begin_ = pos;
    scan = window_.size();
    JG_ASSIGN_OR_RETURN(size_t got, ExtendWindow(buffer_bytes));
    if (got > 0) continue;
    if (!window_.empty()) {
      return absl::DataLossError(
          absl::StrCat("file '", path_, "': the last line, at byte offset ",
                       pos, " (", window_.size(),
                       " bytes), has no trailing newline; the file may be "
                       "truncated"));
    }
    break;  // the end of the file, at a line boundary
  }
  offset_ = pos;
  *lines = std::move(out);
  return absl::OkStatus();
}

namespace {

class FileCursorSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kFileCursorTypeName; }

  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const FileCursor& cursor = blob.Get<FileCursor>();
    return sink(std::string(name),
                data_internal::SerializeCursorProto(
                    name, type_name(), {cursor.offset()}, cursor.path()));
  }

  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                        data_internal::CursorValues(proto));
    if (v.size() != 1 || v[0] < 0) {
      return absl::DataLossError(
          absl::StrCat("blob '", proto.name(),
                       "': a file cursor holds one non-negative byte offset"));
    }
    target->Reset(std::make_unique<FileCursor>(proto.content(), v[0]));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_TYPE(FileCursor, kFileCursorTypeName);
JG_REGISTER_BLOB_SERIALIZER(FileCursor, FileCursorSerializer);

}  // namespace
}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_table_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/io_faults.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

using leveldb_format::kFirst;
using leveldb_format::kFooterHandlesSize;
using leveldb_format::kFull;
using leveldb_format::kLast;
using leveldb_format::kLogBlockSize;
using leveldb_format::kLogHeaderSize;
using leveldb_format::kMiddle;
using leveldb_format::kNoCompression;
using leveldb_format::kTableMagic;
using leveldb_format::MaskCrc;
using leveldb_format::PutFixed32;
using leveldb_format::PutFixed64;
using leveldb_format::PutVarint64;

constexpr int kRestartInterval = 16;  // data blocks, as LevelDB's default

// Appends smaller than this are gathered into one write(2) of up to
// kGatherBytes; larger ones are written from the caller's memory.
constexpr size_t kDirectWriteBytes = size_t{256} << 10;
constexpr size_t kGatherBytes = size_t{1} << 20;

// The block trailer: the type byte and the masked CRC-32C of the contents
// and the type byte, given the CRC-32C of the contents.
void AppendTrailer(std::string* dst, uint32_t contents_crc) {
  const char type = static_cast<char>(kNoCompression);
  dst->push_back(type);
  PutFixed32(dst, MaskCrc(crc32c::Extend(contents_crc, &type, 1)));
}

}  // namespace

// --- OutputFile

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(
    const std::string& path, bool direct_io, bool large_direct_writes) {
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("create ", path));
  }
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
  std::unique_ptr<OutputFile> file(new OutputFile(path, fd));
  if (direct_io) {
    file->direct_ = StagedDirectWriter::Start(fd, path, large_direct_writes);
  }
  if (file->direct_ == nullptr) {
    file->gathered_.reserve(kGatherBytes + kDirectWriteBytes);
  }
  return file;
}

OutputFile::OutputFile(std::string path, int fd)
    : path_(std::move(path)), fd_(fd) {}

OutputFile::~OutputFile() {
  direct_.reset();  // its thread may be writing to fd_
  if (fd_ >= 0) ::close(fd_);
}

absl::Status OutputFile::Append(absl::string_view data) {
  crc_ = crc32c::Extend(crc_, data.data(), data.size());
  size_ += data.size();
  if (direct_ != nullptr) return direct_->Append(data);
  if (data.size() >= kDirectWriteBytes) {
    JG_RETURN_IF_ERROR(WriteGathered());
    return Write(data);
  }
  gathered_.append(data.data(), data.size());
  if (gathered_.size() >= kGatherBytes) return WriteGathered();
  return absl::OkStatus();
}

absl::Status OutputFile::AppendWithCrc(absl::string_view data,
                                       uint32_t data_crc) {
  crc_ = crc32c::Combine(crc_, data_crc, data.size());
  size_ += data.size();
  if (direct_ != nullptr) return direct_->Append(data);
  JG_RETURN_IF_ERROR(WriteGathered());
  return Write(data);
}

absl::Status OutputFile::AppendBorrowed(absl::string_view data,
                                        uint32_t data_crc) {
  if (direct_ == nullptr) return AppendWithCrc(data, data_crc);
  crc_ = crc32c::Combine(crc_, data_crc, data.size());
  size_ += data.size();
  return direct_->AppendBorrowed(data);
}

size_t OutputFile::PaddingToBorrow(size_t prefix_bytes,
                                   absl::string_view data) const {
  if (direct_ == nullptr) return 0;
  return StagedDirectWriter::PaddingToBorrow(size_ + prefix_bytes, data);
}

absl::Status OutputFile::Close() {
  if (direct_ != nullptr) {
    JG_RETURN_IF_ERROR(direct_->Finish());
    direct_.reset();
  }
  JG_RETURN_IF_ERROR(WriteGathered());
  const int fd = std::exchange(fd_, -1);
  if (int e = io_faults::Next()) {
    ::close(fd);
    return absl::ErrnoToStatus(e, absl::StrCat("close ", path_));
  }
  if (::close(fd) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", path_));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::WriteGathered() {
  if (gathered_.empty()) return absl::OkStatus();
  absl::Status status = Write(gathered_);
  gathered_.clear();
  return status;
}

absl::Status OutputFile::Write(absl::string_view data) {
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("write ", path_));
  }
  while (!data.empty()) {
    // Linux writes at most ~2 GiB per call; larger requests come back short.
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("write ", path_));
    }
    if (n == 0) {  // never for a regular file; do not spin
      return absl::InternalError(absl::StrCat(
          "write ", path_, ": no progress writing ", data.size(), " bytes"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// --- TableWriter

// Where a block is in its table file.
struct TableWriter::BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;  // without the trailer
  void EncodeTo(std::string* dst) const {
    PutVarint64(dst, offset);
    PutVarint64(dst, size);
  }
};

// Entries of one block: prefix-compressed keys with restart points
// (LevelDB's BlockBuilder).
class TableWriter::BlockBuilder {
 public:
  explicit BlockBuilder(int restart_interval)
      : restart_interval_(restart_interval) {}

  bool empty() const { return buffer_.empty(); }
  size_t SizeEstimate() const {
    return buffer_.size() + 4 * (restarts_.size() + 1);
  }
  const std::string& last_key() const { return last_key_; }

  void Add(absl::string_view key, absl::string_view value) {
    size_t shared = 0;
    if (counter_ < restart_interval_) {
      const size_t limit = std::min(last_key_.size(), key.size());
      while (shared < limit && last_key_[shared] == key[shared]) ++shared;
    } else {
      restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
      counter_ = 0;
    }
    PutVarint64(&buffer_, shared);
    PutVarint64(&buffer_, key.size() - shared);
    PutVarint64(&buffer_, value.size());
    buffer_.append(key.data() + shared, key.size() - shared);
    buffer_.append(value.data(), value.size());
    last_key_.assign(key.data(), key.size());
    ++counter_;
  }

  // The block's contents; the builder is empty again after the caller is
  // done with them (Reset()).
  absl::string_view Finish() {
    for (uint32_t restart : restarts_) PutFixed32(&buffer_, restart);
    PutFixed32(&buffer_, static_cast<uint32_t>(restarts_.size()));
    return buffer_;
  }

  void Reset() {
    buffer_.clear();
    restarts_.assign(1, 0);
    counter_ = 0;
    last_key_.clear();
  }

 private:
  const int restart_interval_;
  std::string buffer_;
  std::vector<uint32_t> restarts_ = {0};
  int counter_ = 0;
  std::string last_key_;
};

TableWriter::TableWriter(std::unique_ptr<OutputFile> file, uint64_t number,
                         size_t block_size)
    : file_(std::move(file)),
      number_(number),
      block_size_(block_size),
      data_block_(std::make_unique<BlockBuilder>(kRestartInterval)),
      index_block_(std::make_unique<BlockBuilder>(1)) {}

TableWriter::~TableWriter() = default;

absl::Status TableWriter::Add(absl::string_view key, absl::string_view value,
                              std::optional<uint32_t> value_crc32c) {
  if (smallest_.empty()) smallest_.assign(key.data(), key.size());
  largest_.assign(key.data(), key.size());
  if (value.size() < block_size_) {
    data_block_->Add(key, value);
    if (data_block_->SizeEstimate() >= block_size_) return FlushDataBlock();
    return absl::OkStatus();
  }
  // A block of its own, the value written from the caller's memory and
  // checksummed once.
  JG_RETURN_IF_ERROR(FlushDataBlock());
  const uint32_t value_crc =
      value_crc32c.has_value() ? *value_crc32c : Crc32c(value);
  return AddOwnBlock(key, {}, value, value_crc, /*borrow=*/false);
}

absl::Status TableWriter::AddBorrowed(absl::string_view key,
                                      absl::string_view head,
                                      absl::string_view body,
                                      uint32_t body_crc) {
  if (head.size() + body.size() < block_size_) {
    return Add(key, JoinValue(head, body));
  }
  if (smallest_.empty()) smallest_.assign(key.data(), key.size());
  largest_.assign(key.data(), key.size());
  JG_RETURN_IF_ERROR(FlushDataBlock());
  return AddOwnBlock(key, head, body, body_crc, /*borrow=*/true);
}

absl::Status TableWriter::AddOwnBlock(absl::string_view key,
                                      absl::string_view head,
                                      absl::string_view body, uint32_t body_crc,
                                      bool borrow) {
  const size_t value_size = head.size() + body.size();
  std::string prefix;  // the entry up to the body
  PutVarint64(&prefix, 0);
  PutVarint64(&prefix, key.size());
  PutVarint64(&prefix, value_size);
  prefix.append(key.data(), key.size());
  prefix.append(head.data(), head.size());
  std::string tail;
  PutFixed32(&tail, 0);  // the one restart point
  PutFixed32(&tail, 1);
  uint32_t block_crc = crc32c::Combine(Crc32c(prefix), body_crc, body.size());
  block_crc = crc32c::Extend(block_crc, tail.data(), tail.size());
  if (borrow) {
    // Between blocks, where no handle points: the body then starts at a file
    // offset its memory's alignment allows writing it from (O_DIRECT).
    const size_t padding = file_->PaddingToBorrow(prefix.size(), body);
    if (padding > 0) {
      JG_RETURN_IF_ERROR(file_->Append(std::string(padding, '\0')));
    }
  }
  const BlockHandle handle{file_->size(),
                           prefix.size() + body.size() + tail.size()};
  AppendTrailer(&tail, block_crc);
  JG_RETURN_IF_ERROR(file_->Append(prefix));
  JG_RETURN_IF_ERROR(borrow ? file_->AppendBorrowed(body, body_crc)
                            : file_->AppendWithCrc(body, body_crc));
  JG_RETURN_IF_ERROR(file_->Append(tail));
  AddIndexEntry(key, handle);
  return absl::OkStatus();
}

absl::Status TableWriter::Finish() {
  JG_RETURN_IF_ERROR(FinishBlocks());
  return Close();
}

absl::Status TableWriter::Close() { return file_->Close(); }

absl::Status TableWriter::FinishBlocks() {
  JG_RETURN_IF_ERROR(FlushDataBlock());
  BlockBuilder metaindex(kRestartInterval);
  JG_ASSIGN_OR_RETURN(BlockHandle metaindex_handle,
                      WriteBlock(metaindex.Finish()));
  JG_ASSIGN_OR_RETURN(BlockHandle index_handle,
                      WriteBlock(index_block_->Finish()));
  std::string footer;
  metaindex_handle.EncodeTo(&footer);
  index_handle.EncodeTo(&footer);
  footer.resize(kFooterHandlesSize, '\0');
  PutFixed64(&footer, kTableMagic);
  return file_->Append(footer);
}

absl::StatusOr<TableWriter::BlockHandle> TableWriter::WriteBlock(
    absl::string_view contents) {
  const BlockHandle handle{file_->size(), contents.size()};
  std::string trailer;
  AppendTrailer(&trailer, Crc32c(contents));
  JG_RETURN_IF_ERROR(file_->Append(contents));
  JG_RETURN_IF_ERROR(file_->Append(trailer));
  return handle;
}

absl::Status TableWriter::FlushDataBlock() {
  if (data_block_->empty()) return absl::OkStatus();
  // The block's last key separates it from the next one in the index
  // (LevelDB shortens it; a full key is as valid).
  const std::string last_key = data_block_->last_key();
  absl::StatusOr<BlockHandle> handle = WriteBlock(data_block_->Finish());
  data_block_->Reset();
  JG_RETURN_IF_ERROR(handle.status());
  AddIndexEntry(last_key, *handle);
  return absl::OkStatus();
}

void TableWriter::AddIndexEntry(absl::string_view key,
                                const BlockHandle& handle) {
  std::string encoded;
  handle.EncodeTo(&encoded);
  index_block_->Add(key, encoded);
}

// --- Log files

std::string LogFileWithRecord(absl::string_view record) {
  std::string out;
  size_t offset = 0;  // into the current block
  bool first = true;
  while (true) {
    const size_t left = kLogBlockSize - offset;
    if (left < kLogHeaderSize) {
      out.append(left, '\0');  // the block's trailer
      offset = 0;
      continue;
    }
    const size_t fragment = std::min(record.size(), left - kLogHeaderSize);
    const bool last = fragment == record.size();
    const uint8_t type = first && last ? kFull
                         : first       ? kFirst
                         : last        ? kLast
                                       : kMiddle;
    const char type_byte = static_cast<char>(type);
    const uint32_t crc =
        crc32c::Extend(Crc32c(&type_byte, 1), record.data(), fragment);
    PutFixed32(&out, MaskCrc(crc));
    out.push_back(static_cast<char>(fragment & 0xff));
    out.push_back(static_cast<char>(fragment >> 8));
    out.push_back(type_byte);
    out.append(record.data(), fragment);
    record.remove_prefix(fragment);
    offset = (offset + kLogHeaderSize + fragment) % kLogBlockSize;
    first = false;
    if (last) return out;
  }
}

}  // namespace jobgraph

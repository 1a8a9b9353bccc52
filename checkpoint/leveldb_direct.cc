#include "checkpoint/leveldb_direct.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_util.h"
#include "checkpoint/io_faults.h"
#include "checkpoint/leveldb_files.h"
#include "checkpoint/leveldb_format.h"
#include "checkpoint/leveldb_tables.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

using leveldb_format::InternalKey;
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
using leveldb_format::PutLengthPrefixed;
using leveldb_format::PutVarint64;

constexpr int kRestartInterval = 16;  // data blocks, as LevelDB's default
// LevelDB's config::kNumLevels - 1: its size-triggered compactions never
// start from the last level.
constexpr int kLastLevel = 6;
constexpr uint64_t kManifestNumber = 1;

// Appends smaller than this are gathered into one write(2) of up to
// kGatherBytes; larger ones are written from the caller's memory.
constexpr size_t kDirectWriteBytes = size_t{256} << 10;
constexpr size_t kGatherBytes = size_t{1} << 20;

// A file being written: small appends gathered into one write(2), large
// ones written from the caller's memory; the size and CRC-32C of everything
// appended are kept for JOBGRAPH_FILES. Every write, the close and the
// create pass through io_faults.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(
      const std::string& path) {
    if (int e = io_faults::Next()) {
      return absl::ErrnoToStatus(e, absl::StrCat("create ", path));
    }
    int fd;
    do {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
      return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
    return std::unique_ptr<OutputFile>(new OutputFile(path, fd));
  }

  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Append(absl::string_view data) {
    crc_ = crc32c::Extend(crc_, data.data(), data.size());
    size_ += data.size();
    if (data.size() >= kDirectWriteBytes) {
      JG_RETURN_IF_ERROR(WriteGathered());
      return Write(data);
    }
    gathered_.append(data.data(), data.size());
    if (gathered_.size() >= kGatherBytes) return WriteGathered();
    return absl::OkStatus();
  }

  // Append(data) for a caller that has the CRC-32C of `data` already.
  absl::Status AppendWithCrc(absl::string_view data, uint32_t data_crc) {
    crc_ = crc32c::Combine(crc_, data_crc, data.size());
    size_ += data.size();
    JG_RETURN_IF_ERROR(WriteGathered());
    return Write(data);
  }

  absl::Status Close() {
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

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }

 private:
  OutputFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    gathered_.reserve(kGatherBytes + kDirectWriteBytes);
  }

  absl::Status WriteGathered() {
    if (gathered_.empty()) return absl::OkStatus();
    absl::Status status = Write(gathered_);
    gathered_.clear();
    return status;
  }

  absl::Status Write(absl::string_view data) {
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

  const std::string path_;
  int fd_;
  std::string gathered_;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

// Where a block is in its table file (LevelDB's BlockHandle).
struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;  // without the trailer
  void EncodeTo(std::string* dst) const {
    PutVarint64(dst, offset);
    PutVarint64(dst, size);
  }
};

// Entries of one block: prefix-compressed keys with restart points
// (LevelDB's BlockBuilder).
class BlockBuilder {
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

// One table file being written (LevelDB's TableBuilder, without filters
// or compression). Keys are internal keys, added in increasing order.
class TableWriter {
 public:
  TableWriter(std::unique_ptr<OutputFile> file, uint64_t number,
              size_t block_size)
      : file_(std::move(file)),
        number_(number),
        block_size_(block_size),
        data_block_(kRestartInterval),
        index_block_(1) {}

  absl::Status Add(absl::string_view key, absl::string_view value) {
    if (smallest_.empty()) smallest_.assign(key.data(), key.size());
    largest_.assign(key.data(), key.size());
    if (value.size() < block_size_) {
      data_block_.Add(key, value);
      if (data_block_.SizeEstimate() >= block_size_) return FlushDataBlock();
      return absl::OkStatus();
    }
    // A block of its own, the value written from the caller's memory and
    // checksummed once.
    JG_RETURN_IF_ERROR(FlushDataBlock());
    std::string head;
    PutVarint64(&head, 0);
    PutVarint64(&head, key.size());
    PutVarint64(&head, value.size());
    head.append(key.data(), key.size());
    std::string tail;
    PutFixed32(&tail, 0);  // the one restart point
    PutFixed32(&tail, 1);
    const uint32_t value_crc = Crc32c(value);
    uint32_t block_crc = crc32c::Combine(Crc32c(head), value_crc, value.size());
    block_crc = crc32c::Extend(block_crc, tail.data(), tail.size());
    const BlockHandle handle{file_->size(),
                             head.size() + value.size() + tail.size()};
    AppendTrailer(&tail, block_crc);
    JG_RETURN_IF_ERROR(file_->Append(head));
    JG_RETURN_IF_ERROR(file_->AppendWithCrc(value, value_crc));
    JG_RETURN_IF_ERROR(file_->Append(tail));
    AddIndexEntry(key, handle);
    return absl::OkStatus();
  }

  // Writes the last data block, the (empty) metaindex block, the index
  // block and the footer, and closes the file. Not synced.
  absl::Status Finish() {
    JG_RETURN_IF_ERROR(FlushDataBlock());
    BlockBuilder metaindex(kRestartInterval);
    JG_ASSIGN_OR_RETURN(BlockHandle metaindex_handle,
                        WriteBlock(metaindex.Finish()));
    JG_ASSIGN_OR_RETURN(BlockHandle index_handle,
                        WriteBlock(index_block_.Finish()));
    std::string footer;
    metaindex_handle.EncodeTo(&footer);
    index_handle.EncodeTo(&footer);
    footer.resize(kFooterHandlesSize, '\0');
    PutFixed64(&footer, kTableMagic);
    JG_RETURN_IF_ERROR(file_->Append(footer));
    return file_->Close();
  }

  const OutputFile& file() const { return *file_; }
  uint64_t number() const { return number_; }
  const std::string& smallest() const { return smallest_; }
  const std::string& largest() const { return largest_; }

 private:
  static void AppendTrailer(std::string* dst, uint32_t contents_crc) {
    const char type = static_cast<char>(kNoCompression);
    dst->push_back(type);
    PutFixed32(dst, MaskCrc(crc32c::Extend(contents_crc, &type, 1)));
  }

  absl::StatusOr<BlockHandle> WriteBlock(absl::string_view contents) {
    const BlockHandle handle{file_->size(), contents.size()};
    std::string trailer;
    AppendTrailer(&trailer, Crc32c(contents));
    JG_RETURN_IF_ERROR(file_->Append(contents));
    JG_RETURN_IF_ERROR(file_->Append(trailer));
    return handle;
  }

  absl::Status FlushDataBlock() {
    if (data_block_.empty()) return absl::OkStatus();
    // The block's last key separates it from the next one in the index
    // (LevelDB shortens it; a full key is as valid).
    const std::string last_key = data_block_.last_key();
    absl::StatusOr<BlockHandle> handle = WriteBlock(data_block_.Finish());
    data_block_.Reset();
    JG_RETURN_IF_ERROR(handle.status());
    AddIndexEntry(last_key, *handle);
    return absl::OkStatus();
  }

  void AddIndexEntry(absl::string_view key, const BlockHandle& handle) {
    std::string encoded;
    handle.EncodeTo(&encoded);
    index_block_.Add(key, encoded);
  }

  const std::unique_ptr<OutputFile> file_;
  const uint64_t number_;
  const size_t block_size_;
  BlockBuilder data_block_;
  BlockBuilder index_block_;
  std::string smallest_;
  std::string largest_;
};

// A finished table, as the descriptor lists it.
struct TableInfo {
  bool in_order = true;  // of the increasing run, not of the kept entries
  uint64_t number = 0;
  uint64_t size = 0;
  std::string smallest;  // internal keys
  std::string largest;
};

// One record of a LevelDB log file (a MANIFEST-* file is one), fragmented
// over 32 KiB blocks as LevelDB's log writer does.
std::string LogFile(absl::string_view record) {
  std::string out;
  size_t offset = 0;  // into the current block
  bool first = true;
  do {
    const size_t left = kLogBlockSize - offset;
    if (left < kLogHeaderSize) {
      out.append(left, '\0');
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
    if (last) break;
  } while (true);
  return out;
}

class LevelDbDirect;

class DirectWriter final : public Writer {
 public:
  explicit DirectWriter(LevelDbDirect* db) : db_(db) {}
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  // Entries go to their files as they are Put; nothing waits for a flush.
  absl::Status Flush() override;

 private:
  LevelDbDirect* const db_;
};

class LevelDbDirect final : public DB {
 public:
  LevelDbDirect(const std::string& path, const DbOptions& options,
                const LevelDbOptions& tuning, std::function<void()> on_release)
      : DB(path, DbMode::kNew),
        options_(options),
        tuning_(tuning),
        on_release_(std::move(on_release)) {}

  ~LevelDbDirect() override { Release(); }

  bool ListsFiles() const override { return true; }

  // Takes the database's LOCK as LevelDB does (a POSIX write lock on the
  // whole file).
  absl::Status Open() {
    const std::string lock_path = JoinPath(path(), kLevelDbLockFile);
    do {
      lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    } while (lock_fd_ < 0 && errno == EINTR);
    if (lock_fd_ < 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("open LevelDB database ", path(),
                                              " (mode new): "
                                              "create ",
                                              lock_path));
    }
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(lock_fd_, F_SETLK, &lock) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("open LevelDB database ", path(),
                                              " (mode new): lock ", lock_path));
    }
    return absl::OkStatus();
  }

  absl::Status Put(absl::string_view key, absl::string_view value)
      ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(status_);
    const uint64_t sequence = ++last_sequence_;
    if (!has_last_key_ || key > last_key_) {
      status_ = AddInOrder(key, sequence, value);
      return status_;
    }
    auto [it, inserted] = out_of_order_.try_emplace(std::string(key));
    if (!inserted) out_of_order_bytes_ -= key.size() + it->second.value.size();
    it->second.sequence = sequence;
    it->second.value.assign(value.data(), value.size());
    out_of_order_bytes_ += key.size() + value.size();
    if (out_of_order_bytes_ >= tuning_.write_buffer_size) {
      status_ = WriteOutOfOrder();
    }
    return status_;
  }

  absl::Status status() ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 protected:
  std::unique_ptr<Cursor> NewCursorImpl() override {
    return NewErrorCursor(NotReadable());
  }
  std::unique_ptr<Writer> NewWriterImpl() override {
    return std::make_unique<DirectWriter>(this);
  }
  absl::StatusOr<std::string> GetImpl(absl::string_view, bool) override {
    return NotReadable();
  }

  absl::Status CloseImpl() override {
    absl::Status status = Finish();
    Release();
    if (status.ok()) status = WriteFileList();
    if (status.ok() && options_.durable_close) {
      status = FsyncDirContents(path());
      if (status.ok()) {
        status = FsyncDir(ParentDir(path()));
        if (!status.ok()) {
          status = absl::Status(status.code(),
                                absl::StrCat("make LevelDB database ", path(),
                                             " durable: ", status.message()));
        }
      }
    }
    return status;
  }

 private:
  struct Pending {
    uint64_t sequence = 0;
    std::string value;
  };

  absl::Status NotReadable() const {
    return absl::FailedPreconditionError(
        absl::StrCat("LevelDB database ", path(),
                     " was opened write-only (DbOptions::write_only); it "
                     "can be read once it is closed"));
  }

  absl::Status AddInOrder(absl::string_view key, uint64_t sequence,
                          absl::string_view value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (current_ == nullptr) {
      JG_ASSIGN_OR_RETURN(current_, NewTable());
    }
    last_key_.assign(key.data(), key.size());
    has_last_key_ = true;
    JG_RETURN_IF_ERROR(current_->Add(InternalKey(key, sequence), value));
    if (current_->file().size() >= tuning_.max_file_size) {
      return FinishTable(std::move(current_));
    }
    return absl::OkStatus();
  }

  absl::Status WriteOutOfOrder() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (out_of_order_.empty()) return absl::OkStatus();
    JG_ASSIGN_OR_RETURN(std::unique_ptr<TableWriter> table, NewTable());
    for (const auto& [key, pending] : out_of_order_) {
      JG_RETURN_IF_ERROR(
          table->Add(InternalKey(key, pending.sequence), pending.value));
    }
    out_of_order_.clear();
    out_of_order_bytes_ = 0;
    return FinishTable(std::move(table), /*in_order=*/false);
  }

  absl::StatusOr<std::unique_ptr<TableWriter>> NewTable()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t number = next_file_number_++;
    JG_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
                        OutputFile::Create(JoinPath(
                            path(), absl::StrFormat("%06d.ldb", number))));
    return std::make_unique<TableWriter>(std::move(file), number,
                                         tuning_.block_size);
  }

  absl::Status FinishTable(std::unique_ptr<TableWriter> table,
                           bool in_order = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JG_RETURN_IF_ERROR(table->Finish());
    written_[table->file().path()] = {table->file().size(),
                                      table->file().crc()};
    tables_.push_back(TableInfo{in_order, table->number(), table->file().size(),
                                table->smallest(), table->largest()});
    return absl::OkStatus();
  }

  // The descriptor's one VersionEdit: the in-order tables at the last level,
  // the out-of-order ones at level 0.
  std::string VersionEdit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    namespace format = leveldb_format;
    std::string edit;
    PutVarint64(&edit, format::kTagComparator);
    PutLengthPrefixed(&edit, format::kBytewiseComparatorName);
    PutVarint64(&edit, format::kTagLogNumber);
    PutVarint64(&edit, 0);
    PutVarint64(&edit, format::kTagPrevLogNumber);
    PutVarint64(&edit, 0);
    PutVarint64(&edit, format::kTagNextFileNumber);
    PutVarint64(&edit, next_file_number_);
    PutVarint64(&edit, format::kTagLastSequence);
    PutVarint64(&edit, last_sequence_);
    for (const TableInfo& table : tables_) {
      PutVarint64(&edit, format::kTagNewFile);
      PutVarint64(&edit, table.in_order ? kLastLevel : 0);
      PutVarint64(&edit, table.number);
      PutVarint64(&edit, table.size);
      PutLengthPrefixed(&edit, table.smallest);
      PutLengthPrefixed(&edit, table.largest);
    }
    return edit;
  }

  absl::Status WriteSmallFile(const std::string& name,
                              absl::string_view contents)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JG_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
                        OutputFile::Create(JoinPath(path(), name)));
    JG_RETURN_IF_ERROR(file->Append(contents));
    JG_RETURN_IF_ERROR(file->Close());
    written_[file->path()] = {file->size(), file->crc()};
    return absl::OkStatus();
  }

  // Finishes the tables and writes the descriptor, then CURRENT, which
  // makes the directory a LevelDB database.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(status_);
    if (current_ != nullptr) status_ = FinishTable(std::move(current_));
    if (status_.ok()) status_ = WriteOutOfOrder();
    const std::string manifest_name =
        absl::StrFormat("%s%06d", kLevelDbManifestPrefix, kManifestNumber);
    if (status_.ok()) {
      status_ = WriteSmallFile(manifest_name, LogFile(VersionEdit()));
    }
    if (status_.ok()) {
      status_ = WriteSmallFile(kLevelDbCurrentFile,
                               absl::StrCat(manifest_name, "\n"));
    }
    return status_;
  }

  absl::Status WriteFileList() ABSL_LOCKS_EXCLUDED(mu_) {
    std::map<std::string, WrittenFile> written;
    {
      std::lock_guard<std::mutex> lock(mu_);
      written = written_;
    }
    return WriteLevelDbFileList(
        path(), [&](const std::string& file) -> std::optional<WrittenFile> {
          auto it = written.find(file);
          if (it == written.end()) return std::nullopt;
          return it->second;
        });
  }

  // Closes open files and the lock (an unfinished database stays
  // unfinished: it has no CURRENT), then lets other DBs open the path.
  void Release() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_.reset();
      out_of_order_.clear();
    }
    if (lock_fd_ >= 0) ::close(std::exchange(lock_fd_, -1));
    if (on_release_) std::exchange(on_release_, nullptr)();
  }

  const DbOptions options_;
  const LevelDbOptions tuning_;
  // Used by Open(), Close() and the destructor only, which never run
  // beside a Put (db.h).
  std::function<void()> on_release_;
  int lock_fd_ = -1;

  std::mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // the first failed write
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_file_number_ ABSL_GUARDED_BY(mu_) = kManifestNumber + 1;
  // The table receiving increasing keys, and the last of those keys.
  std::unique_ptr<TableWriter> current_ ABSL_GUARDED_BY(mu_);
  std::string last_key_ ABSL_GUARDED_BY(mu_);
  bool has_last_key_ ABSL_GUARDED_BY(mu_) = false;
  // Entries whose keys came out of order, by key.
  std::map<std::string, Pending, std::less<>> out_of_order_
      ABSL_GUARDED_BY(mu_);
  size_t out_of_order_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<TableInfo> tables_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, WrittenFile> written_ ABSL_GUARDED_BY(mu_);
};

absl::Status DirectWriter::Put(absl::string_view key, absl::string_view value) {
  return db_->Put(key, value);
}

absl::Status DirectWriter::Flush() { return db_->status(); }

}  // namespace

absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbDirect(
    const std::string& path, const DbOptions& options,
    const LevelDbOptions& tuning, std::function<void()> on_release) {
  auto db = std::make_unique<LevelDbDirect>(path, options, tuning,
                                            std::move(on_release));
  JG_RETURN_IF_ERROR(db->Open());
  return std::unique_ptr<DB>(std::move(db));
}

}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_direct.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <future>  // NOLINT(build/c++11)
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/leveldb/leveldb_options.h"
#include "checkpoint/leveldb/leveldb_table_writer.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

using leveldb_format::InternalKey;
using leveldb_format::PutLengthPrefixed;
using leveldb_format::PutVarint64;

// LevelDB's config::kNumLevels - 1: its size-triggered compactions never
// start from the last level.
constexpr int kLastLevel = 6;
constexpr uint64_t kManifestNumber = 1;
// An out-of-order value of this size or more is written at once.
constexpr size_t kWriteAtOnceBytes = size_t{1} << 20;

// A finished table, as the descriptor lists it.
struct TableInfo {
  bool in_order = true;  // of the increasing run, not of the kept entries
  uint64_t number = 0;
  uint64_t size = 0;
  std::string smallest;  // internal keys
  std::string largest;
};

class LevelDbDirect;

class DirectWriter final : public Writer {
 public:
  explicit DirectWriter(LevelDbDirect* db) : db_(db) {}
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::Status PutWithCrc(absl::string_view key, absl::string_view value,
                          uint32_t value_crc32c) override;
  absl::Status PutBorrowed(absl::string_view key, absl::string_view head,
                           absl::string_view body,
                           uint32_t body_crc32c) override;
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

  // `value_crc`: the CRC-32C of `value` when the caller has it.
  absl::Status Put(absl::string_view key, absl::string_view value,
                   std::optional<uint32_t> value_crc = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(status_);
    const uint64_t sequence = ++last_sequence_;
    if (!has_last_key_ || key > last_key_) {
      status_ =
          AddInOrder(key, sequence,
                     [&](TableWriter* table, absl::string_view internal_key) {
                       return table->Add(internal_key, value, value_crc);
                     });
      return status_;
    }
    if (value.size() >= kWriteAtOnceBytes) {
      // A large value is written from the caller's memory (TableWriter::Add)
      // into a table of its own, after the entries kept so far (older), never
      // copied: the blob index of 100,000 blobs is megabytes and comes last,
      // out of order. (Save's chunks arrive in key order; a writer that puts
      // many large values out of order gets a level-0 table for each.)
      status_ = WriteOutOfOrder();
      if (status_.ok()) status_ = WriteAlone(key, sequence, value, value_crc);
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

  // Put of `head` + `body`. An entry in key order with a block of its own
  // has its body written from the caller's memory (TableWriter::AddBorrowed);
  // the tables holding such bodies are closed by Close(), before which the
  // caller keeps `body` (Writer::PutBorrowed). Out of order, the two are
  // joined and Put.
  absl::Status PutBorrowed(absl::string_view key, absl::string_view head,
                           absl::string_view body, uint32_t body_crc)
      ABSL_LOCKS_EXCLUDED(mu_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      JG_RETURN_IF_ERROR(status_);
      if (!has_last_key_ || key > last_key_) {
        status_ = AddInOrder(
            key, ++last_sequence_,
            [&](TableWriter* table, absl::string_view internal_key) {
              return table->AddBorrowed(internal_key, head, body, body_crc);
            });
        return status_;
      }
    }
    return Put(key, JoinValue(head, body),
               crc32c::Combine(Crc32c(head), body_crc, body.size()));
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
    // Every file first, then the file list (a temporary file, its fsync, the
    // rename and this directory's fsync): JOBGRAPH_FILES appears only once
    // every file it lists is durable, and the one fsync of the directory
    // makes all their entries durable with it. The database's own entry in
    // its parent is made durable by LevelDbType::Install (the rename, then
    // the parent's fsync), the only way a new database gets its name; a
    // fsync of the parent here would be one more for nothing (the power loss
    // test shows it: tests/power_loss/README.md).
    if (status.ok() && options_.durable_close) status = FsyncFilesIn(path());
    if (status.ok()) status = WriteFileList();
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

  // Adds an entry whose key sorts after every earlier one, through `add`
  // (given the current table and the entry's internal key).
  absl::Status AddInOrder(
      absl::string_view key, uint64_t sequence,
      absl::FunctionRef<absl::Status(TableWriter*, absl::string_view)> add)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (current_ == nullptr) {
      JG_ASSIGN_OR_RETURN(current_, NewTable());
    }
    last_key_.assign(key.data(), key.size());
    has_last_key_ = true;
    JG_RETURN_IF_ERROR(add(current_.get(), InternalKey(key, sequence)));
    if (current_->file().size() >= tuning_.max_file_size) {
      return FinishTable(std::move(current_));
    }
    return absl::OkStatus();
  }

  // Writes one out-of-order entry into a table of its own.
  absl::Status WriteAlone(absl::string_view key, uint64_t sequence,
                          absl::string_view value,
                          std::optional<uint32_t> value_crc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JG_ASSIGN_OR_RETURN(std::unique_ptr<TableWriter> table, NewTable());
    JG_RETURN_IF_ERROR(
        table->Add(InternalKey(key, sequence), value, value_crc));
    return FinishTable(std::move(table), /*in_order=*/false);
  }

  // Writes the kept out-of-order entries to a table.
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
    JG_ASSIGN_OR_RETURN(
        std::unique_ptr<OutputFile> file,
        OutputFile::Create(
            JoinPath(path(), absl::StrFormat("%06d.ldb", number)),
            tuning_.direct_io,
            table_bytes_ >= StagedDirectWriter::kLargeAfterBytes));
    return std::make_unique<TableWriter>(std::move(file), number,
                                         tuning_.block_size);
  }

  absl::Status FinishTable(std::unique_ptr<TableWriter> table,
                           bool in_order = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JG_RETURN_IF_ERROR(table->FinishBlocks());
    table_bytes_ += table->file().size();
    written_[table->file().path()] = {table->file().size(),
                                      table->file().crc()};
    tables_.push_back(TableInfo{in_order, table->number(), table->file().size(),
                                table->smallest(), table->largest()});
    return CloseTable(std::move(table));
  }

  // Closes a finished table. One written past the page cache still has
  // writes in flight: waiting for them here would leave the disk idle while
  // the next table's first buffer fills, once per table (a tenth of a large
  // save's time), so another thread waits and closes it, and the next table
  // starts now. Finish() collects the results before the descriptor names
  // the tables.
  absl::Status CloseTable(std::unique_ptr<TableWriter> table)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!table->file().direct()) return table->Close();
    // One table at most closes behind the current one: each holds staging
    // buffers until its writes are done.
    JG_RETURN_IF_ERROR(WaitForClose());
    TableWriter* const raw = table.get();
    std::future<absl::Status> closed;
    try {
      closed = std::async(std::launch::async, [raw] { return raw->Close(); });
    } catch (const std::system_error&) {
      return table->Close();  // no thread to be had: close it here
    }
    closing_.emplace(Closing{std::move(table), std::move(closed)});
    return absl::OkStatus();
  }

  // Waits for the table closing on another thread, if any; its status.
  absl::Status WaitForClose() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!closing_.has_value()) return absl::OkStatus();
    absl::Status status = closing_->closed.get();
    closing_.reset();
    return status;
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
    // Every table complete before the descriptor names them.
    absl::Status closed = WaitForClose();
    if (status_.ok()) status_ = std::move(closed);
    const std::string manifest_name =
        absl::StrFormat("%s%06d", kLevelDbManifestPrefix, kManifestNumber);
    if (status_.ok()) {
      status_ = WriteSmallFile(manifest_name, LogFileWithRecord(VersionEdit()));
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
      WaitForClose().IgnoreError();  // the database is abandoned
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
  // The finished table closing on a thread of its own; the future is set
  // when its file is closed.
  struct Closing {
    std::unique_ptr<TableWriter> table;
    std::future<absl::Status> closed;
  };
  std::optional<Closing> closing_ ABSL_GUARDED_BY(mu_);
  std::string last_key_ ABSL_GUARDED_BY(mu_);
  bool has_last_key_ ABSL_GUARDED_BY(mu_) = false;
  // Entries whose keys came out of order, by key.
  std::map<std::string, Pending, std::less<>> out_of_order_
      ABSL_GUARDED_BY(mu_);
  size_t out_of_order_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<TableInfo> tables_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, WrittenFile> written_ ABSL_GUARDED_BY(mu_);
  // Bytes of the finished table files: a database past
  // StagedDirectWriter::kLargeAfterBytes writes its next ones in large
  // requests from the start.
  uint64_t table_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::Status DirectWriter::Put(absl::string_view key, absl::string_view value) {
  return db_->Put(key, value);
}

absl::Status DirectWriter::PutWithCrc(absl::string_view key,
                                      absl::string_view value,
                                      uint32_t value_crc32c) {
  return db_->Put(key, value, value_crc32c);
}

absl::Status DirectWriter::PutBorrowed(absl::string_view key,
                                       absl::string_view head,
                                       absl::string_view body,
                                       uint32_t body_crc32c) {
  return db_->PutBorrowed(key, head, body, body_crc32c);
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

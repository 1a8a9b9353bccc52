#include "checkpoint/leveldb/leveldb_native.h"

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_options.h"
#include "checkpoint/leveldb/leveldb_table_checks.h"
#include "checkpoint/leveldb/leveldb_write_env.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "leveldb/cache.h"
#include "leveldb/db.h"
#include "leveldb/env.h"
#include "leveldb/iterator.h"
#include "leveldb/options.h"
#include "leveldb/slice.h"
#include "leveldb/status.h"
#include "leveldb/write_batch.h"

namespace jobgraph {

absl::Status NamingDatabase(absl::Status status, const std::string& open_path,
                            const std::string& path) {
  if (status.ok() || open_path == path) return status;
  return absl::Status(status.code(), absl::StrReplaceAll(status.message(),
                                                         {{open_path, path}}));
}

namespace {

// The one place where a leveldb::Status of LevelDB's DB becomes an
// absl::Status (table reads without it: LevelDbTableError). LevelDB
// keeps only NotFound from errno (everything else is "IO error"), so I/O
// failures map to Internal; its message usually names the file.
// `reading` marks reads of a finished database: there an I/O error means its
// files cannot be read back (LevelDB reports a truncated table file as
// "IO error: ... Invalid argument"), which is data loss, not a bug.
absl::Status FromLevelDb(const leveldb::Status& status,
                         absl::string_view context, bool reading = false) {
  if (status.ok()) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (status.IsIOError() && reading) {
    code = absl::StatusCode::kDataLoss;
  } else if (status.IsNotFound()) {
    code = absl::StatusCode::kNotFound;
  } else if (status.IsCorruption()) {
    code = absl::StatusCode::kDataLoss;
  } else if (status.IsInvalidArgument()) {
    code = absl::StatusCode::kInvalidArgument;
  } else if (status.IsNotSupportedError()) {
    code = absl::StatusCode::kUnimplemented;
  }
  return absl::Status(code, absl::StrCat(context, ": ", status.ToString()));
}

absl::string_view ToView(const leveldb::Slice& slice) {
  return absl::string_view(slice.data(), slice.size());
}

leveldb::Slice ToSlice(absl::string_view view) {
  return leveldb::Slice(view.data(), view.size());
}

// Routes LevelDB's info log to VLOG(1) instead of a LOG file inside the
// database directory, which would be one more file to sync and would change
// on every read of a committed checkpoint.
class VlogLogger final : public leveldb::Logger {
 public:
  explicit VlogLogger(std::string path) : path_(std::move(path)) {}
  void Logv(const char* format, std::va_list ap) override {
    if (!VLOG_IS_ON(1)) return;
    char buffer[512];
    std::vsnprintf(buffer, sizeof(buffer), format, ap);
    VLOG(1) << "LevelDB " << path_ << ": " << buffer;
  }

 private:
  const std::string path_;
};

class LevelDbCursor final : public Cursor {
 public:
  // `open_path`: where LevelDB opened the database (`path`, or a copy).
  LevelDbCursor(std::unique_ptr<leveldb::Iterator> iterator,
                const std::string* path, const std::string* open_path)
      : iterator_(std::move(iterator)), path_(path), open_path_(open_path) {
    iterator_->SeekToFirst();
  }

  void SeekToFirst() override { iterator_->SeekToFirst(); }
  void Seek(absl::string_view target) override {
    iterator_->Seek(ToSlice(target));
  }
  void Next() override { iterator_->Next(); }
  bool Valid() const override { return iterator_->Valid(); }
  absl::string_view key() const override { return ToView(iterator_->key()); }
  absl::string_view value() const override {
    return ToView(iterator_->value());
  }
  absl::Status status() const override {
    return NamingDatabase(
        FromLevelDb(iterator_->status(),
                    absl::StrCat("read LevelDB database ", *path_),
                    /*reading=*/true),
        *open_path_, *path_);
  }

 private:
  const std::unique_ptr<leveldb::Iterator> iterator_;
  const std::string* const path_;
  const std::string* const open_path_;
};

class LevelDbWriter final : public Writer {
 public:
  LevelDbWriter(leveldb::DB* db, size_t batch_bytes, size_t write_buffer_size,
                const std::string* path)
      : db_(db),
        batch_bytes_(batch_bytes),
        separate_after_bytes_(write_buffer_size / 2),
        path_(path) {
    // No sync: durability comes from Close(), which syncs every file once.
    // A sync per write made bulk writes 3-7x slower on this machine.
    write_options_.sync = false;
  }

  absl::Status Put(absl::string_view key, absl::string_view value) override {
    // A key that sorts before the previous one (Save's blob index key, written
    // last, usually does) would give the memtable holding it a key range
    // that overlaps the tables already flushed, and LevelDB would then
    // rewrite that whole table in a compaction (measured: ~200 MB, 0.5-0.9 s,
    // for 60 blobs of 16 MiB). So when the data written since the last such
    // cut may have filled a memtable, the memtable is moved into a table
    // first (CompactRange over an empty key range, as Close() does) and the
    // key starts a new one. Bounded by separate_after_bytes_, so writes in
    // random order cost at most one extra flush per half memtable.
    if (has_last_key_ && key < last_key_ &&
        bytes_since_cut_ >= separate_after_bytes_) {
      JG_RETURN_IF_ERROR(Flush());
      const leveldb::Slice empty;
      db_->CompactRange(&empty, &empty);  // Errors surface on the next Write.
      bytes_since_cut_ = 0;
    }
    last_key_.assign(key.data(), key.size());
    has_last_key_ = true;
    bytes_since_cut_ += key.size() + value.size();
    // Start a new batch rather than let this entry push the current one far
    // past the bound; a big value then goes into LevelDB on its own.
    if (entries_ > 0 &&
        batch_.ApproximateSize() + key.size() + value.size() > batch_bytes_) {
      JG_RETURN_IF_ERROR(Flush());
    }
    batch_.Put(ToSlice(key), ToSlice(value));
    ++entries_;
    if (batch_.ApproximateSize() >= batch_bytes_) return Flush();
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (entries_ == 0) return absl::OkStatus();
    leveldb::Status status = db_->Write(write_options_, &batch_);
    // Cleared even on failure: the DB has recorded the error and Close() will
    // fail, so retrying the same batch later would only repeat it.
    batch_.Clear();  // Keeps the buffer's capacity for the next batch.
    entries_ = 0;
    return FromLevelDb(status,
                       absl::StrCat("write to LevelDB database ", *path_));
  }

 private:
  leveldb::DB* const db_;
  const size_t batch_bytes_;
  const size_t separate_after_bytes_;
  const std::string* const path_;
  leveldb::WriteOptions write_options_;
  leveldb::WriteBatch batch_;
  size_t entries_ = 0;
  std::string last_key_;
  bool has_last_key_ = false;
  size_t bytes_since_cut_ = 0;
};

class LevelDb final : public DB {
 public:
  // `open_path`: where LevelDB opens the database, when not `path` (a
  // private copy); it is removed when the DB is released.
  LevelDb(const std::string& path, DbMode mode, const DbOptions& options,
          const LevelDbOptions& leveldb_options,
          std::function<void()> on_release, std::string open_path = "")
      : DB(path, mode),
        options_(options),
        leveldb_options_(leveldb_options),
        on_release_(std::move(on_release)),
        open_path_(open_path.empty() ? path : std::move(open_path)),
        logger_(path),
        cache_(leveldb::NewLRUCache(leveldb_options.block_cache_bytes)) {}

  ~LevelDb() override { Release(); }

  // Close() writes JOBGRAPH_FILES.
  bool ListsFiles() const override { return mode() == DbMode::kNew; }

  absl::Status Open() {
    leveldb::Options options;
    options.create_if_missing = mode() == DbMode::kNew;
    options.error_if_exists = mode() == DbMode::kNew;
    // Fail on any corruption (e.g. a damaged log record during recovery)
    // instead of silently dropping data, which LevelDB does by default.
    options.paranoid_checks = true;
    options.info_log = &logger_;
    options.block_cache = cache_.get();
    options.compression = leveldb::kNoCompression;  // Floats do not compress.
    options.write_buffer_size = leveldb_options_.write_buffer_size;
    options.max_file_size = leveldb_options_.max_file_size;
    options.block_size = leveldb_options_.block_size;
    if (mode() == DbMode::kRead) {
      // LevelDB's block reader trusts damaged entries (leveldb_table_checks.h).
      options.env = BlockCheckingTableEnv();
    }
    if (mode() == DbMode::kNew) {
      checksumming_env_ = std::make_unique<ChecksummingEnv>();
      options.env = checksumming_env_.get();
      if (leveldb_options_.flush_memtable_on_close) {
        discard_logs_env_ = NewDiscardLogsEnv(checksumming_env_.get());
        options.env = discard_logs_env_.get();
      }
    }
    leveldb::DB* db = nullptr;
    leveldb::Status status = leveldb::DB::Open(options, open_path_, &db);
    if (!status.ok()) {
      return NamingDatabase(
          FromLevelDb(status, absl::StrCat("open LevelDB database ", path(),
                                           " (mode ", DbModeName(mode()), ")")),
          open_path_, path());
    }
    db_.reset(db);
    return absl::OkStatus();
  }

 protected:
  std::unique_ptr<Cursor> NewCursorImpl() override {
    leveldb::ReadOptions read_options;
    read_options.verify_checksums = options_.verify_checksums;
    // A checkpoint is read once; caching its blocks would only evict others.
    read_options.fill_cache = false;
    return std::make_unique<LevelDbCursor>(
        std::unique_ptr<leveldb::Iterator>(db_->NewIterator(read_options)),
        &path(), &open_path_);
  }

  std::unique_ptr<Writer> NewWriterImpl() override {
    return std::make_unique<LevelDbWriter>(
        db_.get(), options_.writer_batch_bytes,
        leveldb_options_.write_buffer_size, &path());
  }

  absl::StatusOr<std::string> GetImpl(absl::string_view key,
                                      bool verify) override {
    leveldb::ReadOptions read_options;
    read_options.verify_checksums = options_.verify_checksums || verify;
    std::string value;
    leveldb::Status status = db_->Get(read_options, ToSlice(key), &value);
    if (status.IsNotFound()) return NotFoundKeyError(key);
    JG_RETURN_IF_ERROR(NamingDatabase(
        FromLevelDb(status, absl::StrCat("read LevelDB database ", path()),
                    /*reading=*/true),
        open_path_, path()));
    return value;
  }

 public:
  // A database read through LevelDB (its log held data) is checked against
  // its file list like one read from its tables; the copy LevelDB recovered
  // is not what the list describes, the database itself is.
  absl::Status VerifyFiles(const FileCheck& check) override {
    return VerifyLevelDbFileList(path(), check);
  }

 protected:
  absl::Status CloseImpl() override {
    absl::Status status;
    const absl::Time start = absl::Now();
    if (mode() == DbMode::kNew) {
      if (leveldb_options_.flush_memtable_on_close) {
        // Flushes the memtable into a table file and waits for it. An empty
        // key range overlaps no table file (unless one holds the empty key),
        // so nothing else is rewritten, unlike CompactRange(nullptr,
        // nullptr). The flush syncs the table and LevelDB's MANIFEST-* file and
        // deletes the log (empty: see NewDiscardLogsEnv). Without the flush the
        // logs are kept and hold the tail.
        const leveldb::Slice empty;
        db_->CompactRange(&empty, &empty);
      }
      // CompactRange returns nothing, and a failed background flush only
      // shows on the next write: an empty batch surfaces it.
      leveldb::WriteBatch nothing;
      status = FromLevelDb(db_->Write(leveldb::WriteOptions(), &nothing),
                           absl::StrCat("finish LevelDB database ", path()));
    }
    const absl::Time flushed = absl::Now();
    Release();
    if (status.ok() && mode() == DbMode::kNew) status = WriteFileList();
    if (status.ok() && mode() == DbMode::kNew && options_.durable_close) {
      // LevelDB closed its rotated logs without fsync and never syncs the
      // directory after creating files; this reaches all of them.
      status = FsyncDirContents(path());
      if (status.ok()) status = FsyncDir(ParentDir(path()));
      VLOG(1) << "LevelDB " << path() << ": close took "
              << absl::ToDoubleSeconds(absl::Now() - start) << " s, of which "
              << absl::ToDoubleSeconds(flushed - start)
              << " s memtable flush and "
              << absl::ToDoubleSeconds(absl::Now() - flushed)
              << " s LevelDB shutdown + fsync pass";
    }
    return status;
  }

 private:
  // Writes JOBGRAPH_FILES with the sizes and CRC-32Cs recorded as the files
  // were written.
  absl::Status WriteFileList() {
    return WriteLevelDbFileList(path(), [this](const std::string& file) {
      return checksumming_env_->Find(file);
    });
  }

  // Closes LevelDB (its background work finishes first), frees the cache it
  // used and removes the copy it was opened in, then runs on_release_ (which
  // lets other DBs open the path).
  void Release() {
    if (released_) return;
    released_ = true;
    db_.reset();
    cache_.reset();
    if (open_path_ != path()) {
      absl::Status removed = RemoveRecursively(open_path_);
      if (!removed.ok()) LOG(WARNING) << removed;
    }
    if (on_release_) std::exchange(on_release_, nullptr)();
  }

  const DbOptions options_;
  const LevelDbOptions leveldb_options_;
  std::function<void()> on_release_;
  const std::string open_path_;
  VlogLogger logger_;
  std::unique_ptr<leveldb::Cache> cache_;
  // Set for kNew databases (the second only when they discard their logs);
  // both outlive db_.
  std::unique_ptr<ChecksummingEnv> checksumming_env_;
  std::unique_ptr<leveldb::Env> discard_logs_env_;
  std::unique_ptr<leveldb::DB> db_;
  bool released_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbNative(
    const std::string& path, DbMode mode, const DbOptions& options,
    const LevelDbOptions& tuning, std::function<void()> on_release,
    std::string open_path) {
  auto db = std::make_unique<LevelDb>(
      path, mode, options, tuning, std::move(on_release), std::move(open_path));
  JG_RETURN_IF_ERROR(db->Open());  // ~LevelDb releases what it holds.
  return std::unique_ptr<DB>(std::move(db));
}

}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_db.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/leveldb/leveldb_direct.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_tables.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
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
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

// The one place where a leveldb::Status becomes an absl::Status. LevelDB
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

// A kNew database that flushes its memtable on close needs no write-ahead
// log. It is trusted only once Close() has returned OK, and Close() first
// moves the memtable into table files (which LevelDB syncs) and then fsyncs
// every file; a database destroyed without Close() carries no guarantee
// (db.h), and Save, which writes under a temporary name, then discards it.
// Writing the log would only copy every byte into the page cache a second
// time, to be deleted unread after the next memtable flush. So such a
// database gets log files that are created, synced and closed like files but
// drop what is appended: they stay empty, and a later open has nothing to
// replay. (LevelDB still checksums each log record before appending it.)
// Measured with tools/bench/checkpoint_bench (1 GiB, 64 x 16 MiB): the save
// takes ~20% less CPU and runs ~16% faster.
class DiscardingLogFile final : public leveldb::WritableFile {
 public:
  explicit DiscardingLogFile(leveldb::WritableFile* file) : file_(file) {}
  leveldb::Status Append(const leveldb::Slice& data) override {
    return leveldb::Status::OK();
  }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return file_->Sync(); }
  leveldb::Status Close() override { return file_->Close(); }

 private:
  const std::unique_ptr<leveldb::WritableFile> file_;
};

// Records the size and CRC-32C of every file written through it, as the
// bytes pass (no second read), following renames and removals. The records
// become the database's JOBGRAPH_FILES list at close. Thread-safe: LevelDB
// writes tables from its background thread.
class ChecksummingEnv final : public leveldb::EnvWrapper {
 public:
  ChecksummingEnv() : EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status NewWritableFile(const std::string& name,
                                  leveldb::WritableFile** result) override {
    leveldb::Status status = target()->NewWritableFile(name, result);
    if (status.ok()) {
      Set(name, WrittenFile{});
      *result = new File(this, name, *result);
    }
    return status;
  }
  leveldb::Status NewAppendableFile(const std::string& name,
                                    leveldb::WritableFile** result) override {
    // Appending continues a file this Env did not see from its start.
    Forget(name);
    return target()->NewAppendableFile(name, result);
  }
  leveldb::Status RenameFile(const std::string& from,
                             const std::string& to) override {
    if (int e = io_faults::Next()) {
      return leveldb::Status::IOError(from, std::strerror(e));
    }
    leveldb::Status status = target()->RenameFile(from, to);
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = files_.find(from);
      if (it != files_.end()) {
        files_[to] = it->second;
        files_.erase(from);
      } else {
        files_.erase(to);
      }
    }
    return status;
  }
  leveldb::Status RemoveFile(const std::string& name) override {
    Forget(name);
    return target()->RemoveFile(name);
  }

  // The record of `path`, if every byte of it was written through this Env.
  std::optional<WrittenFile> Find(const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return std::nullopt;
    return it->second;
  }

 private:
  class File final : public leveldb::WritableFile {
   public:
    File(ChecksummingEnv* env, std::string name, leveldb::WritableFile* file)
        : env_(env), name_(std::move(name)), file_(file) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
      if (int e = io_faults::Next()) return Injected(e);
      leveldb::Status status = file_->Append(data);
      if (status.ok()) {
        written_.size += data.size();
        written_.crc = crc32c::Extend(written_.crc, data.data(), data.size());
        env_->Set(name_, written_);
      }
      return status;
    }
    leveldb::Status Flush() override { return file_->Flush(); }
    leveldb::Status Sync() override {
      if (int e = io_faults::Next()) return Injected(e);
      return file_->Sync();
    }
    leveldb::Status Close() override {
      if (int e = io_faults::Next()) return Injected(e);
      return file_->Close();
    }

   private:
    leveldb::Status Injected(int error) const {
      return leveldb::Status::IOError(name_, std::strerror(error));
    }

    ChecksummingEnv* const env_;
    const std::string name_;
    const std::unique_ptr<leveldb::WritableFile> file_;
    WrittenFile written_;
  };

  void Set(const std::string& name, WrittenFile file) {
    std::lock_guard<std::mutex> lock(mu_);
    files_[name] = file;
  }
  void Forget(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(name);
  }

  mutable std::mutex mu_;
  std::map<std::string, WrittenFile> files_;
};

// The default Env, except that new log files ("<number>.log") discard their
// contents (DiscardingLogFile). Only for kNew databases that flush their
// memtable on close.
class DiscardLogsEnv final : public leveldb::EnvWrapper {
 public:
  explicit DiscardLogsEnv(leveldb::Env* target) : EnvWrapper(target) {}

  leveldb::Status NewWritableFile(const std::string& name,
                                  leveldb::WritableFile** result) override {
    leveldb::Status status = target()->NewWritableFile(name, result);
    if (status.ok() && absl::EndsWith(name, ".log")) {
      *result = new DiscardingLogFile(*result);
    }
    return status;
  }
};

// Paths (canonical) of the databases open in this process. LevelDB would
// refuse a second open with "lock ... already held by process", an I/O error;
// this gives a clear FailedPrecondition instead.
class OpenPaths {
 public:
  static OpenPaths& Get() {
    static OpenPaths* open_paths = new OpenPaths;  // Never destroyed.
    return *open_paths;
  }
  bool Acquire(const std::string& canonical) {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_.insert(canonical).second;
  }
  void Release(const std::string& canonical) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.erase(canonical);
  }

 private:
  std::mutex mu_;
  std::set<std::string> paths_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<bool> DirectIoSetting(bool configured) {
  const char* value = std::getenv(kDirectIoEnvVar);
  if (value == nullptr || *value == '\0') return configured;
  const absl::string_view v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  return absl::InvalidArgumentError(absl::StrCat(
      kDirectIoEnvVar, "=", v,
      " is not a setting: use 0 to write checkpoint table files through the "
      "page cache, 1 to write them with O_DIRECT (the default), or unset it"));
}

namespace {

absl::Status ValidateTuning(const LevelDbOptions& tuning,
                            const std::string& path) {
  // LevelDB clips these silently, after an int cast that wraps values of
  // 2 GiB and more to the minimum; a wrong value should be loud instead.
  struct Range {
    const char* name;
    size_t value;
    size_t min;
    size_t max;
  };
  const Range ranges[] = {
      {"write_buffer_size", tuning.write_buffer_size, size_t{64} << 10,
       size_t{1} << 30},
      {"max_file_size", tuning.max_file_size, size_t{1} << 20, size_t{1} << 30},
      {"block_size", tuning.block_size, size_t{1} << 10, size_t{4} << 20},
  };
  for (const Range& range : ranges) {
    if (range.value < range.min || range.value > range.max) {
      return absl::InvalidArgumentError(
          absl::StrCat("LevelDB database ", path, ": ", range.name, " = ",
                       range.value, " is outside [", range.min, ", ", range.max,
                       "]; LevelDB would silently clip it"));
    }
  }
  return absl::OkStatus();
}

// `status` with `open_path` (where LevelDB opened a private copy of the
// database, which is gone by the time anyone reads the message) replaced by
// `path`, the database's own.
absl::Status NamingDatabase(absl::Status status, const std::string& open_path,
                            const std::string& path) {
  if (status.ok() || open_path == path) return status;
  return absl::Status(status.code(), absl::StrReplaceAll(status.message(),
                                                         {{open_path, path}}));
}

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
          const LevelDbOptions& leveldb_options, std::string canonical_path,
          std::string open_path = "")
      : DB(path, mode),
        options_(options),
        leveldb_options_(leveldb_options),
        canonical_path_(std::move(canonical_path)),
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
      // LevelDB's block reader trusts damaged entries (leveldb_tables.h).
      options.env = BlockCheckingTableEnv();
    }
    if (mode() == DbMode::kNew) {
      checksumming_env_ = std::make_unique<ChecksummingEnv>();
      options.env = checksumming_env_.get();
      if (leveldb_options_.flush_memtable_on_close) {
        discard_logs_env_ =
            std::make_unique<DiscardLogsEnv>(checksumming_env_.get());
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
        // deletes the log (empty: see DiscardLogsEnv). Without the flush the
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

  // Closes LevelDB (its background work finishes first) and frees the cache
  // it used, then lets other DBs open the path.
  void Release() {
    if (released_) return;
    released_ = true;
    db_.reset();
    cache_.reset();
    if (open_path_ != path()) {
      absl::Status removed = RemoveRecursively(open_path_);
      if (!removed.ok()) LOG(WARNING) << removed;
    }
    OpenPaths::Get().Release(canonical_path_);
  }

  const DbOptions options_;
  const LevelDbOptions leveldb_options_;
  const std::string canonical_path_;
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

// Writes `bytes` to a new file `path` (no fsync: a scratch copy).
absl::Status WriteScratchFile(const std::string& path,
                              absl::string_view bytes) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("write ", path));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", path));
  }
  return absl::OkStatus();
}

// DataLoss naming the file when the database at `path` holds a file that
// LevelDB would take for one of its own, numbered 0, a number it never
// writes: its recovery asserts (aborting the process) on such a log.
absl::Status CheckFileNumbers(const std::string& path) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    absl::string_view number = name;
    if (!absl::ConsumePrefix(&number, "MANIFEST-") &&
        !absl::ConsumeSuffix(&number, ".log") &&
        !absl::ConsumeSuffix(&number, ".ldb") &&
        !absl::ConsumeSuffix(&number, ".sst") &&
        !absl::ConsumeSuffix(&number, ".dbtmp")) {
      continue;
    }
    if (!number.empty() &&
        number.find_first_not_of('0') == absl::string_view::npos) {
      return absl::DataLossError(
          absl::StrCat("LevelDB database ", path, " is damaged: it holds ",
                       name, ", a file number LevelDB never writes"));
    }
  }
  return absl::OkStatus();
}

// Copies the database at `path` into a new directory under the temp
// directory for LevelDB's recovery, and returns its path. Tables are
// hard-linked when the temp directory is on the same file system (LevelDB
// never changes a table file; it only creates and deletes them), copied
// otherwise; the other files (CURRENT, the descriptor, logs) are copied,
// since the recovery rewrites and deletes them.
absl::StatusOr<std::string> CopyToScratch(const std::string& path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string scratch = JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "jobgraph_leveldb_recovery.XXXXXX");
  if (::mkdtemp(scratch.data()) == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("create a directory to recover LevelDB database ",
                            path, " in (", scratch, "); set TMPDIR"));
  }
  absl::Status status = [&]() -> absl::Status {
    JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
    for (const std::string& name : names) {
      const std::string from = JoinPath(path, name);
      const std::string to = JoinPath(scratch, name);
      struct stat st;
      if (::stat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if ((absl::EndsWith(name, ".ldb") || absl::EndsWith(name, ".sst")) &&
          ::link(from.c_str(), to.c_str()) == 0) {
        continue;
      }
      JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(from));
      JG_RETURN_IF_ERROR(WriteScratchFile(to, bytes));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    RemoveRecursively(scratch).IgnoreError();
    return absl::Status(
        status.code(),
        absl::StrCat("cannot copy LevelDB database ", path,
                     " to recover it (set TMPDIR to a directory with room): ",
                     status.message()));
  }
  return scratch;
}

absl::StatusOr<std::string> CanonicalPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("resolve path ", path));
  }
  return std::string(buffer);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DB>> LevelDbType::OpenImpl(
    const std::string& path, DbMode mode, const DbOptions& options) const {
  JG_RETURN_IF_ERROR(ValidateTuning(options_, path));
  LevelDbOptions tuning = options_;
  if (options.write_only) {
    JG_ASSIGN_OR_RETURN(tuning.direct_io, DirectIoSetting(options_.direct_io));
  }
  bool created = false;
  if (mode == DbMode::kNew) {
    // Creating the directory ourselves makes "already exists" atomic and
    // keeps LevelDB from creating a database inside some existing directory.
    absl::Status status = CreateDir(path);
    if (absl::IsAlreadyExists(status)) {
      return absl::AlreadyExistsError(
          absl::StrCat("LevelDB database ", path,
                       " already exists; mode new creates a fresh database"));
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("cannot create LevelDB database ", path,
                                       ": ", status.message()));
    }
    created = true;
  } else {
    // Checked here so that opening a wrong path leaves nothing behind
    // (LevelDB would create its LOCK file first).
    JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
    if (!exists) {
      return absl::NotFoundError(
          absl::StrCat("LevelDB database ", path, " does not exist"));
    }
    JG_ASSIGN_OR_RETURN(bool has_current,
                        PathExists(JoinPath(path, kLevelDbCurrentFile)));
    if (!has_current) {
      return absl::NotFoundError(absl::StrCat(
          "no LevelDB database at ", path,
          ": it has no CURRENT file (an empty or foreign directory, or a "
          "database whose creation did not finish)"));
    }
  }

  if (mode == DbMode::kRead) {
    // A finished database is read without DB::Open, which would rewrite its
    // descriptor and log (leveldb_tables.h); only one whose log still holds
    // data needs LevelDB's recovery.
    JG_ASSIGN_OR_RETURN(std::string canonical, CanonicalPath(path));
    if (!OpenPaths::Get().Acquire(canonical)) {
      return absl::FailedPreconditionError(
          absl::StrCat("LevelDB database ", path,
                       " is already open in this process; close it first"));
    }
    absl::StatusOr<std::unique_ptr<DB>> tables = OpenLevelDbTables(
        path, options, [canonical] { OpenPaths::Get().Release(canonical); });
    // A failed open released the path already.
    if (!absl::IsUnimplemented(tables.status())) return tables;
    // A log that holds data needs LevelDB's recovery, which rewrites the
    // descriptor and the log: it runs on a private copy, so that the
    // database itself is never written (and may be read-only). The copy is
    // checked against the database's file list, when it has one, and its
    // table footers are checked before LevelDB trusts them. The path stays
    // held from the copy to the close.
    VLOG(1) << tables.status().message() << "; recovering a copy of it";
    if (!OpenPaths::Get().Acquire(canonical)) {
      return absl::FailedPreconditionError(
          absl::StrCat("LevelDB database ", path,
                       " is already open in this process; close it first"));
    }
    absl::Status names = CheckFileNumbers(path);
    if (!names.ok()) {
      OpenPaths::Get().Release(canonical);
      return names;
    }
    absl::StatusOr<std::string> scratch = CopyToScratch(path);
    absl::Status checked = scratch.status();
    if (checked.ok()) {
      DB::FileCheck check;
      check.record_required = false;
      check.read_contents = true;
      checked = VerifyLevelDbFileList(*scratch, check);
      if (checked.ok()) checked = CheckLevelDbTableFooters(*scratch);
      checked = NamingDatabase(checked, *scratch, path);
      if (!checked.ok()) RemoveRecursively(*scratch).IgnoreError();
    }
    if (!checked.ok()) {
      OpenPaths::Get().Release(canonical);
      return checked;
    }
    auto db = std::make_unique<LevelDb>(path, mode, options, options_,
                                        canonical, *scratch);
    JG_RETURN_IF_ERROR(db->Open());  // ~LevelDb removes the copy.
    return std::unique_ptr<DB>(std::move(db));
  }

  absl::Status status;
  absl::StatusOr<std::string> canonical = CanonicalPath(path);
  if (!canonical.ok()) {
    status = canonical.status();
  } else if (!OpenPaths::Get().Acquire(*canonical)) {
    status = absl::FailedPreconditionError(
        absl::StrCat("LevelDB database ", path,
                     " is already open in this process; close it first"));
  } else if (options.write_only && options_.write_tables_directly) {
    const std::string held = *canonical;
    absl::StatusOr<std::unique_ptr<DB>> db = OpenLevelDbDirect(
        path, options, tuning, [held] { OpenPaths::Get().Release(held); });
    if (db.ok()) return db;
    status = db.status();  // the DB released the path
  } else {
    auto db =
        std::make_unique<LevelDb>(path, mode, options, options_, *canonical);
    status = db->Open();
    if (status.ok()) return std::unique_ptr<DB>(std::move(db));
    // ~LevelDb released the path.
  }
  if (created) {
    // Leave no half-made database behind under the final name.
    absl::Status cleanup = RemoveRecursively(path);
    if (!cleanup.ok()) LOG(WARNING) << cleanup;
  }
  return status;
}

JG_REGISTER_DB_TYPE(kLevelDbType, std::make_shared<LevelDbType>());
JG_REGISTER_DB_TYPE(kLevelDbTypeAlias, std::make_shared<LevelDbType>());

}  // namespace jobgraph

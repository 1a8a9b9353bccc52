// The key-value database interface that checkpoints are written to and read
// from (Caffe2's DB / Cursor / Transaction, reshaped for absl::Status).
//
// A DB is opened through its DbType (below), which the DbRegistry
// (db_registry.h) finds by name, with a path and a mode. kNew creates a fresh
// database and fails if anything exists at the path; a database replaces an
// old one by being written under a temporary name and then installed
// (DbType::Install). kRead opens an existing database. Keys are ordered
// bytewise (as unsigned bytes), like LevelDB. A path may be open through one
// DB at a time in a process (FailedPrecondition otherwise).
//
// Ownership and lifetime: the caller owns the DB and every Cursor and Writer it
// hands out. Cursors and Writers must be destroyed before the DB is closed or
// destroyed; Close() refuses (FailedPrecondition) while any is alive, and
// destroying a DB that still has one is a fatal error.
//
// Durability: Close() of a database opened with kNew returns OK only if every
// Put made through it is durable (on disk, and its directory entry too) and
// no write failed. Destroying a DB without Close() releases it without that
// guarantee, which is what an abandoned, failed save wants.
//
// Thread-safety: a DB's NewCursor(), NewWriter() and Get() may be called from
// several threads at once. Each Cursor and each Writer is used by one thread
// at a time (several Writers on different threads are fine: their batches are
// applied atomically, in some order). Close() must not race with any other
// call on the same DB.

#ifndef JOBGRAPH_CHECKPOINT_DB_DB_H_
#define JOBGRAPH_CHECKPOINT_DB_DB_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/util/pause_gate.h"

namespace jobgraph {

enum class DbMode {
  kRead,  // Open an existing database; NotFound naming the path otherwise.
  kNew,   // Create a fresh database; AlreadyExists if the path exists.
};

// "read" or "new", for messages.
absl::string_view DbModeName(DbMode mode);

// The largest key plus value one Put accepts. LevelDB encodes lengths as
// 32-bit varints and breaks at 4 GiB (google/leveldb#718), and one huge entry
// is one huge log record and memtable; the serializer chunks big tensors into
// values of a few MiB, far below this.
inline constexpr size_t kMaxDbEntryBytes = size_t{1} << 30;

// Options for opening a DB that every DB type understands. Every field has a
// default that suits checkpoints. Tuning that only one type understands is
// part of that type's DbType object (e.g. LevelDbOptions in leveldb_db.h).
struct DbOptions {
  // A Writer buffers Puts into one batch until it holds this many bytes, then
  // writes it. A value at least this large is written as a batch of its own.
  size_t writer_batch_bytes = size_t{16} << 20;
  // Cursors and Get() verify stored checksums where the backend keeps them
  // (LevelDB: per block, software CRC32C, ~4x slower warm scans). A caller
  // that verifies its own checksums of every value may turn this off.
  bool verify_checksums = true;
  // A kNew DB will only be written until Close(): no Get(), no cursor. A
  // type may then write its files more directly, and refuse reads before
  // Close() with FailedPrecondition. LevelDB writes its table files itself
  // (leveldb_direct.h), with a third of the CPU and a small fraction of the
  // memory of its own write path. Save sets it.
  bool write_only = false;
  // Close() of a kNew DB makes everything durable (fsync of every file and of
  // the directories). Only benchmarks measuring the cost should turn it off.
  bool durable_close = true;
};

// How DbType::Copy runs.
struct CopyOptions {
  // When set, the copy calls pause->WaitWhileHeld() before each of its
  // chunks (a few MiB of a file, or an entry) and before it makes the copy
  // durable: a background copy gives way to a save that holds the gate
  // (pause_gate.h). Not owned; outlives the copy. Default: none, the copy
  // never waits.
  PauseGate* pause = nullptr;
};

// Iterates over a DB's entries in key order. A new cursor is positioned at
// the first entry. It sees a consistent snapshot taken when it was created.
class Cursor {
 public:
  Cursor() = default;
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;
  virtual ~Cursor() = default;

  virtual void SeekToFirst() = 0;
  // Positions at the first key >= `target`.
  virtual void Seek(absl::string_view target) = 0;
  // Requires Valid().
  virtual void Next() = 0;
  // False past the last entry or after an error (see status()).
  virtual bool Valid() const = 0;
  // Require Valid(). The views stay valid until the cursor moves or dies.
  virtual absl::string_view key() const = 0;
  virtual absl::string_view value() const = 0;
  // OK unless an error (e.g. a checksum mismatch) ended the iteration.
  virtual absl::Status status() const = 0;
};

// A cursor that is never valid and whose status() is `status`: what a DB
// hands out when it cannot read (closed, or not readable yet).
std::unique_ptr<Cursor> NewErrorCursor(absl::Status status);

// Buffers Puts into batches of bounded size and writes them to the DB. Writes
// become visible to Get() and new cursors when their batch is written: when
// the buffer fills, on Flush(), or when the Writer is destroyed. A failed
// write is also remembered by the DB, whose Close() then fails, so that a
// partially written database can never look complete.
// `head` followed by `body`, as one value: what a DB that cannot write a
// borrowed body later stores for Writer::PutBorrowed.
std::string JoinValue(absl::string_view head, absl::string_view body);

class Writer {
 public:
  Writer() = default;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  // Writes what is still buffered; an error is logged and recorded in the DB.
  virtual ~Writer() = default;

  // Later Puts of the same key replace earlier ones. InvalidArgument if
  // key.size() + value.size() > kMaxDbEntryBytes.
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;
  // Put(key, value) for a caller that has the CRC-32C of `value` already
  // (Save checksums every value for its blob index): a DB that checksums
  // what it writes uses it instead of reading the value a second time.
  virtual absl::Status PutWithCrc(absl::string_view key,
                                  absl::string_view value,
                                  uint32_t value_crc32c) {
    return Put(key, value);
  }
  // Put of the value `head` followed by `body`, for a caller that has the
  // CRC-32C of `body`. `body` is borrowed: it must stay valid and unchanged
  // until the DB is closed or destroyed, so that a DB may write it from the
  // caller's memory after this returns (the direct LevelDB writer writes a
  // large body past the page cache straight from it, no copy). The default
  // joins the two and calls PutWithCrc.
  virtual absl::Status PutBorrowed(absl::string_view key,
                                   absl::string_view head,
                                   absl::string_view body,
                                   uint32_t body_crc32c);
  // Writes the buffered batch, if any.
  virtual absl::Status Flush() = 0;
};

class DB {
 public:
  DB(const DB&) = delete;
  DB& operator=(const DB&) = delete;
  // Releases the database without Close()'s durability guarantee.
  virtual ~DB();

  const std::string& path() const { return path_; }
  DbMode mode() const { return mode_; }
  bool closed() const { return closed_; }

  // A cursor positioned at the first entry. After Close() it is never Valid()
  // and its status() is FailedPrecondition.
  std::unique_ptr<Cursor> NewCursor();

  // FailedPrecondition for a DB opened with kRead, or after Close().
  absl::StatusOr<std::unique_ptr<Writer>> NewWriter();

  // The value stored under `key`; NotFound naming the key and the path.
  absl::StatusOr<std::string> Get(absl::string_view key);
  // Get() that checks the backend's own checksums of what it reads (LevelDB:
  // the blocks' CRC-32C) even when DbOptions::verify_checksums is off: for
  // the few values that carry no checksum of their own (the blob index).
  // Damage is DataLoss naming the path.
  absl::StatusOr<std::string> GetVerified(absl::string_view key);

  // True when Close() of this database (kNew) records the files it wrote,
  // so that VerifyFiles can check them later (LevelDB: JOBGRAPH_FILES). The
  // blob index says so (BlobIndex.files_listed), which makes a missing
  // record damage instead of an old database.
  virtual bool ListsFiles() const { return false; }

  // Checks the stored files themselves against what was recorded when they
  // were written (LevelDB: every file's size and CRC-32C in JOBGRAPH_FILES):
  // with `read_contents`, every byte once, so damage outside the values
  // (indexes, the backend's own metadata) shows; without, only that each
  // recorded file is there with its recorded size. DataLoss naming the
  // file. Without a record: DataLoss when `record_required` (the blob index
  // says one was written), else OK (types without files, databases written
  // before such records).
  struct FileCheck {
    // The blob index says the database recorded its files.
    bool record_required = false;
    // Read every byte and compare checksums; otherwise sizes only.
    bool read_contents = true;
  };
  virtual absl::Status VerifyFiles(const FileCheck& check) {
    (void)check;
    return absl::OkStatus();
  }

  // Releases the database. For kNew (with DbOptions::durable_close) this
  // first makes every written byte durable. Fails if a Writer or Cursor is
  // still alive (the DB stays open), or if any earlier write failed (the DB
  // is closed anyway). A second call returns OK.
  absl::Status Close();

 protected:
  DB(std::string path, DbMode mode);

  // Backend hooks, called only while the DB is open; Close() and the
  // wrappers in db.cc do the checks and the bookkeeping.
  virtual std::unique_ptr<Cursor> NewCursorImpl() = 0;
  virtual std::unique_ptr<Writer> NewWriterImpl() = 0;
  // Returns NotFoundKeyError(key) for a missing key. `verify`: check stored
  // checksums even if DbOptions::verify_checksums is off (GetVerified).
  virtual absl::StatusOr<std::string> GetImpl(absl::string_view key,
                                              bool verify) = 0;
  virtual absl::Status CloseImpl() = 0;

  absl::Status NotFoundKeyError(absl::string_view key) const;

 private:
  class TrackedCursor;
  class TrackedWriter;

  void RecordWriteError(const absl::Status& status);

  const std::string path_;
  const DbMode mode_;
  bool closed_ = false;
  std::atomic<int> live_cursors_{0};
  std::atomic<int> live_writers_{0};
  std::mutex mu_;
  absl::Status first_write_error_ ABSL_GUARDED_BY(mu_);
};

// One kind of database ("leveldb", "memory", ...): opens databases of that
// kind and knows how they are stored, so that the layers above can put a
// finished database in place, replace or delete one without knowing whether
// it is a directory, a set of files or an entry in memory.
//
// The commit protocol built on it: write the database with DbMode::kNew under
// a temporary path in the same directory as its final path, Close() it
// (which makes it durable), then Install(temporary, final). A reader of the
// final path sees the old database or the new one, never a mix, even after a
// crash.
//
// The DbRegistry owns one DbType per registered name; a caller may also make
// its own (e.g. a LevelDbType with other tuning). A DbType holds only
// configuration: every method is const and may be called from any thread.
// Errors are absl::Status naming the path.
class DbType {
 public:
  DbType() = default;
  DbType(const DbType&) = delete;
  DbType& operator=(const DbType&) = delete;
  virtual ~DbType() = default;

  // Opens the database at `path` (see DbMode). The caller owns the result.
  absl::StatusOr<std::unique_ptr<DB>> Open(
      const std::string& path, DbMode mode,
      const DbOptions& options = DbOptions()) const {
    return OpenImpl(path, mode, options);
  }

  // Whether a database of this type is at `path`: finished or not, intact or
  // damaged (e.g. a LevelDB directory that lost its CURRENT file), i.e.
  // anything that Install may replace and Remove may delete. False when
  // nothing is there or something that is not such a database. An error only
  // when the answer cannot be known (e.g. permission denied).
  virtual absl::StatusOr<bool> Exists(const std::string& path) const = 0;

  // OK when Install(temporary, `path`) may put a database at `path`: nothing
  // is there, a database of this type is (Exists), or a placeholder that the
  // type overwrites (LevelDB: an empty directory). FailedPrecondition naming
  // `path` when replacing what is there could destroy unrelated data, or
  // when `path` cannot hold a database (LevelDB: its directory is missing).
  // Lets a writer fail before writing anything; Install checks again.
  virtual absl::Status CheckInstallable(const std::string& path) const = 0;

  // Atomically puts the finished, closed database at `temp_path` under
  // `final_path`, replacing any database there, and makes the new name
  // durable. `temp_path` must be in the same directory as `final_path`. A
  // replaced database is deleted, possibly in the background (LevelDB: it
  // lingers under `temp_path` until then; background_delete.h).
  // Errors: NotFound when no database is at `temp_path`; those of
  // CheckInstallable for `final_path`; FailedPrecondition while either is
  // open, where the type tracks that. On an error `final_path` holds its old
  // database, or the new one when only making the change durable failed, and
  // whatever is left at `temp_path` is the caller's to Remove.
  virtual absl::Status Install(const std::string& temp_path,
                               const std::string& final_path) const = 0;

  // Deletes the database at `path`, also an unfinished or damaged one (the
  // leftover of a crashed writer). NotFound naming `path` when nothing is
  // there; FailedPrecondition while it is open, where the type tracks that.
  // Callers pass only paths that hold a database of this type or its
  // remains: a directory-backed type deletes the whole directory.
  virtual absl::Status Remove(const std::string& path) const = 0;

  // Copies the finished, closed database at `from` to `to`, where nothing
  // may be: callers pass a temporary path that they then Install (as
  // CopyCheckpointDb in checkpoint/ops/save_load_ops.h does). When it
  // returns, the copy is durable as Close() of a kNew database makes a
  // database durable (its name in its parent directory is made durable by
  // Install's rename, the only way a copy gets its final name), and what it
  // copied was checked against what the database's writer recorded. Returns
  // the bytes copied: those of the files for a type whose databases are
  // files, else those of the keys and values.
  //
  // Errors: DataLoss naming the file (or the key) whose bytes do not match
  // the record; NotFound naming `from` when no database is there;
  // AlreadyExists when something is at `to`, which is left alone. On any
  // error whatever the copy created at `to` is removed (best effort).
  // `from` is never written.
  //
  // The default opens `from` with DbMode::kRead and `to` with DbMode::kNew,
  // copies every entry through a cursor, which checks the backend's own
  // checksums of what it reads (DbOptions::verify_checksums), and closes the
  // copy. A type whose databases are files overrides it with a copy of the
  // files (LevelDB: every file its JOBGRAPH_FILES lists, checked against
  // the list; FailedPrecondition for a database without one). Either waits
  // at options.pause between chunks.
  virtual absl::StatusOr<int64_t> Copy(const std::string& from,
                                       const std::string& to,
                                       const CopyOptions& options) const;

  // A finished, closed database at `from` as bytes for a copy on another
  // machine (Unpack), checked against what its writer recorded as it is
  // read: DataLoss naming the file whose bytes do not match; NotFound naming
  // `from`. The whole database is held in memory. `from` is never written.
  // Default: Unimplemented naming the type (a type whose databases are not
  // files).
  virtual absl::StatusOr<std::string> Pack(const std::string& from) const;

  // Writes what Pack returned as a database at `to`, where nothing may be
  // (callers pass a temporary path they then Install, as with Copy). Durable
  // as Copy's result is. Returns the bytes written, counted as Copy counts
  // them. DataLoss when `packed` is damaged (checked against the list of
  // files it carries); AlreadyExists when something is at `to`, which is
  // left alone; on any error what it created at `to` is removed (best
  // effort). Default: Unimplemented naming the type.
  virtual absl::StatusOr<int64_t> Unpack(absl::string_view packed,
                                         const std::string& to) const;

  // Keeps what Pack returned in memory as the finished database that Open
  // reads (DbMode::kRead) at `path`, until ReleaseHeld(path): for a copy
  // read once, which then never touches a disk. Checked as Unpack checks it
  // (DataLoss when damaged) before it is held; AlreadyExists when a
  // database is held at `path` already. Nothing at `path` on disk is read
  // or written; while held, the held one is what a read of `path` opens.
  // Returns the bytes of the database's files, as Unpack counts them.
  // Default: Unimplemented naming the type.
  virtual absl::StatusOr<int64_t> HoldPacked(std::string packed,
                                             const std::string& path) const;
  // Drops what HoldPacked holds at `path` (nothing when nothing is); a DB
  // opened from it stays readable until it is closed.
  virtual void ReleaseHeld(const std::string& path) const {}

  // The pid of another process that has the database at `path` open, when
  // the type can tell (LevelDB: the lock on its LOCK file), else nullopt.
  // Tools check it before deleting leftovers a running job may still write.
  virtual std::optional<int64_t> OpenInAnotherProcess(
      const std::string& path) const {
    return std::nullopt;
  }

 protected:
  // Open() without the default argument, which virtual functions must not
  // have.
  virtual absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode, const DbOptions& options) const = 0;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_DB_DB_H_

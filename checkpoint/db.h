// The key-value database interface that checkpoints are written to and read
// from (Caffe2's DB / Cursor / Transaction, reshaped for absl::Status).
//
// A DB is opened through the DbRegistry (db_registry.h) by type name, path and
// mode. kNew creates a fresh database and fails if anything exists at the
// path; replacing an old checkpoint atomically is the job of the layer above,
// which writes under a temporary name and renames. kRead opens an existing
// database. Keys are ordered bytewise (as unsigned bytes), like LevelDB.
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

#ifndef JOBGRAPH_CHECKPOINT_DB_H_
#define JOBGRAPH_CHECKPOINT_DB_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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

// LevelDB tuning for bulk checkpoint writes; other backends ignore it. The
// defaults are the best measured on this machine (perf_limits.md section 2 and
// tools/bench/db_write_bench.cc).
struct LevelDbTuning {
  // Memtable size; also the size of each log file. 256 MiB makes a 1 GiB
  // checkpoint 4 table files and lets the background flush overlap the
  // writer. Must be in [64 KiB, 1 GiB]: LevelDB 1.23 casts it to int, so
  // >= 2 GiB would silently become 64 KiB; Open rejects such values.
  size_t write_buffer_size = size_t{256} << 20;
  // Target size of table files. Few large files mean fewer fsyncs and
  // MANIFEST edits and faster cold reads. Must be in [1 MiB, 1 GiB].
  size_t max_file_size = size_t{64} << 20;
  // Uncompressed bytes per data block. A multi-MiB value is one block
  // whatever this is; 64 KiB (Caffe2's default) keeps indexes small for small
  // values. Must be in [1 KiB, 4 MiB].
  size_t block_size = size_t{64} << 10;
  // Capacity of the block cache. Small on purpose: checkpoint reads are one
  // pass and do not fill it (fill_cache = false), so it only holds index
  // blocks and the occasional Get.
  size_t block_cache_bytes = size_t{4} << 20;
  // Close() of a kNew database first moves the memtable into a table file
  // (DB::CompactRange over an empty key range: it flushes the memtable and
  // compacts nothing). Without it, up to write_buffer_size bytes stay only in
  // the log, and every later open of the checkpoint replays that log,
  // rewrites it as a table and deletes it (slow, and it modifies a committed
  // checkpoint). Measured with tools/bench/db_write_bench.cc: replaying the
  // 268 MB log that 1 GiB leaves behind takes 1.3-1.6 s (a 1 GiB log with a
  // 1 GiB memtable: 5.4-6.3 s), while the flush costs one table build of at
  // most write_buffer_size at close and the next open takes a few ms.
  bool flush_memtable_on_close = true;
};

// Options for opening a DB. Every field has a default that suits checkpoints.
struct DbOptions {
  // A Writer buffers Puts into one batch until it holds this many bytes, then
  // writes it. A value at least this large is written as a batch of its own.
  size_t writer_batch_bytes = size_t{16} << 20;
  // Cursors and Get() verify stored checksums where the backend keeps them
  // (LevelDB: per block, software CRC32C, ~4x slower warm scans). A caller
  // that verifies its own checksums of every value may turn this off.
  bool verify_checksums = true;
  // Close() of a kNew DB makes everything durable (fsync of every file and of
  // the directories). Only benchmarks measuring the cost should turn it off.
  bool durable_close = true;
  // Backend-specific tuning.
  LevelDbTuning leveldb;
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

// Buffers Puts into batches of bounded size and writes them to the DB. Writes
// become visible to Get() and new cursors when their batch is written: when
// the buffer fills, on Flush(), or when the Writer is destroyed. A failed
// write is also remembered by the DB, whose Close() then fails, so that a
// partially written database can never look complete.
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
  // Returns NotFoundKeyError(key) for a missing key.
  virtual absl::StatusOr<std::string> GetImpl(absl::string_view key) = 0;
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

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_DB_H_

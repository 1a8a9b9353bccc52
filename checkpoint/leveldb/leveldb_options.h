// LevelDbOptions, the tuning of the LevelDB adapter (leveldb_db.h), and the
// environment variable that overrides one of them. It is a header of its own
// because both ways of writing a database read it: LevelDbType (leveldb_db.h)
// and the direct writer (leveldb_direct.h), which leveldb_db.cc opens; with
// the struct in leveldb_db.h the two would include each other. Callers reach
// it through leveldb_db.h.
//
// Plain values, copied by whoever holds them. DirectIoSetting reads the
// environment and is thread-safe as long as nothing sets the variable
// concurrently (getenv(3)).

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_OPTIONS_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_OPTIONS_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace jobgraph {

// LevelDB tuning for bulk checkpoint writes. The defaults are the fastest
// that tools/bench/db_write_bench and checkpoint_bench found (the figures
// are in tools/bench/README.md). Open() rejects values outside the stated
// ranges with InvalidArgument instead of letting LevelDB clip them.
struct LevelDbOptions {
  // Memtable size; also the size of each log file. 256 MiB makes a 1 GiB
  // checkpoint 4 table files and lets the background flush overlap the
  // writer. Must be in [64 KiB, 1 GiB]: LevelDB 1.23 casts it to int, so
  // >= 2 GiB would silently become 64 KiB.
  size_t write_buffer_size = size_t{256} << 20;
  // Target size of table files. Few large files mean fewer fsyncs and
  // edits of its MANIFEST-* file and faster cold reads. Must be in [1 MiB, 1
  // GiB].
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
  // rewrites it as a table and deletes it (seconds per GiB, and it modifies
  // a committed checkpoint), while the flush costs one table build of at
  // most write_buffer_size at close.
  bool flush_memtable_on_close = true;
  // A kNew database opened with DbOptions::write_only (as Save opens its
  // databases) is written without LevelDB's write path: its table files,
  // descriptor and CURRENT are written directly (leveldb_direct.h); the
  // result is a LevelDB database like any other (checkpoint_bench's variant
  // direct=0 is LevelDB's path).
  // block_size, max_file_size and write_buffer_size (the bound on entries
  // Put out of key order, kept in memory) apply; nothing else does.
  bool write_tables_directly = true;
  // Those table files are written with O_DIRECT (staged_direct_writer.h),
  // where the file system allows it: past the page cache, whose copy of each
  // byte into fresh pages is the cost of a large save on a VM (checkpoint_bench
  // variant dio=0 writes through the cache). The environment variable
  // JOBGRAPH_DIRECT_IO, when set, decides instead (DirectIoSetting): a user
  // whose file system is slower without its cache (a network file system,
  // say) sets JOBGRAPH_DIRECT_IO=0 without rebuilding.
  bool direct_io = true;
};

// The environment variable that overrides LevelDbOptions::direct_io.
inline constexpr char kDirectIoEnvVar[] = "JOBGRAPH_DIRECT_IO";

// Whether table files are written with O_DIRECT: `configured` when
// JOBGRAPH_DIRECT_IO is unset or empty, false for "0", true for "1";
// InvalidArgument naming the variable and its value otherwise.
absl::StatusOr<bool> DirectIoSetting(bool configured);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_OPTIONS_H_

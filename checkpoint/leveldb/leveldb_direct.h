// A new LevelDB database written without LevelDB: every Put goes straight
// into a table file in LevelDB's documented table format, and Close() writes
// the descriptor (MANIFEST-000001, one VersionEdit) and CURRENT that make the
// directory a database LevelDB opens like one it wrote itself (the file
// writers are in leveldb_table_writer.h, the encodings in leveldb_format.h).
// The LevelDB adapter uses it for kNew databases opened with
// DbOptions::write_only (what Save does); internal to the adapter.
//
// Why: LevelDB's own write path copies every value into a write batch, a
// memtable and a table block, and checksums it in software for the log
// record and again for the table block (Debian's LevelDB has no hardware
// CRC-32C). Here a small value is copied once, into its block; a value of at
// least a block gets a block of its own and its bytes are checksummed once
// (hardware CRC-32C): the block's and the file's checksums are derived from
// that one pass (crc32c::Combine). Through Writer::PutBorrowed (Save's
// tensor chunks) such a value's body is not copied at all: with O_DIRECT its
// block starts after up to 4 KiB of padding that no handle covers, so that
// the body's pages are written from the caller's memory
// (StagedDirectWriter::AppendBorrowed), and the body stays borrowed until
// Close().
//
// Layout. Puts whose keys increase go, in order, into table files of about
// max_file_size each. A Put whose key does not sort after the previous one is
// kept in memory, sorted (up to write_buffer_size bytes; then those entries
// become a table of their own). Every entry gets the next sequence number,
// so a later Put of a key wins wherever it lands, as in LevelDB. The
// in-order tables never overlap and go to LevelDB's last level (a LevelDB
// that opens the database for writing finds nothing to compact there); the
// out-of-order tables go to level 0, which may overlap anything and is
// searched first. That is right because an entry kept out of order is
// always newer than an in-order entry of the same key (the in-order key
// would have had to sort after it), and is in a table with a higher file
// number. No log file is written.
//
// The DB is write-only until it is closed: Get() and cursors fail with
// FailedPrecondition. Close() writes the descriptor, CURRENT and
// JOBGRAPH_FILES (size and CRC-32C of every file, computed as it was
// written); with DbOptions::durable_close every other file is fsynced
// before JOBGRAPH_FILES is written atomically (fsync, rename, fsync of the
// directory). The entry in the parent directory is the Save op's to make
// durable, when it renames the database into place (LevelDbType::Install).
// The directory's LOCK file is locked (as LevelDB locks it) from open to
// close, which keeps other processes' LevelDB out.
//
// Thread-safety: several Writers may Put from different threads (a mutex
// orders their entries); otherwise as db.h says.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DIRECT_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DIRECT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_options.h"

namespace jobgraph {

// Opens a new database in the existing, empty directory `path` (the caller
// created it). `tuning` supplies block_size, max_file_size and
// write_buffer_size. `on_release` runs once when the DB is closed or
// destroyed.
absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbDirect(
    const std::string& path, const DbOptions& options,
    const LevelDbOptions& tuning, std::function<void()> on_release);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DIRECT_H_

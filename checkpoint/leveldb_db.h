// The LevelDB backend of the DB interface, registered as "leveldb" and, for
// Caffe2 compatibility, "LevelDB". A database is a directory.
//
// Tuned for checkpoints: one fresh database per checkpoint, written once in
// bulk with keys in sorted order, then read in one pass. The options (see
// LevelDbTuning in db.h) follow the measurements in perf_limits.md: no
// compression, 256 MiB memtable, 64 MiB table files, writes without sync in
// batches of up to DbOptions::writer_batch_bytes.
//
// Durability. LevelDB syncs table files and the MANIFEST when it writes them,
// but closes each rotated log without fsync, and closing a database neither
// syncs nor flushes the memtable (google/leveldb#193). So Close() of a kNew
// database (1) flushes the memtable into a table file
// (LevelDbTuning::flush_memtable_on_close), (2) checks that no background
// write failed, (3) closes LevelDB, and (4) fsyncs every file in the
// directory, the directory, and its parent. After that the database at the
// path is durable even without step (1); step (1) spares every later open a
// log replay.
//
// Other behaviour worth knowing:
// - kNew creates the directory itself (mkdir, never its parents) and fails
//   with AlreadyExists if anything exists at the path.
// - kRead of a missing path, or of a directory without LevelDB's CURRENT file,
//   is NotFound naming the path; nothing is created there.
// - Opening a database, even for reading, makes LevelDB write a new MANIFEST
//   and log file in its directory and delete the old ones.
// - A path may be open through one DB at a time per process
//   (FailedPrecondition otherwise); LevelDB's lock file also keeps other
//   processes out.
// - leveldb::Status never leaves this backend: errors are absl::Status
//   (NotFound, DataLoss for corruption, InvalidArgument, Internal for I/O
//   errors) with messages naming the path.
// - LevelDB's own info log goes to VLOG(1), not to a LOG file in the database.
//
// Thread-safety: as db.h says.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_DB_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_DB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/db.h"

namespace jobgraph {

inline constexpr char kLevelDbType[] = "leveldb";
// Caffe2's spelling of the same type.
inline constexpr char kLevelDbTypeAlias[] = "LevelDB";

// The factory registered for both names; prefer DbRegistry::Open.
absl::StatusOr<std::unique_ptr<DB>> OpenLevelDb(const std::string& path,
                                                DbMode mode,
                                                const DbOptions& options);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_DB_H_

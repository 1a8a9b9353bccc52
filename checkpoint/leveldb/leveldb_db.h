// The LevelDB adapter: the DB interface over LevelDB, and LevelDbType, the
// DbType registered as "leveldb" and, for Caffe2 compatibility, "LevelDB". A
// database is a directory.
//
// Tuned for checkpoints: one fresh database per checkpoint, written once in
// bulk with keys in sorted order, then read in one pass. A database opened
// with DbOptions::write_only (Save's) is written without LevelDB, straight
// into table files (leveldb_direct.h). Otherwise LevelDbOptions
// (leveldb_options.h, included here for callers) holds the defaults:
// no compression, 256 MiB memtable, 64 MiB table files, writes without sync in
// batches of up to DbOptions::writer_batch_bytes.
//
// Durability. LevelDB syncs table files and its MANIFEST-* file when it writes
// them, but closes each rotated log without fsync, and closing a database
// neither syncs nor flushes the memtable (google/leveldb#193). So Close() of a
// kNew database (1) flushes the memtable into a table file
// (LevelDbOptions::flush_memtable_on_close), (2) checks that no background
// write failed, (3) closes LevelDB, and (4) fsyncs every file in the
// directory, the directory, and its parent. After that the database at the
// path is durable even without step (1); step (1) spares every later open a
// log replay.
//
// Installing (DbType::Install). The finished database is renamed onto its
// final name, which rename(2) does atomically when nothing or an empty
// directory is there. An existing database (a directory holding any of
// LevelDB's CURRENT, LOCK or MANIFEST-* files, so also a damaged one) is
// swapped with it by renameat2(RENAME_EXCHANGE), and the old copy, now under
// the temporary name, goes to the background deleter (background_delete.h).
// Either way the directory is fsynced. Anything else at the final name (a
// file, a directory of other files) is never replaced: FailedPrecondition.
//
// Copying (DbType::Copy; leveldb_copy.cc). A finished database is copied
// file by file, not entry by entry: the files its JOBGRAPH_FILES lists and
// the list itself, each byte read once and checksummed on its way through
// the copy buffer, so that the copy is what the writer wrote (DataLoss
// naming the source file otherwise). The bytes copied are those files'
// sizes. A database without the list cannot be checked and is not copied
// (FailedPrecondition). Files it does not list (a LevelDB LOG, another
// program's leftovers) stay behind: LevelDB needs none of them to open the
// copy, and jobgraph's writers list even the LOCK file.
//
// Moving to another machine (DbType::Pack and Unpack; leveldb_pack.cc). Pack
// reads the files JOBGRAPH_FILES lists, checked as Copy checks them, into
// one string: a header ("JGLDBPK\n" and a format version), the list's
// bytes, each file's name and contents (64-bit little-endian lengths before
// each), and a CRC-32C of everything before it at the end, so that damage in
// transit shows. Unpack checks every file against the list the string
// carries (a file missing, extra, carried twice, or not what the list
// records is DataLoss naming it) and the rest against that CRC, before it
// writes anything, then writes them into a fresh directory as Copy writes
// its copy: files, their fsyncs, then the list, atomically. The whole
// database is in memory, once on each side. HoldPacked checks a packed
// database as Unpack does and keeps it in memory instead (leveldb_held.h),
// where kRead opens of its path read it, as the read-only reader reads a
// directory, until ReleaseHeld: its files were all checked against the list
// when it was held, so VerifyFiles has nothing left to read.
//
// Other behaviour worth knowing:
// - kNew creates the directory itself (mkdir, never its parents) and fails
//   with AlreadyExists if anything exists at the path.
// - kRead of a missing path, or of a directory without LevelDB's CURRENT file,
//   is NotFound naming the path; nothing is created there.
// - kRead of a finished database (all data in tables) writes nothing: it is
//   read through LevelDB's Table API after checking its MANIFEST-* file
//   (leveldb_tables.h), so a committed checkpoint stays byte- and
//   mtime-identical and reads from read-only storage. A database whose log
//   still holds data (flush_memtable_on_close off, or written by another
//   program) needs LevelDB's recovery, which rewrites the descriptor and the
//   log: it is copied to a private directory under $TMPDIR (tables
//   hard-linked when possible), the copy is checked against the database's
//   JOBGRAPH_FILES and opened with DB::Open, and it is removed at Close().
//   The database itself is not written either way.
// - A path may be open through one DB at a time per process
//   (FailedPrecondition otherwise); for kNew, LevelDB's lock file also keeps
//   other processes out.
// - leveldb::Status never leaves this adapter: errors are absl::Status
//   (NotFound, DataLoss for corruption, InvalidArgument, Internal for I/O
//   errors) with messages naming the path.
// - LevelDB's own info log goes to VLOG(1), not to a LOG file in the database.
//
// Thread-safety: LevelDbType is immutable and thread-safe; DBs follow db.h.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DB_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_options.h"

namespace jobgraph {

inline constexpr char kLevelDbType[] = "leveldb";
// Caffe2's spelling of the same type.
inline constexpr char kLevelDbTypeAlias[] = "LevelDB";

// The "leveldb" DB type. The registered object uses the default
// LevelDbOptions; a caller that tunes LevelDB (benchmarks, tests) makes its
// own LevelDbType and uses it directly.
class LevelDbType final : public DbType {
 public:
  explicit LevelDbType(LevelDbOptions options = LevelDbOptions())
      : options_(options) {}

  const LevelDbOptions& options() const { return options_; }

  absl::StatusOr<bool> Exists(const std::string& path) const override;
  absl::Status CheckInstallable(const std::string& path) const override;
  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override;
  absl::Status Remove(const std::string& path) const override;
  absl::StatusOr<int64_t> Copy(const std::string& from, const std::string& to,
                               const CopyOptions& options) const override;
  absl::StatusOr<std::string> Pack(const std::string& from) const override;
  absl::StatusOr<int64_t> Unpack(absl::string_view packed,
                                 const std::string& to) const override;
  absl::StatusOr<int64_t> HoldPacked(std::string packed,
                                     const std::string& path) const override;
  void ReleaseHeld(const std::string& path) const override;
  std::optional<int64_t> OpenInAnotherProcess(
      const std::string& path) const override;

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override;

 private:
  const LevelDbOptions options_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_DB_H_

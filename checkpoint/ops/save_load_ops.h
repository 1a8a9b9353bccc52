// The checkpoint operators Save, Load, DBExists and GetAllBlobNames (Caffe2's
// ops of the same names, with the differences noted below), CommitStagedBlobs
// and DropStagedBlobs, and
// WriteCheckpointDb, the commit protocol of one database that Save runs,
// CopyCheckpointDb, which puts a checked copy of a database in place by the
// same protocol, and PackCheckpointDb / InstallPackedCheckpointDb, which do
// the same for a copy made on another machine from bytes.
//
// Paths. Caffe2 resolves a relative `db` against the workspace's root folder
// unless `absolute_path` is set. A jobgraph workspace has no root folder, so
// `absolute_path` is accepted for compatibility and changes nothing: a
// relative path is relative to the process's working directory.
//
// Save (inputs: the blobs, at least one; optional output: an int64 scalar
// set to the bytes written, the blob index's total_bytes)
//   db (string, required)        path of the database to write
//   db_type (string, required)   a registered DB type, e.g. "leveldb"
//   absolute_path (int, 0)       see above
//   strip_prefix (string, "")    each input name containing it is stored
//                                without everything up to and including its
//                                first occurrence
//   blob_name_overrides (strings) stored names, one per input; not with
//                                strip_prefix
//   chunk_bytes (int, 64 MiB)    most element bytes in one tensor chunk
//                                (SerializationOptions); Caffe2's chunk_size
//                                (elements) is rejected rather than ignored
//   node (string, ""), epoch (int, 0)   recorded in the database's blob index
//   Stored names must be unique and must not be "__jobgraph_manifest__".
//   The database is written by WriteCheckpointDb (below): a failed or
//   interrupted Save never leaves a partial database under `db`, and saving
//   to an existing database replaces it atomically.
//
// Load (no inputs; outputs: the blobs to load)
//   db (string) / dbs (strings)  databases to read, in order (db first);
//                                at least one, non-empty and unique
//   db_type (string, required), absolute_path (int, 0)
//   load_all (int, 0)            load every blob of the databases into
//                                blobs named after them; outputs ignored
//   allow_incomplete (int, 0)    succeed even if some outputs were not found
//                                (they are left untouched)
//   strip_prefix, add_prefix (string, "")   applied to stored names, strip
//                                first, to get the name to load as
//   source_blob_names (strings)  the name to load each output from; not with
//                                strip_prefix or load_all
//   verify_checksums (int, 1)    check every value's CRC-32C against the
//                                blob index (sizes are always checked)
//   threads (int, 0)             threads that read one database, each a
//                                part of its blobs of about equal bytes (at
//                                most 64); 0: one per core (up to 4) once
//                                there are at least 16 MiB or 4096 blobs per
//                                thread, else one
//   expected_node (string, ""), expected_epoch (int, -1)
//                                when set, each database's blob index must
//                                name this node / epoch, and its recorded
//                                files must be there with their sizes, else
//                                DataLoss: together with the value checks,
//                                what VerifyCheckpointDb (verify.h) checks
//                                for a resume, so a restore reads once
//   Each database must hold its blob index (blob_index.h), else
//   DataLoss: a database that Save did not finish is never trusted. Only the
//   values of wanted blobs are read, each once, checksummed, and copied once
//   into its blob. A blob found in two databases is InvalidArgument. Missing
//   outputs without allow_incomplete: NotFound listing them. On an error,
//   outputs may hold partial data (Caffe2 behaves the same).
//
// DBExists (no inputs; output: a bool scalar)
//   db_name (or db) (string, required), db_type (string, required),
//   absolute_path (int, 0)
//   True iff the database opens for reading and holds its blob index,
//   so a partial or foreign database does not "exist"; nor does one whose
//   blob index cannot be read (damage, I/O errors; logged). Values are not
//   checked (see VerifyDb in blob_index.h). Errors only when no answer is
//   possible (e.g. the database is open in this process). An unregistered
//   db_type is NotFound listing the known types (Caffe2 said true).
//
// GetAllBlobNames (no inputs; output: a 1-D string tensor)
//   include_shared (int, 1)      1: this workspace's and its ancestors' blob
//                                names (Workspace::BlobNames); 0: only its
//                                own (LocalBlobNames)
//   Sorted. The output blob exists when the op runs, so its own name is in
//   the list (and hence in every checkpoint whose blob list it makes).
//
// CommitStagedBlobs, DropStagedBlobs (no inputs, no outputs; jobgraph's)
//   prefix (string, required)
//   stage (string)               CommitStagedBlobs: FailedPrecondition
//                                unless the marker (the blob named `prefix`
//                                itself, a string tensor) holds this value
//   check_only (int, 0)          CommitStagedBlobs: only that check
//   The workspace's own blobs whose names start with `prefix` are staged
//   (Load with add_prefix put them there). CommitStagedBlobs moves each into
//   the blob named without the prefix, replacing its value, and removes the
//   staged ones and the marker; DropStagedBlobs removes them all. A restore
//   loads every node's database into staged blobs and commits them only when
//   every load succeeded, so damage found while loading leaves every workspace
//   as it was.
//
// Every error names the op, and the database path, blob or key at fault.
//
// Thread-safety: the operators follow operator.h. WriteCheckpointDb,
// CopyCheckpointDb, PackCheckpointDb and InstallPackedCheckpointDb may run
// concurrently for different paths; the blobs WriteCheckpointDb reads must
// not change while it runs, nor the database CopyCheckpointDb copies or
// PackCheckpointDb packs.

#ifndef JOBGRAPH_CHECKPOINT_OPS_SAVE_LOAD_OPS_H_
#define JOBGRAPH_CHECKPOINT_OPS_SAVE_LOAD_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "engine/blob.h"
#include "engine/serialization.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// One blob to write and the name to store it under.
struct BlobToSave {
  absl::string_view name;      // not owned; outlives the save
  const Blob* blob = nullptr;  // not owned
};

struct CheckpointDbOptions {
  // Recorded in the database's blob index.
  std::string node;
  int64_t epoch = 0;
  SerializationOptions serialization;
  DbOptions db;
  // Blobs the database lists without holding their values (an incremental
  // save): each one's entry in the database of this node that holds it,
  // stored_in_epoch set to that database's epoch (earlier than `epoch`).
  // Listed in the blob index in name order among the written blobs; their
  // bytes count in the total. Default: none.
  std::vector<CheckpointBlobInfo> referenced;
};

// Writes `blobs` into a new database of `type` at `path` and puts it in
// place durably. Blobs are written in order of their names (LevelDB writes
// sorted keys fastest), each value streamed from the serializer straight
// into the database, then the blob index, last. The steps, all through `type`
// (DbType in db.h), so that they hold for every DB type:
//  1. CheckInstallable(path): whatever is at `path` must be a database of
//     `type` or something it may overwrite, so a wrong `path` can never make
//     Save delete unrelated files (LevelDB: a database or an empty
//     directory, and the parent directory must exist); FailedPrecondition
//     naming the path otherwise.
//  2. The database is written to "<dir>/.<name>.tmp-<pid>-<n>" (a leftover
//     of that exact name is removed first) and closed, which makes it
//     durable. Failpoint "save.after_db_write".
//  3. Install(temporary, path): the new database replaces the old one
//     atomically and durably; the old one is deleted (LevelDB: by the
//     background deleter). Failpoint "save.after_rename".
//  On any error the temporary database is removed (best effort) and `path`
//  is unchanged, unless the error came after step 3.
//
// Errors name the path and, for serialization errors, the blob.
// Returns the bytes of the values listed (the blob index's total_bytes,
// referenced blobs' included); `blob_index`, when given, receives the
// serialized blob index written.
absl::StatusOr<int64_t> WriteCheckpointDb(const DbType& type,
                                          const std::string& path,
                                          std::vector<BlobToSave> blobs,
                                          const CheckpointDbOptions& options,
                                          std::string* blob_index = nullptr);

// The same with the type registered as `db_type` (NotFound listing the known
// types if there is none).
absl::StatusOr<int64_t> WriteCheckpointDb(absl::string_view db_type,
                                          const std::string& path,
                                          std::vector<BlobToSave> blobs,
                                          const CheckpointDbOptions& options,
                                          std::string* blob_index = nullptr);

// Copies the finished checkpoint database of `type` at `from` to `to` and
// puts the copy in place durably, by the steps of WriteCheckpointDb (the
// flush of a node-local checkpoint directory to a shared one uses it):
//  1. CheckInstallable(to): nothing is copied when `to` cannot take the
//     database (FailedPrecondition naming it);
//  2. type.Copy(from, temporary), under WriteCheckpointDb's temporary name
//     ("<dir of to>/.<name>.tmp-<pid>-<n>"), which checks what it copies
//     against what the database's writer recorded and makes the copy
//     durable. Failpoint "flush.after_copy".
//  3. Install(temporary, to): the copy replaces any database at `to`
//     atomically and durably.
//  On any error the temporary copy is removed (best effort) and `to` holds
//  what it held before (or the copy, when only making Install's change
//  durable failed). `from` is only read.
// Errors name the paths: those of DbType::Copy (DataLoss naming the damaged
// file or key; NotFound naming `from` when no database is there; LevelDB:
// FailedPrecondition for a database without its JOBGRAPH_FILES, whose files
// cannot be checked) and of the steps above. Returns the bytes copied
// (DbType::Copy: for LevelDB, the sizes of the database's files). `options`
// go to DbType::Copy.
absl::StatusOr<int64_t> CopyCheckpointDb(
    const DbType& type, const std::string& from, const std::string& to,
    const CopyOptions& options = CopyOptions());

// The same with the type registered as `db_type` (NotFound listing the known
// types if there is none).
absl::StatusOr<int64_t> CopyCheckpointDb(
    absl::string_view db_type, const std::string& from, const std::string& to,
    const CopyOptions& options = CopyOptions());

// A finished checkpoint database of `type` at `path` as bytes, for
// InstallPackedCheckpointDb on another machine (DbType::Pack): checked
// against what the database's writer recorded as it is read. `path` is only
// read. Errors name the path: those of DbType::Pack (DataLoss naming the
// damaged file; NotFound when no database is there; Unimplemented for a type
// whose databases are not files, such as "memory"; LevelDB:
// FailedPrecondition for a database without its JOBGRAPH_FILES).
absl::StatusOr<std::string> PackCheckpointDb(const DbType& type,
                                             const std::string& path);

// The same with the type registered as `db_type` (NotFound listing the known
// types if there is none).
absl::StatusOr<std::string> PackCheckpointDb(absl::string_view db_type,
                                             const std::string& path);

// Installs `packed`, what PackCheckpointDb returned on another machine, as
// the checkpoint database of `type` at `path`, by the steps of
// CopyCheckpointDb, with type.Unpack(packed, temporary) for the copy (which
// checks `packed` against the list of files it carries, DataLoss when it is
// damaged, and makes the database durable) and failpoint
// "transfer.before_install" between it and Install. As with
// CopyCheckpointDb, a database already at `path` is replaced atomically and
// durably (the old one is deleted, for LevelDB by the background deleter);
// anything at `path` that the type may not replace is FailedPrecondition
// naming it, before anything is written. On any error the temporary database
// is removed (best effort) and `path` holds what it held before (or the new
// database, when only making Install's change durable failed). Errors name
// the path. Returns the bytes written (DbType::Unpack: for LevelDB, the sizes
// of the database's files, as CopyCheckpointDb counts them).
absl::StatusOr<int64_t> InstallPackedCheckpointDb(const DbType& type,
                                                  absl::string_view packed,
                                                  const std::string& path);

// The same with the type registered as `db_type` (NotFound listing the known
// types if there is none).
absl::StatusOr<int64_t> InstallPackedCheckpointDb(absl::string_view db_type,
                                                  absl::string_view packed,
                                                  const std::string& path);

// Holds `packed`, what PackCheckpointDb returned on another machine, in
// memory as the checkpoint database at `path` for reading (a Load of
// `path` reads it) until ReleaseHeldCheckpointDb: nothing is written, for a
// copy loaded once (DbType::HoldPacked, which checks `packed` as Unpack
// does: DataLoss when damaged; AlreadyExists when `path` is held already;
// Unimplemented for a type whose databases are not files). Errors name the
// path. Returns the bytes of the database's files.
absl::StatusOr<int64_t> HoldPackedCheckpointDb(absl::string_view db_type,
                                               std::string packed,
                                               const std::string& path);
// Drops what HoldPackedCheckpointDb holds at `path`, if anything.
void ReleaseHeldCheckpointDb(absl::string_view db_type,
                             const std::string& path);

// Whether `basename` (a name inside a checkpoint directory) has the form of
// the temporary databases of WriteCheckpointDb and CopyCheckpointDb: a
// database being written or copied, the leftover of a crash, or an old copy
// awaiting deletion. Tools that clean up after crashes delete such names
// only when no Save (or copy) can be running.
bool IsSaveTempName(absl::string_view basename);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_OPS_SAVE_LOAD_OPS_H_

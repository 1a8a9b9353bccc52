// The blob index inside each checkpoint database: what the Save op wrote, and
// the checks that Load and verification run against it.
//
// Save streams every blob's values into the database, then writes one
// serialized BlobIndex (proto/jobgraph.proto) under
// kBlobIndexKey, last. It lists, per blob, the keys that hold it with each
// value's size and CRC-32C. A database without the blob index was not finished
// by Save (or was written by something else) and is never trusted. The
// index is authoritative: readers use exactly the keys it lists, and
// ignore any other key (a database written by Save has none).
//
// Thread-safety: BlobIndexBuilder is not thread-safe; the functions are
// thread-compatible (the DB they read follows db.h).

#ifndef JOBGRAPH_CHECKPOINT_OPS_BLOB_INDEX_H_
#define JOBGRAPH_CHECKPOINT_OPS_BLOB_INDEX_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/db/db.h"
#include "checkpoint/ops/compact_blob_index.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The key of the blob index. No blob may have this name, so it never collides
// with a blob's key. (The name predates "blob index"; it stays so that the
// databases already written keep loading.)
inline constexpr char kBlobIndexKey[] = "__jobgraph_manifest__";

// BlobIndex.format_version of an index whose database holds every blob it
// lists, and of one that lists blobs held by other databases (an
// incremental save; readers of version 1 must refuse those). This code
// reads both.
inline constexpr int32_t kBlobIndexFormatVersion = 1;
inline constexpr int32_t kReferencingBlobIndexFormatVersion = 2;

// Builds the blob index while values stream into the database, so no value has
// to be kept or read again. Each blob's entry is encoded as soon as the next
// one starts: the index of 100,000 blobs is held once, as the bytes that are
// written, not also as 100,000 messages.
class BlobIndexBuilder {
 public:
  // Records `node`, `epoch`, the format version and the current time
  // ($SOURCE_DATE_EPOCH instead when set: reproducible files).
  BlobIndexBuilder(absl::string_view node, int64_t epoch);
  BlobIndexBuilder(const BlobIndexBuilder&) = delete;
  BlobIndexBuilder& operator=(const BlobIndexBuilder&) = delete;

  // Starts the entry of the next blob; `info` carries its name, type and,
  // for tensors, dims and data_type. Values added next belong to it.
  void StartBlob(const CheckpointBlobInfo& info) { *StartBlob() = info; }
  // Starts an empty entry for the caller to fill in place (no copy); valid
  // until the next StartBlob or Finish.
  CheckpointBlobInfo* StartBlob();
  // Records one value of the current blob: its key, size and CRC-32C.
  // Returns the CRC-32C (for Writer::PutWithCrc).
  uint32_t AddValue(absl::string_view key, absl::string_view value);
  // AddValue for a value the caller has checksummed: `value_bytes` long,
  // CRC-32C `value_crc32c`.
  void AddValueWithCrc(absl::string_view key, size_t value_bytes,
                       uint32_t value_crc32c);
  // Lists a blob whose values another database holds: `info` is its entry
  // there (keys, sizes, CRC-32Cs), with stored_in_epoch set. Its bytes count
  // in total_bytes and referenced_bytes. Blobs are listed in the order they
  // are started or referenced.
  void AddReferenced(const CheckpointBlobInfo& info);
  // Records that the database lists its own files (DB::ListsFiles()).
  void SetFilesListed(bool listed) { files_listed_ = listed; }
  // Says that about `count` blobs will be added. Once the first entry is
  // encoded, room for all of them (at twice its size, up to 256 MiB) is
  // reserved, so the bytes are not copied as they grow; reserved room never
  // written costs address space, not memory.
  void ExpectBlobs(size_t count) { expected_blobs_ = count; }

  // Sum of the sizes of the values added so far.
  int64_t total_bytes() const { return total_bytes_; }

  // The serialized BlobIndex: the same bytes as BlobIndex::SerializeToString
  // of the index built. InternalError if an entry could not be serialized
  // (one over 2 GiB: a blob of some hundred million chunks). Call once; the
  // builder is spent after.
  absl::StatusOr<std::string> Finish();

 private:
  // Appends the current entry to encoded_ as field `blob`.
  void EncodeCurrent();

  std::string encoded_;  // fields before `blob`, then the finished entries
  CheckpointBlobInfo current_;  // re-used: Clear() keeps its capacity
  bool has_current_ = false;
  bool finished_ = false;
  size_t expected_blobs_ = 0;
  bool reserved_ = false;  // room for expected_blobs_ reserved
  bool files_listed_ = false;
  bool too_large_ = false;  // an entry did not serialize
  int64_t total_bytes_ = 0;
  int64_t referenced_bytes_ = 0;
  std::vector<int64_t> referenced_epochs_;  // sorted, unique
  const int64_t created_unix_micros_;
};

// Checks the blob index's structure: a known format version (else
// FailedPrecondition), and for every blob a non-empty unique name, at least
// one key, as many sizes and checksums as keys, keys that are unique and
// belong to the blob (ParseBlobKey), and a total_bytes that adds up (else
// DataLoss); blobs held by reference only in a version-2 index, each in an
// earlier epoch, with referenced_bytes and referenced_epoch that add up.
// Messages name `path`.
absl::Status ValidateBlobIndex(const CompactBlobIndex& index,
                               absl::string_view path);
// The same checks of a message (DataLoss also when it does not serialize to
// an index that parses, as a name that is not UTF-8).
absl::Status ValidateBlobIndex(const BlobIndex& index, absl::string_view path);

// Reads, decodes and validates the blob index of `db`. DataLoss naming the
// database path when it is missing ("<path> has no blob index: ...") or does
// not parse; other read errors as the DB returns them.
absl::StatusOr<CompactBlobIndex> ReadCompactBlobIndex(DB* db);
// ReadCompactBlobIndex as a message (for showing its entries).
absl::StatusOr<BlobIndex> ReadBlobIndex(DB* db);

// Opens the database of `db_type` at `path` for reading and reads its
// index (ReadCompactBlobIndex, ReadBlobIndex). Errors of opening name the
// path.
absl::StatusOr<CompactBlobIndex> ReadCompactBlobIndexAt(
    absl::string_view db_type, const std::string& path);
absl::StatusOr<BlobIndex> ReadBlobIndexAt(absl::string_view db_type,
                                          const std::string& path);

// Receives one checked value: the index of its blob in the blob index, the
// key's index within that blob, and the value (valid only during the call).
using DbValueVisitor = std::function<absl::Status(int blob_index, int key_index,
                                                  absl::string_view value)>;

// Reads the values of the blobs `blob_indices` (indices of the blob index's
// blobs) from `db` in key order, checks each against the blob index
// (size always, CRC-32C when `verify_crc`) and passes it to `visit`. Reads
// nothing else: it seeks over keys it does not need and stops after the
// last one it needs. DataLoss naming the database path and the key for a
// listed key that is missing, a wrong size or a failed checksum; errors of
// the DB and of `visit` are returned as they are.
absl::Status ScanDbValues(DB* db, const CompactBlobIndex& index,
                          absl::Span<const int> blob_indices, bool verify_crc,
                          const DbValueVisitor& visit);

// How much of a database VerifyDb reads.
enum class VerifyDepth {
  // Every value the blob index lists (size and CRC-32C): everything a load
  // uses, so enough to choose an epoch to resume from; and the database's
  // record of its files is there and every file it lists has its recorded
  // size (no second read of the bytes).
  kValues,
  // Also every byte of the database's files against the checksums recorded
  // when they were written (DB::VerifyFiles), so damage anywhere shows.
  kValuesAndFiles,
};

// The blob index of the database at `path` names `node` and `epoch` (each
// when given); DataLoss naming the path otherwise.
absl::Status CheckIndexOwner(const std::string& path,
                             const CompactBlobIndex& index,
                             const std::optional<std::string>& node,
                             const std::optional<int64_t>& epoch);

// Reads the blob index of `db` and checks every value the database holds
// (sizes and CRC-32C) without deserializing anything, then, for
// kValuesAndFiles, the files. Blobs held by reference in other databases
// are not read (VerifyReferencedValues). Returns the blob index.
absl::StatusOr<CompactBlobIndex> VerifyDb(DB* db, VerifyDepth depth);
// The files part of VerifyDb: the database's record of its files is there
// (when the index says one was written) and each file has its recorded size
// and, for kValuesAndFiles, its recorded checksum (DB::VerifyFiles).
absl::Status VerifyRecordedFiles(DB* db, const CompactBlobIndex& index,
                                 VerifyDepth depth);
// VerifyDb of the database of `db_type` at `path`, opened for reading.
absl::StatusOr<CompactBlobIndex> VerifyDbAt(absl::string_view db_type,
                                            const std::string& path,
                                            VerifyDepth depth);

// The blobs `blobs` (indices into `index`, the blob index of the database at
// `path`) that the database holds itself, and those it holds by reference,
// by the epoch of the database that holds them (increasing).
struct HeldAndReferenced {
  std::vector<int> held;
  std::vector<std::pair<int64_t, std::vector<int>>> referenced;
};
HeldAndReferenced SplitByHolder(const CompactBlobIndex& index,
                                absl::Span<const int> blobs);

// Where the database of `node` for `epoch` lies beside the database at
// `path`: the databases one incremental save references.
std::string ReferencedDbPath(absl::string_view path, absl::string_view node,
                             int64_t epoch);

// Opens the database of the node of `index` (the blob index of the database
// at `path`) for `epoch`, which holds some of its blobs, and checks that it
// is: its own blob index names that node and epoch, and its record of its
// files is there (`depth` as in VerifyRecordedFiles). A database that is
// missing or belongs elsewhere is DataLoss naming both paths.
absl::StatusOr<std::unique_ptr<DB>> OpenReferencedDb(
    absl::string_view db_type, const std::string& path,
    const CompactBlobIndex& index, int64_t epoch, VerifyDepth depth);

// Reads and checks (sizes, CRC-32C) every value of the blobs that `index`
// (of the database at `path`) lists by reference, in the databases that
// hold them: what a load of the database reads from elsewhere.
absl::Status VerifyReferencedValues(absl::string_view db_type,
                                    const std::string& path,
                                    const CompactBlobIndex& index,
                                    VerifyDepth depth);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_OPS_BLOB_INDEX_H_

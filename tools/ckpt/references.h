// References between the databases of a checkpoint directory, as the `ckpt`
// commands follow them. An incremental save (checkpoint/FORMAT.md 4.7)
// lists some blobs by reference: the database of the same node for an
// earlier epoch (the "holder") has their values, under the keys, sizes and
// CRC-32Cs the referencing blob index lists.
//
// Errors of a holder name the referencing database, the holder, its epoch
// and the blob, so that a report about one epoch says where the damage is.
//
// Thread-compatible: DbVerifier is used by one thread; the functions hold
// no state.

#ifndef JOBGRAPH_TOOLS_CKPT_REFERENCES_H_
#define JOBGRAPH_TOOLS_CKPT_REFERENCES_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/db/db.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/compact_blob_index.h"

namespace jobgraph {
namespace ckpt {

// "epoch 3" or "epochs 0, 2".
std::string EpochsText(absl::Span<const int64_t> epochs);

// "108 held by reference in epoch 0": the part of a total that references
// hold.
std::string ReferencedText(int64_t bytes, absl::Span<const int64_t> epochs);

// "blob 'a'", "blobs 'a', 'b'" or "blobs 'a', 'b', 'c' and 4 more": the
// blobs named `names`, printable, for a message.
std::string BlobNames(absl::Span<const std::string> names);
// The same of the blobs `blobs` (indices) of `index`.
std::string BlobNames(const CompactBlobIndex& index,
                      absl::Span<const int> blobs);

// Reads the values of the blobs `blobs` of `index` (the blob index of the
// database at `path`) that the database of the same node for `epoch` holds
// for it: opens that database (OpenReferencedDb with `depth`), checks each
// value (size, CRC-32C) against `index` and passes it to `visit`, in key
// order. DataLoss when the holder is missing, belongs elsewhere or is
// damaged; every error names `path`, the holder, `epoch` and the blobs.
absl::Status ScanReferenced(const std::string& db_type, const std::string& path,
                            const CompactBlobIndex& index, int64_t epoch,
                            absl::Span<const int> blobs, VerifyDepth depth,
                            const DbValueVisitor& visit);

// ScanDbValues (checked) of the blobs `blobs` of `index`, the blob index of
// `db` at `path`, following references: the values `db` holds come from
// it, then those held elsewhere from their holders (ScanReferenced), holder
// by holder in increasing epoch. For a database without references this is
// exactly ScanDbValues.
absl::Status ScanThroughReferences(const std::string& db_type, DB* db,
                                   const std::string& path,
                                   const CompactBlobIndex& index,
                                   absl::Span<const int> blobs,
                                   const DbValueVisitor& visit);

// VerifyCheckpointDb (kValuesAndFiles) for the databases of one directory,
// checked one after the other: errors in a holder are ScanReferenced's,
// naming the referencing database, and a database whose files have been
// read whole once (checked itself, or as the holder of an earlier one) has
// only its record of files checked when a later database references it, so
// a holder that ten epochs reference is not read ten times.
class DbVerifier {
 public:
  explicit DbVerifier(std::string db_type) : db_type_(std::move(db_type)) {}

  // The blob index of the database at `path` once it and everything it
  // references verify; DataLoss for damage, including a holder that is
  // missing. The database must be `node`'s of `epoch`.
  absl::StatusOr<CompactBlobIndex> Verify(const std::string& path,
                                          const std::string& node,
                                          int64_t epoch);

 private:
  std::string db_type_;
  absl::flat_hash_set<std::string> files_verified_;
};

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_REFERENCES_H_

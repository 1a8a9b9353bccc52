// SaveBase: what the last committed save of a run left of each node this
// process hosts, for the next save to refer to (incremental saves,
// CheckpointOptions::incremental): the blob index of the node's database of
// that epoch, and the generation (Tensor::generation) each tensor had when
// it was snapshotted. A tensor whose generation is still the same has not
// been written since, so the next save lists it by reference to the
// database that holds it instead of writing it again; any other blob is
// written. References always name the database that holds the values, so
// restoring an epoch reads at most the databases its chain spans.
//
// A value type, rebuilt after every committed save; not thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_BASE_H_
#define JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_BASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/ops/compact_blob_index.h"
#include "engine/session.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The generation of each blob of a node's snapshot, by name; 0 for a blob
// that is not a tensor (always written).
using BlobGenerations = absl::flat_hash_map<std::string, uint64_t>;

// The generations of `blobs`.
BlobGenerations GenerationsOf(const std::vector<BlobSnapshot>& blobs);

class SaveBase {
 public:
  // One node's snapshot split for a save that refers to this base.
  struct Split {
    std::vector<BlobSnapshot> write;
    // Entries of the unchanged blobs in the databases that hold them,
    // stored_in_epoch set.
    std::vector<CheckpointBlobInfo> referenced;
  };

  // No base: every save is full.
  SaveBase() = default;

  // The base a committed save of `epoch` leaves: `indexes[i]` is node i's
  // blob index as written (empty for a node this process does not host),
  // `generations[i]` its blobs' generations at the snapshot; `chain_start`
  // the epoch of the last full save the chain starts with (`epoch` for a
  // full save). DataLoss if an index does not decode.
  static absl::StatusOr<SaveBase> After(
      int64_t epoch, int64_t chain_start, std::vector<std::string> indexes,
      std::vector<BlobGenerations> generations);

  // The base a restore of committed `epoch` leaves: `indexes[i]` is node
  // i's blob index as read from its database (null for a node this process
  // does not host), `generations[i]` its blobs' generations once the
  // restored blobs were in place; `chain_start` the oldest epoch the
  // epoch's databases refer to (`epoch` if none).
  static SaveBase Restored(
      int64_t epoch, int64_t chain_start,
      std::vector<std::unique_ptr<CompactBlobIndex>> indexes,
      std::vector<BlobGenerations> generations);

  bool empty() const { return epoch_ < 0; }
  int64_t epoch() const { return epoch_; }
  int64_t chain_start() const { return chain_start_; }

  // Whether a save of `epoch` may refer to this base: there is one, the save
  // is of a later epoch, and the last full save is fewer than `full_every`
  // epochs back (so a chain never spans `full_every` epochs or more).
  bool UsableFor(int64_t epoch, int full_every) const;

  // Splits node `node`'s snapshot: a tensor whose generation is the one it
  // had in this base is listed by reference; everything else is written.
  Split SplitNode(size_t node, std::vector<BlobSnapshot> blobs) const;

 private:
  // Sets node i from its index (null: not hosted here) and generations.
  void SetNode(size_t i, std::unique_ptr<CompactBlobIndex> index,
               BlobGenerations generations);

  struct Node {
    std::unique_ptr<CompactBlobIndex> index;
    // Name -> position in `index` (views of its bytes).
    absl::flat_hash_map<absl::string_view, int> positions;
    BlobGenerations generations;
  };

  int64_t epoch_ = -1;
  int64_t chain_start_ = -1;
  std::vector<Node> nodes_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_PIPELINE_SAVE_BASE_H_

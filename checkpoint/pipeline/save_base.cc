#include "checkpoint/pipeline/save_base.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tensor.h"

namespace jobgraph {

BlobGenerations GenerationsOf(const std::vector<BlobSnapshot>& blobs) {
  BlobGenerations generations;
  generations.reserve(blobs.size());
  for (const BlobSnapshot& b : blobs) {
    generations[b.name] =
        b.blob->IsType<Tensor>() ? b.blob->Get<Tensor>().generation() : 0;
  }
  return generations;
}

absl::StatusOr<SaveBase> SaveBase::After(
    int64_t epoch, int64_t chain_start, std::vector<std::string> indexes,
    std::vector<BlobGenerations> generations) {
  SaveBase base;
  base.epoch_ = epoch;
  base.chain_start_ = chain_start;
  base.nodes_.resize(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) {
    if (indexes[i].empty()) continue;  // not hosted here
    std::optional<CompactBlobIndex> index =
        CompactBlobIndex::Decode(std::move(indexes[i]));
    if (!index.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "the blob index just written for epoch ", epoch, " does not decode"));
    }
    base.SetNode(i, std::make_unique<CompactBlobIndex>(*std::move(index)),
                 std::move(generations[i]));
  }
  return base;
}

SaveBase SaveBase::Restored(
    int64_t epoch, int64_t chain_start,
    std::vector<std::unique_ptr<CompactBlobIndex>> indexes,
    std::vector<BlobGenerations> generations) {
  SaveBase base;
  base.epoch_ = epoch;
  base.chain_start_ = chain_start;
  base.nodes_.resize(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) {
    if (indexes[i] == nullptr) continue;
    base.SetNode(i, std::move(indexes[i]), std::move(generations[i]));
  }
  return base;
}

void SaveBase::SetNode(size_t i, std::unique_ptr<CompactBlobIndex> index,
                       BlobGenerations generations) {
  Node& node = nodes_[i];
  node.index = std::move(index);
  for (int b = 0; b < node.index->blob_size(); ++b) {
    node.positions[node.index->name(b)] = b;
  }
  node.generations = std::move(generations);
}

bool SaveBase::UsableFor(int64_t epoch, int full_every) const {
  return !empty() && epoch > epoch_ && epoch - chain_start_ < full_every;
}

SaveBase::Split SaveBase::SplitNode(size_t node,
                                    std::vector<BlobSnapshot> blobs) const {
  Split split;
  const Node* state = node < nodes_.size() ? &nodes_[node] : nullptr;
  for (BlobSnapshot& b : blobs) {
    int position = -1;
    if (state != nullptr && state->index != nullptr &&
        b.blob->IsType<Tensor>()) {
      auto generation = state->generations.find(b.name);
      auto at = state->positions.find(b.name);
      if (generation != state->generations.end() && generation->second != 0 &&
          generation->second == b.blob->Get<Tensor>().generation() &&
          at != state->positions.end()) {
        position = at->second;
      }
    }
    if (position < 0) {
      split.write.push_back(std::move(b));
      continue;
    }
    // Unchanged: the entry of the database that holds its values.
    CheckpointBlobInfo info = state->index->Entry(position);
    if (!state->index->referenced(position)) info.set_stored_in_epoch(epoch_);
    split.referenced.push_back(std::move(info));
  }
  return split;
}

}  // namespace jobgraph

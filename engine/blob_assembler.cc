// BlobAssembler and DeserializeBlob (declared in serialization.h).

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/tensor_reader.h"
#include "engine/wire_format.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

using serialization_internal::CheckShapeFitsBytes;
using serialization_internal::CheckTensorHeader;
using serialization_internal::FillTensorSlice;
using serialization_internal::ScanBlobProto;
using serialization_internal::ScannedBlobProto;

BlobAssembler::BlobAssembler()
    : scratch_(std::make_unique<ScannedBlobProto>()) {}

BlobAssembler::~BlobAssembler() = default;

absl::Status BlobAssembler::Add(absl::string_view name, absl::string_view value,
                                Blob* target, int64_t blob_bytes) {
  CHECK(target != nullptr);
  ScannedBlobProto& scanned = *scratch_;
  JG_RETURN_IF_ERROR(Scan(name, value));
  const bool is_tensor = scanned.header.type() == kTensorTypeName;

  auto [it, first] = blobs_.try_emplace(std::string(name));
  if (first) {
    it->second.target = target;
    it->second.is_tensor = is_tensor;
    target->Reset();
  } else {
    CHECK_EQ(it->second.target, target)
        << "pieces of blob '" << name << "' sent to two different targets";
  }
  return AddPiece(name, first, blob_bytes, &it->second);
}

absl::Status BlobAssembler::AddWhole(absl::string_view name,
                                     absl::string_view value, Blob* target,
                                     int64_t blob_bytes) {
  CHECK(target != nullptr);
  JG_RETURN_IF_ERROR(Scan(name, value));
  State state;
  state.target = target;
  state.is_tensor = scratch_->header.type() == kTensorTypeName;
  target->Reset();
  JG_RETURN_IF_ERROR(AddPiece(name, /*first=*/true, blob_bytes, &state));
  if (!state.complete) return IncompleteError(name, state);
  return absl::OkStatus();
}

absl::Status BlobAssembler::Scan(absl::string_view name,
                                 absl::string_view value) {
  if (absl::Status s = ScanBlobProto(value, scratch_.get()); !s.ok()) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status BlobAssembler::AddPiece(absl::string_view name, bool first,
                                     int64_t blob_bytes, State* state) {
  ScannedBlobProto& scanned = *scratch_;
  const bool is_tensor = scanned.header.type() == kTensorTypeName;
  if (state->is_tensor != is_tensor) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': a piece of type '",
                     scanned.header.type(), "' after pieces of another type"));
  }
  if (is_tensor) {
    return AddTensorPiece(name, scanned, first, blob_bytes, state);
  }
  if (!first) {
    return absl::DataLossError(absl::StrCat("blob '", name, "' (type '",
                                            scanned.header.type(),
                                            "') appears more than once"));
  }
  const BlobSerializer* serializer = FindBlobSerializer(scanned.header.type());
  if (serializer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("blob '", name, "' has type '", scanned.header.type(),
                     "', which has no registered deserializer"));
  }
  // Non-tensor blobs are small: rebuild the full proto and let the
  // serializer parse it.
  BlobProto& proto = scanned.header;
  if (scanned.raw_data.has_value()) {
    proto.mutable_tensor()->set_raw_data(scanned.raw_data->data(),
                                         scanned.raw_data->size());
  }
  for (absl::string_view s : scanned.string_data) {
    proto.mutable_tensor()->add_string_data(s.data(), s.size());
  }
  proto.set_name(std::string(name));
  JG_RETURN_IF_ERROR(serializer->Deserialize(proto, state->target));
  state->complete = true;
  ++num_complete_;
  return absl::OkStatus();
}

absl::Status BlobAssembler::IncompleteError(absl::string_view name,
                                            const State& state) {
  return absl::DataLossError(
      state.is_tensor
          ? absl::StrCat("blob '", name, "' is incomplete: got ",
                         state.received, " of ", state.numel, " elements")
          : absl::StrCat("blob '", name,
                         "' is incomplete: its value could not be read"));
}

absl::Status BlobAssembler::AddTensorPiece(absl::string_view name,
                                           const ScannedBlobProto& piece,
                                           bool first, int64_t blob_bytes,
                                           State* state) {
  const TensorProto& proto = piece.header.tensor();
  if (first) {
    JG_RETURN_IF_ERROR(CheckTensorHeader(name, proto, &state->numel));
    JG_RETURN_IF_ERROR(
        CheckShapeFitsBytes(name, proto, state->numel, blob_bytes));
    state->data_type = proto.data_type();
    state->target->Reset(std::make_unique<Tensor>(Tensor::Uninitialized(
        state->data_type,
        std::vector<int64_t>(proto.dims().begin(), proto.dims().end()))));
    // Later pieces are compared with the first's dims; a tensor in one
    // piece has none, and most small tensors are.
    const bool whole =
        !proto.has_segment() ||
        (proto.segment().begin() == 0 && proto.segment().end() == state->numel);
    if (!whole) state->dims.assign(proto.dims().begin(), proto.dims().end());
  } else {
    if (state->complete) {
      return absl::DataLossError(absl::StrCat(
          "blob '", name, "': a piece (segment [", proto.segment().begin(),
          ", ", proto.segment().end(), ")) after the tensor was complete"));
    }
    if (proto.data_type() != state->data_type ||
        !std::equal(proto.dims().begin(), proto.dims().end(),
                    state->dims.begin(), state->dims.end())) {
      return absl::DataLossError(absl::StrCat(
          "blob '", name, "': a piece of ", DataTypeName(proto.data_type()),
          ShapeString(proto.dims()), " after pieces of ",
          DataTypeName(state->data_type), ShapeString(state->dims)));
    }
    if (!proto.has_segment()) {
      return absl::DataLossError(absl::StrCat(
          "blob '", name, "': a piece without a segment after the first"));
    }
  }
  int64_t begin = 0;
  int64_t end = state->numel;
  if (proto.has_segment()) {
    begin = proto.segment().begin();
    end = proto.segment().end();
  }
  if (begin < 0 || begin > end || end > state->numel ||
      (begin == end && state->numel > 0)) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': invalid segment [", begin, ", ", end,
                     ") of a tensor of ", state->numel, " elements"));
  }
  auto next = state->segments.lower_bound(begin);
  const bool overlaps_next = next != state->segments.end() && next->first < end;
  const bool overlaps_prev =
      next != state->segments.begin() && std::prev(next)->second > begin;
  if (overlaps_next || overlaps_prev) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': segment [", begin, ", ", end,
                     ") overlaps a piece already loaded"));
  }
  Blob* target = state->target;
  if (!target->IsType<Tensor>()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", name, "' no longer holds the tensor being loaded"));
  }
  JG_RETURN_IF_ERROR(FillTensorSlice(name, proto, piece.raw_data,
                                     piece.string_data, begin, end,
                                     target->GetMutable<Tensor>()));
  state->received += end - begin;
  if (state->received < state->numel) state->segments.emplace(begin, end);
  if (state->received == state->numel) {
    state->complete = true;
    ++num_complete_;
  }
  return absl::OkStatus();
}

bool BlobAssembler::IsComplete(absl::string_view name) const {
  auto it = blobs_.find(name);
  return it != blobs_.end() && it->second.complete;
}

bool BlobAssembler::IsStarted(absl::string_view name) const {
  return blobs_.find(name) != blobs_.end();
}

std::vector<std::string> BlobAssembler::CompleteBlobs() const {
  std::vector<std::string> names;
  for (const auto& [name, state] : blobs_) {
    if (state.complete) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status BlobAssembler::Finish() const {
  // Only blobs of several pieces are kept (AddWhole keeps none).
  const int incomplete = static_cast<int>(
      std::count_if(blobs_.begin(), blobs_.end(),
                    [](const auto& entry) { return !entry.second.complete; }));
  if (incomplete == 0) return absl::OkStatus();
  // The first by name, so that the message does not depend on hashing.
  const std::pair<const std::string, State>* first = nullptr;
  for (const auto& entry : blobs_) {
    if (!entry.second.complete &&
        (first == nullptr || entry.first < first->first)) {
      first = &entry;
    }
  }
  CHECK(first != nullptr) << incomplete << " incomplete blobs not found";
  const auto& [name, state] = *first;
  const absl::Status status = IncompleteError(name, state);
  if (incomplete == 1) return status;
  return absl::DataLossError(absl::StrCat(
      status.message(), " (and ", incomplete - 1, " more incomplete blobs)"));
}

absl::Status DeserializeBlob(absl::string_view name, absl::string_view value,
                             Blob* target) {
  BlobAssembler assembler;
  JG_RETURN_IF_ERROR(
      assembler.Add(name, value, target, static_cast<int64_t>(value.size())));
  return assembler.Finish();
}

}  // namespace jobgraph

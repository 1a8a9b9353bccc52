#include "engine/tensor_serializer.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/chunking.h"
#include "engine/status_macros.h"
#include "engine/tensor_reader.h"
#include "engine/wire_format.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace serialization_internal {
namespace {

// Starts a chunk's value: the header of `tensor`'s chunk [begin, end) named
// `name`, then, when `payload` > 0, the header of a second `tensor` field
// whose `payload` bytes the caller appends next. Reserves the whole value,
// so the caller's appends never reallocate; with `reserve_payload` false
// (the payload's elements are borrowed, never appended), only room for the
// payload's own field header (a tag byte and a length of at most 10 bytes).
std::string StartChunk(absl::string_view name, const Tensor& tensor,
                       int64_t begin, int64_t end, size_t payload,
                       bool reserve_payload = true) {
  std::string value;
  value.reserve(
      TensorHeaderSize(name, tensor.shape(), tensor.dtype(), begin, end) +
      (payload == 0      ? 0
       : reserve_payload ? LengthDelimitedSize(payload)
                         : LengthDelimitedSize(payload) - payload + 11));
  AppendTensorHeader(name, tensor.shape(), tensor.dtype(), begin, end, &value);
  if (payload > 0) {
    AppendLengthDelimitedHeader(kBlobProtoTensorField, payload, &value);
  }
  return value;
}

// `sink` gets each chunk's elements as a view of the tensor; `copied`: it
// appends them to the head (which then has room for them).
absl::Status WriteFixedWidthTensor(absl::string_view name, const Tensor& tensor,
                                   const SerializationOptions& options,
                                   bool copied, const BorrowingBlobSink& sink) {
  const size_t element_size = DataTypeSize(tensor.dtype());
  const char* data = static_cast<const char*>(tensor.raw_data());
  const std::vector<std::pair<int64_t, int64_t>> chunks =
      FixedWidthChunks(tensor.numel(), element_size, options.chunk_bytes);
  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const auto [begin, end] = chunks[k];
    const size_t nbytes = static_cast<size_t>(end - begin) * element_size;
    // BlobProto.tensor (again) { raw_data: the slice }.
    std::string head =
        StartChunk(name, tensor, begin, end,
                   nbytes > 0 ? LengthDelimitedSize(nbytes) : 0, copied);
    absl::string_view body;
    if (nbytes > 0) {
      AppendLengthDelimitedHeader(kTensorProtoRawDataField, nbytes, &head);
      body = absl::string_view(data + begin * element_size, nbytes);
    }
    JG_RETURN_IF_ERROR(sink(TensorChunkKey(name, k), std::move(head), body));
  }
  return absl::OkStatus();
}

absl::Status WriteStringTensor(absl::string_view name, const Tensor& tensor,
                               const SerializationOptions& options,
                               const BlobSink& sink) {
  const absl::Span<const std::string> strings = tensor.values<std::string>();
  // Checked before anything is written, so a failed save writes nothing.
  for (size_t i = 0; i < strings.size(); ++i) {
    if (strings[i].size() > static_cast<size_t>(kMaxChunkBytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot serialize blob '", name, "': string element ", i,
                       " has ", strings[i].size(),
                       " bytes, more than the limit of ", kMaxChunkBytes));
    }
  }
  const std::vector<StringChunk> chunks =
      StringChunks(strings, options.chunk_bytes);
  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const StringChunk& chunk = chunks[k];
    // BlobProto.tensor (again) { string_data: each element }.
    std::string value =
        StartChunk(name, tensor, chunk.begin, chunk.end, chunk.payload_bytes);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      AppendLengthDelimitedHeader(kTensorProtoStringDataField,
                                  strings[i].size(), &value);
      value.append(strings[i]);
    }
    JG_RETURN_IF_ERROR(sink(TensorChunkKey(name, k), std::move(value)));
  }
  return absl::OkStatus();
}

class TensorSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kTensorTypeName; }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    return WriteTensorChunks(name, blob.Get<Tensor>(), options, sink);
  }
  absl::Status SerializeBorrowing(
      absl::string_view name, const Blob& blob,
      const SerializationOptions& options,
      const BorrowingBlobSink& sink) const override {
    return WriteTensorChunksBorrowing(name, blob.Get<Tensor>(), options, sink);
  }
  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(Tensor tensor,
                        TensorFromProto(proto.name(), proto.tensor()));
    target->Reset(std::make_unique<Tensor>(std::move(tensor)));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_SERIALIZER(Tensor, TensorSerializer);

}  // namespace

absl::Status WriteTensorChunks(absl::string_view name, const Tensor& tensor,
                               const SerializationOptions& options,
                               const BlobSink& sink) {
  if (tensor.dtype() == STRING) {
    return WriteStringTensor(name, tensor, options, sink);
  }
  return WriteFixedWidthTensor(
      name, tensor, options, /*copied=*/true,
      [&sink](std::string key, std::string head, absl::string_view body) {
        // StartChunk reserved the whole value: no reallocation.
        head.append(body.data(), body.size());  // the one copy
        return sink(std::move(key), std::move(head));
      });
}

absl::Status WriteTensorChunksBorrowing(absl::string_view name,
                                        const Tensor& tensor,
                                        const SerializationOptions& options,
                                        const BorrowingBlobSink& sink) {
  if (tensor.dtype() == STRING) {
    return WriteStringTensor(
        name, tensor, options, [&sink](std::string key, std::string value) {
          return sink(std::move(key), std::move(value), {});
        });
  }
  return WriteFixedWidthTensor(name, tensor, options, /*copied=*/false, sink);
}

}  // namespace serialization_internal
}  // namespace jobgraph

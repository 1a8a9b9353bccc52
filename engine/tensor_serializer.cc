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

// The header of every chunk of `tensor`: name, type, dims, data_type and an
// empty segment for the caller to fill in.
BlobProto TensorHeader(absl::string_view name, const Tensor& tensor) {
  BlobProto header;
  header.set_name(std::string(name));
  header.set_type(kTensorTypeName);
  TensorProto* proto = header.mutable_tensor();
  for (int64_t d : tensor.shape()) proto->add_dims(d);
  proto->set_data_type(tensor.dtype());
  proto->mutable_segment();
  return header;
}

// Starts a chunk's value: the serialized `header` with [begin, end) as its
// segment, then, when `payload` > 0, the header of a second `tensor` field
// whose `payload` bytes the caller appends next. Reserves the whole value,
// so the caller's appends never reallocate.
std::string StartChunk(BlobProto* header, int64_t begin, int64_t end,
                       size_t payload) {
  TensorProto::Segment* segment = header->mutable_tensor()->mutable_segment();
  segment->set_begin(begin);
  segment->set_end(end);
  std::string value;
  value.reserve(header->ByteSizeLong() +
                (payload > 0 ? LengthDelimitedSize(payload) : 0));
  CHECK(header->AppendToString(&value)) << "serializing a BlobProto header";
  if (payload > 0) {
    AppendLengthDelimitedHeader(kBlobProtoTensorField, payload, &value);
  }
  return value;
}

absl::Status WriteFixedWidthTensor(absl::string_view name, const Tensor& tensor,
                                   const SerializationOptions& options,
                                   const BlobSink& sink) {
  BlobProto header = TensorHeader(name, tensor);
  const size_t element_size = DataTypeSize(tensor.dtype());
  const char* data = static_cast<const char*>(tensor.raw_data());
  const std::vector<std::pair<int64_t, int64_t>> chunks =
      FixedWidthChunks(tensor.numel(), element_size, options.chunk_bytes);
  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const auto [begin, end] = chunks[k];
    const size_t nbytes = static_cast<size_t>(end - begin) * element_size;
    // BlobProto.tensor (again) { raw_data: the slice }.
    std::string value = StartChunk(
        &header, begin, end, nbytes > 0 ? LengthDelimitedSize(nbytes) : 0);
    if (nbytes > 0) {
      AppendLengthDelimitedHeader(kTensorProtoRawDataField, nbytes, &value);
      value.append(data + begin * element_size, nbytes);  // the one copy
    }
    JG_RETURN_IF_ERROR(sink(TensorChunkKey(name, k), std::move(value)));
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
  BlobProto header = TensorHeader(name, tensor);
  const std::vector<StringChunk> chunks =
      StringChunks(strings, options.chunk_bytes);
  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const StringChunk& chunk = chunks[k];
    // BlobProto.tensor (again) { string_data: each element }.
    std::string value =
        StartChunk(&header, chunk.begin, chunk.end, chunk.payload_bytes);
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
  return WriteFixedWidthTensor(name, tensor, options, sink);
}

}  // namespace serialization_internal
}  // namespace jobgraph

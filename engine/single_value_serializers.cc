// The serializers of the built-in blob types stored as one value under the
// bare blob name: std::string (bytes in `content`) and Counter (`tensor`: an
// INT64 tensor of dims [1]).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/counter_type.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/tensor_reader.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

// A BlobProto of this serializer's type for blob `name`.
BlobProto NewProto(absl::string_view name, absl::string_view type_name) {
  BlobProto proto;
  proto.set_name(std::string(name));
  proto.set_type(std::string(type_name));
  return proto;
}

class StringSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kStringTypeName; }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const std::string& content = blob.Get<std::string>();
    if (content.size() > static_cast<size_t>(kMaxChunkBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot serialize blob '", name, "': a string of ", content.size(),
          " bytes is over the limit of ", kMaxChunkBytes));
    }
    BlobProto proto = NewProto(name, kStringTypeName);
    proto.set_content(content);
    return sink(std::string(name), proto.SerializeAsString());
  }
  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    target->Reset(std::make_unique<std::string>(proto.content()));
    return absl::OkStatus();
  }
};

class CounterSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kCounterTypeName; }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const int64_t count = blob.Get<Counter>().Retrieve();
    BlobProto proto = NewProto(name, kCounterTypeName);
    TensorProto* tensor = proto.mutable_tensor();
    tensor->add_dims(1);
    tensor->set_data_type(INT64);
    tensor->set_raw_data(&count, sizeof(count));
    return sink(std::string(name), proto.SerializeAsString());
  }
  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(Tensor tensor, serialization_internal::TensorFromProto(
                                           proto.name(), proto.tensor()));
    if (tensor.dtype() != INT64 || tensor.shape() != std::vector<int64_t>{1}) {
      return absl::DataLossError(absl::StrCat(
          "blob '", proto.name(),
          "': a counter must be stored as int64[1], got ",
          DataTypeName(tensor.dtype()), ShapeString(tensor.shape())));
    }
    target->Reset(std::make_unique<Counter>(tensor.scalar<int64_t>()));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_SERIALIZER(std::string, StringSerializer);
JG_REGISTER_BLOB_SERIALIZER(Counter, CounterSerializer);

}  // namespace
}  // namespace jobgraph

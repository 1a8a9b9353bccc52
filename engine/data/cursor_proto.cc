#include "engine/data/cursor_proto.h"

#include "absl/strings/str_cat.h"

namespace jobgraph {
namespace data_internal {

std::string SerializeCursorProto(absl::string_view name, absl::string_view type,
                                 absl::Span<const int64_t> values,
                                 absl::string_view content) {
  BlobProto proto;
  proto.set_name(std::string(name));
  proto.set_type(std::string(type));
  TensorProto* tensor = proto.mutable_tensor();
  tensor->add_dims(static_cast<int64_t>(values.size()));
  tensor->set_data_type(INT64);
  // Byte by byte, so the stored form is little-endian on any host.
  std::string raw;
  raw.reserve(values.size() * 8);
  for (int64_t v : values) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (int b = 0; b < 8; ++b) raw.push_back(static_cast<char>(u >> (8 * b)));
  }
  tensor->set_raw_data(std::move(raw));
  proto.set_content(std::string(content));
  return proto.SerializeAsString();
}

absl::StatusOr<std::vector<int64_t>> CursorValues(const BlobProto& proto) {
  if (!proto.has_tensor()) return std::vector<int64_t>();
  const TensorProto& tensor = proto.tensor();
  auto data_loss = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("blob '", proto.name(), "' (type '",
                                            proto.type(), "'): ", what));
  };
  if (tensor.data_type() != INT64 || tensor.dims_size() != 1) {
    return data_loss(absl::StrCat(
        "the cursor state must be a 1-D int64 "
        "tensor, got data_type ",
        tensor.data_type(), " with ", tensor.dims_size(), " dims"));
  }
  const int64_t n = tensor.dims(0);
  std::vector<int64_t> values;
  if (!tensor.raw_data().empty()) {
    const std::string& raw = tensor.raw_data();
    if (n < 0 || raw.size() != static_cast<size_t>(n) * 8) {
      return data_loss(absl::StrCat("dims [", n, "] but ", raw.size(),
                                    " bytes of raw_data"));
    }
    for (int64_t i = 0; i < n; ++i) {
      uint64_t u = 0;
      for (int b = 0; b < 8; ++b) {
        u |= static_cast<uint64_t>(static_cast<unsigned char>(raw[i * 8 + b]))
             << (8 * b);
      }
      values.push_back(static_cast<int64_t>(u));
    }
  } else {
    if (tensor.int64_data_size() != n) {
      return data_loss(absl::StrCat("dims [", n, "] but ",
                                    tensor.int64_data_size(),
                                    " int64_data values"));
    }
    values.assign(tensor.int64_data().begin(), tensor.int64_data().end());
  }
  return values;
}

}  // namespace data_internal
}  // namespace jobgraph

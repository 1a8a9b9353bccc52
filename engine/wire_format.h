// The protobuf wire format, written and read by hand on the checkpoint hot
// path so that tensor element bytes are copied exactly once each way.
//
// Writing: a chunk's value is a small header BlobProto (AppendTensorHeader:
// the bytes protobuf would write, without building the message), then a second
// occurrence of the length-delimited field `tensor` holding only the bulk data,
// appended with AppendLengthDelimitedHeader and the bytes themselves. Protobuf
// parsers merge repeated occurrences of a message field, so the value is an
// ordinary BlobProto.
//
// Reading: ScanBlobProto walks a serialized BlobProto, keeps the bulk fields
// (TensorProto.raw_data and string_data) as views into the value and parses
// only the small remaining fields.
//
// Internal to the serialization library (package-private target). Every
// function is pure and thread-safe.

#ifndef JOBGRAPH_ENGINE_WIRE_FORMAT_H_
#define JOBGRAPH_ENGINE_WIRE_FORMAT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/jobgraph.pb.h"

// TensorProto.raw_data is little-endian, and the serialization code copies
// host bytes to and from it.
#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "jobgraph serialization assumes a little-endian host"
#endif

namespace jobgraph {
namespace serialization_internal {

// Field numbers of proto/jobgraph.proto that the hand-written code uses.
inline constexpr int kBlobProtoTensorField = 3;
inline constexpr int kTensorProtoStringDataField = 6;
inline constexpr int kTensorProtoRawDataField = 12;

// Bytes that a length-delimited field of `payload` bytes takes on the wire.
// Only for field numbers below 16, whose tags take one byte.
size_t LengthDelimitedSize(size_t payload);

// Appends the tag and length of length-delimited field `field`; the caller
// appends the `length` payload bytes next.
void AppendLengthDelimitedHeader(int field, size_t length, std::string* out);

// Appends BlobProto{name, type: kTensorTypeName, tensor{dims, data_type,
// segment{begin, end}}} to `out`, byte for byte as protobuf serializes that
// message (fields in number order, zero values omitted, dims packed, the
// segment present even when empty), without building one: a save of 100,000
// small tensors writes 100,000 of these headers.
void AppendTensorHeader(absl::string_view name, absl::Span<const int64_t> dims,
                        DataType data_type, int64_t begin, int64_t end,
                        std::string* out);
// The bytes AppendTensorHeader appends.
size_t TensorHeaderSize(absl::string_view name, absl::Span<const int64_t> dims,
                        DataType data_type, int64_t begin, int64_t end);

// A BlobProto whose bulk tensor data was left in the serialized value.
struct ScannedBlobProto {
  // Every field except tensor.raw_data and tensor.string_data.
  BlobProto header;
  // tensor.raw_data as a view into the value, if the field was present.
  std::optional<absl::string_view> raw_data;
  // tensor.string_data, each a view into the value.
  std::vector<absl::string_view> string_data;
};

// Parses serialized BlobProto `value` into `out` without copying
// tensor.raw_data or tensor.string_data; the views in `out` point into
// `value`. Occurrences of `tensor` are merged as protobuf does (raw_data:
// the last wins). DataLoss if `value` is not a valid BlobProto.
absl::Status ScanBlobProto(absl::string_view value, ScannedBlobProto* out);

}  // namespace serialization_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_WIRE_FORMAT_H_

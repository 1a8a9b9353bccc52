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
// FastWireReader is also the checkpoint library's reader of a database's
// blob index (checkpoint/ops/compact_blob_index.h). Internal otherwise: visible
// to this package and that one. Every function is pure and thread-safe.

#ifndef JOBGRAPH_ENGINE_WIRE_FORMAT_H_
#define JOBGRAPH_ENGINE_WIRE_FORMAT_H_

#include <climits>
#include <cstddef>
#include <cstdint>
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

// Wire types (the low three bits of a tag).
inline constexpr int kWireVarint = 0;
inline constexpr int kWireFixed64 = 1;
inline constexpr int kWireLengthDelimited = 2;
inline constexpr int kWireFixed32 = 5;

// Protobuf reads a length as a varint of at most 5 bytes whose value is at
// most INT_MAX, and rejects a value with a longer one.
inline constexpr int kMaxLengthBytes = 5;

// Reads the encodings on which every protobuf parser agrees, and no other:
// a one-byte tag, a varint whose value fits 64 bits, a length protobuf
// accepts. A reader that returns false leaves the decision to protobuf's
// own parser (the caller's slow path). Not thread-safe; cheap to copy.
class FastWireReader {
 public:
  explicit FastWireReader(absl::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ == end_; }
  // The next byte to read.
  const char* position() const { return p_; }

  bool Tag(int* field, int* wire_type) {
    if (p_ == end_) return false;
    const uint8_t b = static_cast<uint8_t>(*p_);
    if ((b & 0x80) != 0 || (b >> 3) == 0) return false;
    ++p_;
    *field = b >> 3;
    *wire_type = b & 7;
    return true;
  }

  // At most 10 bytes, the last at most 1: exactly the varints whose value
  // fits 64 bits, on which every protobuf parser agrees.
  bool Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int i = 0; i < 10 && p_ != end_; ++i) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      if (i == 9 && b > 1) return false;
      result |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *value = result;
        return true;
      }
    }
    return false;
  }

  bool Fixed32(uint32_t* value) {
    if (end_ - p_ < 4) return false;
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p_[i]);
    p_ += 4;
    *value = v;
    return true;
  }

  // A length-delimited payload.
  bool Payload(absl::string_view* payload) {
    const char* const start = p_;
    uint64_t length;
    if (!Varint(&length) || p_ - start > kMaxLengthBytes ||
        length > static_cast<uint64_t>(INT_MAX) ||
        length > static_cast<uint64_t>(end_ - p_)) {
      return false;
    }
    *payload = absl::string_view(p_, static_cast<size_t>(length));
    p_ += length;
    return true;
  }

 private:
  const char* p_;
  const char* const end_;
};

// Whether protobuf's parser accepts `value` for a proto3 `string` field: it
// refuses any that is not valid UTF-8 (and lengths over INT_MAX).
bool IsProto3String(absl::string_view value);

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

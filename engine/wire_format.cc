#include "engine/wire_format.h"

#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"

namespace jobgraph {
namespace serialization_internal {
namespace {

// Field numbers of the header fields AppendTensorHeader writes.
constexpr int kBlobProtoNameField = 1;
constexpr int kBlobProtoTypeField = 2;
constexpr int kTensorProtoDimsField = 1;
constexpr int kTensorProtoDataTypeField = 2;
constexpr int kTensorProtoSegmentField = 11;
constexpr int kSegmentBeginField = 1;
constexpr int kSegmentEndField = 2;

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void AppendVarint(uint64_t value, std::string* out) {
  char buf[10];
  int n = 0;
  while (value >= 0x80) {
    buf[n++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  buf[n++] = static_cast<char>(value);
  out->append(buf, n);
}

bool ReadLength(google::protobuf::io::CodedInputStream* in, uint32_t* length) {
  const int start = in->CurrentPosition();
  return in->ReadVarint32(length) &&
         in->CurrentPosition() - start <= kMaxLengthBytes &&
         *length <= static_cast<uint32_t>(INT_MAX);
}

// Skips the payload of a field of `wire_type` whose tag was just read.
bool SkipPayload(google::protobuf::io::CodedInputStream* in, int wire_type) {
  switch (wire_type) {
    case kWireVarint: {
      uint64_t v;
      return in->ReadVarint64(&v);
    }
    case kWireFixed64: {
      uint64_t v;
      return in->ReadLittleEndian64(&v);
    }
    case kWireLengthDelimited: {
      uint32_t length;
      return ReadLength(in, &length) && in->Skip(static_cast<int>(length));
    }
    case kWireFixed32: {
      uint32_t v;
      return in->ReadLittleEndian32(&v);
    }
    default:  // groups: jobgraph.proto has none
      return false;
  }
}

// Reads the length of a length-delimited field and returns its payload as a
// view into `value`, skipping it.
bool ReadPayloadView(google::protobuf::io::CodedInputStream* in,
                     absl::string_view value, absl::string_view* payload) {
  uint32_t length;
  if (!ReadLength(in, &length) ||
      static_cast<int>(length) > in->BytesUntilLimit()) {
    return false;
  }
  *payload = value.substr(in->CurrentPosition(), length);
  return in->Skip(static_cast<int>(length));
}

// Scans the fields of one TensorProto occurrence up to the current limit:
// bulk fields become views, the others are appended to `rest` as encoded.
bool ScanTensorProto(google::protobuf::io::CodedInputStream* in,
                     absl::string_view value, std::string* rest,
                     ScannedBlobProto* out) {
  while (in->BytesUntilLimit() > 0) {
    const int start = in->CurrentPosition();
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return false;
    const int field = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    absl::string_view payload;
    if (field == kTensorProtoRawDataField &&
        wire_type == kWireLengthDelimited) {
      if (!ReadPayloadView(in, value, &payload)) return false;
      out->raw_data = payload;  // the last occurrence wins, as in protobuf
    } else if (field == kTensorProtoStringDataField &&
               wire_type == kWireLengthDelimited) {
      if (!ReadPayloadView(in, value, &payload)) return false;
      out->string_data.push_back(payload);
    } else {
      if (!SkipPayload(in, wire_type)) return false;
      rest->append(value.data() + start, in->CurrentPosition() - start);
    }
  }
  return true;
}

// ScanBlobProtoFast and its parts: the fast path of ScanBlobProto, for
// values made only of the fields that SerializeBlob writes for tensors, in
// their usual encodings. It returns false, having perhaps filled `out`
// partly, at anything else (another field, a multi-byte tag, an unusual
// varint, invalid UTF-8, truncation); the caller then clears `out` and runs
// the general scanner, which decides.
bool ScanSegmentFast(absl::string_view bytes, TensorProto::Segment* segment) {
  FastWireReader in(bytes);
  while (!in.done()) {
    int field, wire_type;
    uint64_t v;
    if (!in.Tag(&field, &wire_type) || wire_type != kWireVarint ||
        !in.Varint(&v)) {
      return false;
    }
    if (field == kSegmentBeginField) {
      segment->set_begin(static_cast<int64_t>(v));
    } else if (field == kSegmentEndField) {
      segment->set_end(static_cast<int64_t>(v));
    } else {
      return false;
    }
  }
  return true;
}

bool ScanTensorFast(absl::string_view bytes, ScannedBlobProto* out) {
  TensorProto* tensor = out->header.mutable_tensor();
  FastWireReader in(bytes);
  while (!in.done()) {
    int field, wire_type;
    if (!in.Tag(&field, &wire_type)) return false;
    uint64_t v;
    absl::string_view payload;
    const bool varint = wire_type == kWireVarint;
    const bool delimited = wire_type == kWireLengthDelimited;
    if (field == kTensorProtoDimsField && varint) {
      if (!in.Varint(&v)) return false;
      tensor->add_dims(static_cast<int64_t>(v));
    } else if (field == kTensorProtoDimsField && delimited) {
      if (!in.Payload(&payload)) return false;
      FastWireReader packed(payload);
      while (!packed.done()) {
        if (!packed.Varint(&v)) return false;
        tensor->add_dims(static_cast<int64_t>(v));
      }
    } else if (field == kTensorProtoDataTypeField && varint) {
      if (!in.Varint(&v)) return false;
      // An int32 enum: protobuf keeps the low 32 bits.
      tensor->set_data_type(static_cast<DataType>(
          static_cast<int32_t>(static_cast<uint32_t>(v))));
    } else if (field == kTensorProtoSegmentField && delimited) {
      if (!in.Payload(&payload) ||
          !ScanSegmentFast(payload, tensor->mutable_segment())) {
        return false;
      }
    } else if (field == kTensorProtoRawDataField && delimited) {
      if (!in.Payload(&payload)) return false;
      out->raw_data = payload;
    } else if (field == kTensorProtoStringDataField && delimited) {
      if (!in.Payload(&payload)) return false;
      out->string_data.push_back(payload);
    } else {
      return false;
    }
  }
  return true;
}

bool ScanBlobProtoFast(absl::string_view value, ScannedBlobProto* out) {
  FastWireReader in(value);
  while (!in.done()) {
    int field, wire_type;
    absl::string_view payload;
    if (!in.Tag(&field, &wire_type) || wire_type != kWireLengthDelimited ||
        !in.Payload(&payload)) {
      return false;
    }
    if (field == kBlobProtoNameField || field == kBlobProtoTypeField) {
      if (!IsProto3String(payload)) return false;
      if (field == kBlobProtoNameField) {
        out->header.set_name(payload.data(), payload.size());
      } else {
        out->header.set_type(payload.data(), payload.size());
      }
    } else if (field == kBlobProtoTensorField) {
      if (!ScanTensorFast(payload, out)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool ScanBlobProtoFields(absl::string_view value, ScannedBlobProto* out) {
  // The array constructor implies PushLimit(value.size()).
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(value.data()),
      static_cast<int>(value.size()));
  std::string blob_rest;    // encoded BlobProto fields other than `tensor`
  std::string tensor_rest;  // encoded TensorProto fields other than bulk data
  bool saw_tensor = false;
  while (in.BytesUntilLimit() > 0) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return false;
    const int field = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    if (field == kBlobProtoTensorField && wire_type == kWireLengthDelimited) {
      uint32_t length;
      if (!ReadLength(&in, &length) ||
          static_cast<int>(length) > in.BytesUntilLimit()) {
        return false;
      }
      const auto limit = in.PushLimit(static_cast<int>(length));
      if (!ScanTensorProto(&in, value, &tensor_rest, out)) return false;
      in.PopLimit(limit);
      saw_tensor = true;
    } else {
      if (!SkipPayload(&in, wire_type)) return false;
      blob_rest.append(value.data() + start, in.CurrentPosition() - start);
    }
  }
  if (!out->header.ParseFromString(blob_rest)) return false;
  if (saw_tensor &&
      !out->header.mutable_tensor()->MergeFromString(tensor_rest)) {
    return false;
  }
  return true;
}

constexpr absl::string_view kTensorType = "Tensor";

// Every field number here is below 16: its tag takes one byte.
char Tag(int field, int wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

// Signed values go on the wire as their 64-bit two's complement, as
// protobuf writes int64 and enum fields.
uint64_t Wire(int64_t value) { return static_cast<uint64_t>(value); }

// Sizes of the nested payloads of a tensor header.
struct HeaderSizes {
  size_t dims = 0;     // packed dims payload
  size_t segment = 0;  // Segment payload
  size_t tensor = 0;   // TensorProto payload
  size_t blob = 0;     // the whole BlobProto
};

HeaderSizes ComputeHeaderSizes(absl::string_view name,
                               absl::Span<const int64_t> dims,
                               DataType data_type, int64_t begin, int64_t end) {
  HeaderSizes s;
  for (int64_t d : dims) s.dims += VarintSize(Wire(d));
  if (begin != 0) s.segment += 1 + VarintSize(Wire(begin));
  if (end != 0) s.segment += 1 + VarintSize(Wire(end));
  if (!dims.empty()) s.tensor += LengthDelimitedSize(s.dims);
  if (data_type != 0) s.tensor += 1 + VarintSize(Wire(data_type));
  s.tensor += LengthDelimitedSize(s.segment);
  if (!name.empty()) s.blob += LengthDelimitedSize(name.size());
  s.blob += LengthDelimitedSize(kTensorType.size());
  s.blob += LengthDelimitedSize(s.tensor);
  return s;
}

}  // namespace

bool IsProto3String(absl::string_view value) {
  return value.size() <= static_cast<size_t>(INT_MAX) &&
         google::protobuf::internal::IsStructurallyValidUTF8(
             value.data(), static_cast<int>(value.size()));
}

size_t TensorHeaderSize(absl::string_view name, absl::Span<const int64_t> dims,
                        DataType data_type, int64_t begin, int64_t end) {
  return ComputeHeaderSizes(name, dims, data_type, begin, end).blob;
}

void AppendTensorHeader(absl::string_view name, absl::Span<const int64_t> dims,
                        DataType data_type, int64_t begin, int64_t end,
                        std::string* out) {
  const HeaderSizes s = ComputeHeaderSizes(name, dims, data_type, begin, end);
  if (!name.empty()) {
    AppendLengthDelimitedHeader(kBlobProtoNameField, name.size(), out);
    out->append(name.data(), name.size());
  }
  AppendLengthDelimitedHeader(kBlobProtoTypeField, kTensorType.size(), out);
  out->append(kTensorType.data(), kTensorType.size());
  AppendLengthDelimitedHeader(kBlobProtoTensorField, s.tensor, out);
  if (!dims.empty()) {
    AppendLengthDelimitedHeader(kTensorProtoDimsField, s.dims, out);
    for (int64_t d : dims) AppendVarint(Wire(d), out);
  }
  if (data_type != 0) {
    out->push_back(Tag(kTensorProtoDataTypeField, kWireVarint));
    AppendVarint(Wire(data_type), out);
  }
  AppendLengthDelimitedHeader(kTensorProtoSegmentField, s.segment, out);
  if (begin != 0) {
    out->push_back(Tag(kSegmentBeginField, kWireVarint));
    AppendVarint(Wire(begin), out);
  }
  if (end != 0) {
    out->push_back(Tag(kSegmentEndField, kWireVarint));
    AppendVarint(Wire(end), out);
  }
}

size_t LengthDelimitedSize(size_t payload) {
  return 1 + VarintSize(payload) + payload;
}

void AppendLengthDelimitedHeader(int field, size_t length, std::string* out) {
  AppendVarint((static_cast<uint32_t>(field) << 3) | kWireLengthDelimited, out);
  AppendVarint(length, out);
}

absl::Status ScanBlobProto(absl::string_view value, ScannedBlobProto* out) {
  auto clear = [out] {
    out->header.Clear();
    out->raw_data.reset();
    out->string_data.clear();
  };
  clear();
  if (value.size() > static_cast<size_t>(INT_MAX)) {
    return absl::DataLossError(absl::StrCat("a value of ", value.size(),
                                            " bytes is not a valid BlobProto"));
  }
  if (ScanBlobProtoFast(value, out)) return absl::OkStatus();
  clear();
  if (!ScanBlobProtoFields(value, out)) {
    return absl::DataLossError(absl::StrCat("a value of ", value.size(),
                                            " bytes is not a valid BlobProto"));
  }
  return absl::OkStatus();
}

}  // namespace serialization_internal
}  // namespace jobgraph

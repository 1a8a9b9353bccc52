#include "engine/serialization.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/counter.h"
#include "engine/serialization_internal.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "google/protobuf/io/coded_stream.h"

// TensorProto.raw_data is little-endian; the code below copies host bytes.
#if !defined(ABSL_IS_LITTLE_ENDIAN)
#error "jobgraph serialization assumes a little-endian host"
#endif

namespace jobgraph {

using serialization_internal::ScanBlobProto;
using serialization_internal::ScannedBlobProto;

namespace {

constexpr absl::string_view kStringTypeName = "std::string";
constexpr absl::string_view kCounterTypeName =
    "std::unique_ptr<Counter<int64_t>>";

// Protobuf wire format: field numbers and wire types used by the hand-written
// encoder and scanner.
constexpr int kWireVarint = 0;
constexpr int kWireFixed64 = 1;
constexpr int kWireLengthDelimited = 2;
constexpr int kWireFixed32 = 5;
constexpr int kBlobProtoTensorField = 3;
constexpr int kTensorProtoStringDataField = 6;
constexpr int kTensorProtoRawDataField = 12;

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

void AppendTag(int field, int wire_type, std::string* out) {
  AppendVarint((static_cast<uint32_t>(field) << 3) | wire_type, out);
}

// Bytes that a length-delimited field of `payload` bytes takes on the wire
// (field numbers below 16 have one-byte tags).
size_t LengthDelimitedSize(size_t payload) {
  return 1 + VarintSize(payload) + payload;
}

// ---------------------------------------------------------------------------
// Registry.

struct Registry {
  std::mutex mu;
  std::map<std::type_index, const BlobSerializer*> by_type ABSL_GUARDED_BY(mu);
  std::map<std::string, const BlobSerializer*, std::less<>> by_name
      ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed
  return *registry;
}

// ---------------------------------------------------------------------------
// Tensor writing.

absl::Status CheckOptions(absl::string_view name,
                          const SerializationOptions& options) {
  if (options.chunk_bytes <= 0 || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serializing blob '", name, "': chunk_bytes must be in [1, ",
        kMaxChunkBytes, "], got ", options.chunk_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "cannot serialize a blob with an empty name");
  }
  if (absl::StrContains(name, kChunkSeparator)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialize blob '", name, "': its name contains '",
                     kChunkSeparator,
                     "', which separates chunk indexes in "
                     "database keys"));
  }
  return absl::OkStatus();
}

// The header of every chunk of `tensor`: name, type, dims, data_type and an
// empty segment for the caller to fill in.
BlobProto TensorHeader(absl::string_view name, const Tensor& tensor) {
  BlobProto header;
  header.set_name(std::string(name));
  header.set_type(std::string(kTensorTypeName));
  TensorProto* proto = header.mutable_tensor();
  for (int64_t d : tensor.shape()) proto->add_dims(d);
  proto->set_data_type(tensor.dtype());
  proto->mutable_segment();
  return header;
}

// Starts a value with the serialized `header`, reserving `extra` more bytes.
std::string StartValue(const BlobProto& header, size_t extra) {
  std::string value;
  value.reserve(header.ByteSizeLong() + extra);
  CHECK(header.AppendToString(&value)) << "serializing a BlobProto header";
  return value;
}

// The chunk indexes 0..n-1 in the bytewise order of their keys ("x#%0",
// "x#%1", "x#%10", "x#%2", ...). Chunks are emitted in that order so that a
// database that keeps keys sorted (LevelDB) receives them already sorted:
// out-of-order keys make LevelDB's table files overlap and cost a compaction
// that rewrites the data (measured 2.5-3.7x slower saves for one large
// tensor).
std::vector<int64_t> ChunkKeyOrder(int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [](int64_t a, int64_t b) {
    return absl::StrCat(a) < absl::StrCat(b);
  });
  return order;
}

absl::Status SerializeFixedWidthTensor(absl::string_view name,
                                       const Tensor& tensor,
                                       const SerializationOptions& options,
                                       const BlobSink& sink) {
  BlobProto header = TensorHeader(name, tensor);
  TensorProto::Segment* segment = header.mutable_tensor()->mutable_segment();
  const size_t element_size = DataTypeSize(tensor.dtype());
  const char* data = static_cast<const char*>(tensor.raw_data());
  const std::vector<std::pair<int64_t, int64_t>> chunks =
      serialization_internal::FixedWidthChunks(tensor.numel(), element_size,
                                               options.chunk_bytes);
  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const auto [begin, end] = chunks[k];
    segment->set_begin(begin);
    segment->set_end(end);
    const size_t nbytes = static_cast<size_t>(end - begin) * element_size;
    // BlobProto.tensor (again) { raw_data: the slice }.
    const size_t inner = LengthDelimitedSize(nbytes);
    std::string value =
        StartValue(header, nbytes > 0 ? LengthDelimitedSize(inner) : 0);
    if (nbytes > 0) {
      AppendTag(kBlobProtoTensorField, kWireLengthDelimited, &value);
      AppendVarint(inner, &value);
      AppendTag(kTensorProtoRawDataField, kWireLengthDelimited, &value);
      AppendVarint(nbytes, &value);
      value.append(data + begin * element_size, nbytes);  // the one copy
    }
    JG_RETURN_IF_ERROR(sink(TensorChunkKey(name, k), std::move(value)));
  }
  return absl::OkStatus();
}

absl::Status SerializeStringTensor(absl::string_view name, const Tensor& tensor,
                                   const SerializationOptions& options,
                                   const BlobSink& sink) {
  BlobProto header = TensorHeader(name, tensor);
  TensorProto::Segment* segment = header.mutable_tensor()->mutable_segment();
  const std::string* strings = tensor.data<std::string>();
  const int64_t numel = tensor.numel();
  // Chunk boundaries first (elements while they fit in chunk_bytes, at least
  // one each), so the chunks can be emitted in key order.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::vector<size_t> inner_sizes;  // encoded bytes of each chunk's strings
  int64_t begin = 0;
  do {
    int64_t end = begin;
    size_t inner = 0;
    while (end < numel) {
      const size_t size = strings[end].size();
      if (size > static_cast<size_t>(kMaxChunkBytes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot serialize blob '", name, "': string element ", end, " has ",
            size, " bytes, more than the limit of ", kMaxChunkBytes));
      }
      const size_t encoded = LengthDelimitedSize(size);
      if (end > begin && inner + encoded > options.chunk_bytes) break;
      inner += encoded;
      ++end;
    }
    chunks.emplace_back(begin, end);
    inner_sizes.push_back(inner);
    begin = end;
  } while (begin < numel);

  for (int64_t k : ChunkKeyOrder(chunks.size())) {
    const auto [begin, end] = chunks[k];
    const size_t inner = inner_sizes[k];
    segment->set_begin(begin);
    segment->set_end(end);
    std::string value =
        StartValue(header, end > begin ? LengthDelimitedSize(inner) : 0);
    if (end > begin) {
      AppendTag(kBlobProtoTensorField, kWireLengthDelimited, &value);
      AppendVarint(inner, &value);
      for (int64_t i = begin; i < end; ++i) {
        AppendTag(kTensorProtoStringDataField, kWireLengthDelimited, &value);
        AppendVarint(strings[i].size(), &value);
        value.append(strings[i]);
      }
    }
    JG_RETURN_IF_ERROR(sink(TensorChunkKey(name, k), std::move(value)));
  }
  return absl::OkStatus();
}

absl::Status SerializeTensorUnchecked(absl::string_view name,
                                      const Tensor& tensor,
                                      const SerializationOptions& options,
                                      const BlobSink& sink) {
  if (tensor.dtype() == STRING) {
    return SerializeStringTensor(name, tensor, options, sink);
  }
  return SerializeFixedWidthTensor(name, tensor, options, sink);
}

// ---------------------------------------------------------------------------
// Tensor reading.

std::string ShapeString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::Status CheckTensorHeader(absl::string_view name, const TensorProto& proto,
                               int64_t* numel) {
  if (!IsSupportedDataType(proto.data_type())) {
    return absl::DataLossError(absl::StrCat("blob '", name,
                                            "': unsupported tensor data type ",
                                            DataTypeName(proto.data_type())));
  }
  int64_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) {
      return absl::DataLossError(absl::StrCat("blob '", name,
                                              "': invalid tensor shape ",
                                              ShapeString(proto.dims())));
    }
    n *= d;
  }
  const size_t element_size = DataTypeSize(proto.data_type());
  if (element_size > 0 && n > std::numeric_limits<int64_t>::max() /
                                  static_cast<int64_t>(element_size)) {
    return absl::DataLossError(absl::StrCat("blob '", name, "': tensor shape ",
                                            ShapeString(proto.dims()),
                                            " is too large"));
  }
  // The shape decides the allocation before any data arrives, so a damaged
  // or hostile shape must not be able to ask for more than the machine has
  // (new[] would throw and terminate the process). Strings count as their
  // std::string objects.
  static const double kPhysicalBytes =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
      static_cast<double>(::sysconf(_SC_PAGESIZE));
  const double bytes =
      static_cast<double>(n) * static_cast<double>(element_size > 0
                                                       ? element_size
                                                       : sizeof(std::string));
  if (kPhysicalBytes > 0 && bytes > kPhysicalBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "blob '", name, "': tensor shape ", ShapeString(proto.dims()),
        " needs ", bytes, " bytes, more than this machine's memory (",
        kPhysicalBytes, " bytes); the checkpoint may be damaged"));
  }
  *numel = n;
  return absl::OkStatus();
}

// True if any Caffe2-style numeric element field is set (string_data is
// passed separately, as views).
bool HasNumericFields(const TensorProto& proto) {
  return proto.float_data_size() > 0 || proto.int32_data_size() > 0 ||
         proto.int64_data_size() > 0 || proto.double_data_size() > 0 ||
         !proto.byte_data().empty();
}

absl::Status CountMismatch(absl::string_view name, int64_t begin, int64_t end,
                           absl::string_view field, int64_t got) {
  return absl::DataLossError(
      absl::StrCat("blob '", name, "': segment [", begin, ", ", end, ") needs ",
                   end - begin, " elements but ", field, " holds ", got));
}

// Copies Caffe2-style per-type element field `values` into `out`, narrowing
// to T with a range check.
template <typename T, typename Repeated>
absl::Status CopyElementField(absl::string_view name, int64_t begin,
                              int64_t end, absl::string_view field,
                              const Repeated& values, T* out) {
  if (values.size() != end - begin) {
    return CountMismatch(name, begin, end, field, values.size());
  }
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_same_v<T, bool>) {
      if (v != 0 && v != 1) {
        return absl::DataLossError(absl::StrCat(
            "blob '", name, "': bool element ", begin + i, " is ", v));
      }
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      if (v < 0 || v > 255) {
        return absl::DataLossError(absl::StrCat(
            "blob '", name, "': uint8 element ", begin + i, " is ", v));
      }
    }
    out[i] = static_cast<T>(v);
  }
  return absl::OkStatus();
}

// Fills elements [begin, end) of `tensor` (whose dtype is proto's) from one
// piece: `proto` holds the non-bulk fields, `raw_data` and `string_data` the
// bulk data (views into the serialized value, or into a parsed proto).
absl::Status FillTensorSlice(absl::string_view name, const TensorProto& proto,
                             const std::optional<absl::string_view>& raw_data,
                             const std::vector<absl::string_view>& string_data,
                             int64_t begin, int64_t end, Tensor* tensor) {
  const int64_t n = end - begin;
  const DataType dtype = tensor->dtype();
  if (dtype == STRING) {
    if (raw_data.has_value() || HasNumericFields(proto)) {
      return absl::DataLossError(absl::StrCat(
          "blob '", name, "': a string tensor piece holds non-string data"));
    }
    if (string_data.size() != static_cast<size_t>(n)) {
      return CountMismatch(name, begin, end, "string_data", string_data.size());
    }
    std::string* out = tensor->mutable_data<std::string>() + begin;
    for (int64_t i = 0; i < n; ++i) {
      out[i].assign(string_data[i].data(), string_data[i].size());
    }
    return absl::OkStatus();
  }
  if (!string_data.empty()) {
    return absl::DataLossError(absl::StrCat("blob '", name, "': a ",
                                            DataTypeName(dtype),
                                            " tensor piece holds string_data"));
  }
  const size_t element_size = DataTypeSize(dtype);
  char* out = n > 0 ? static_cast<char*>(tensor->raw_mutable_data()) +
                          begin * element_size
                    : nullptr;
  if (raw_data.has_value()) {
    const absl::string_view raw = *raw_data;
    if (HasNumericFields(proto)) {
      return absl::DataLossError(
          absl::StrCat("blob '", name,
                       "': a tensor piece holds both raw_data and "
                       "per-type element fields"));
    }
    if (raw.size() != static_cast<size_t>(n) * element_size) {
      return absl::DataLossError(absl::StrCat(
          "blob '", name, "': segment [", begin, ", ", end, ") of ",
          DataTypeName(dtype), " needs ", n * element_size,
          " bytes of raw_data, got ", raw.size()));
    }
    if (dtype == BOOL) {
      for (size_t i = 0; i < raw.size(); ++i) {
        if (static_cast<uint8_t>(raw[i]) > 1) {
          return absl::DataLossError(absl::StrCat(
              "blob '", name, "': bool element ", begin + i, " has byte value ",
              static_cast<int>(static_cast<uint8_t>(raw[i]))));
        }
      }
    }
    if (n > 0) std::memcpy(out, raw.data(), raw.size());  // the one copy
    return absl::OkStatus();
  }
  // Caffe2's per-type fields.
  if (n == 0) return absl::OkStatus();
  switch (dtype) {
    case FLOAT:
      return CopyElementField(name, begin, end, "float_data",
                              proto.float_data(),
                              reinterpret_cast<float*>(out));
    case DOUBLE:
      return CopyElementField(name, begin, end, "double_data",
                              proto.double_data(),
                              reinterpret_cast<double*>(out));
    case INT32:
      return CopyElementField(name, begin, end, "int32_data",
                              proto.int32_data(),
                              reinterpret_cast<int32_t*>(out));
    case INT64:
      return CopyElementField(name, begin, end, "int64_data",
                              proto.int64_data(),
                              reinterpret_cast<int64_t*>(out));
    case BOOL:
      return CopyElementField(name, begin, end, "int32_data",
                              proto.int32_data(), reinterpret_cast<bool*>(out));
    case UINT8:
      return CopyElementField(name, begin, end, "int32_data",
                              proto.int32_data(),
                              reinterpret_cast<uint8_t*>(out));
    default:
      break;
  }
  LOG(FATAL) << "unhandled data type " << DataTypeName(dtype);
  return absl::InternalError("unreachable");
}

// A whole tensor from a parsed proto whose segment is absent or covers it.
absl::StatusOr<Tensor> TensorFromProto(absl::string_view name,
                                       const TensorProto& proto) {
  int64_t numel = 0;
  JG_RETURN_IF_ERROR(CheckTensorHeader(name, proto, &numel));
  if (proto.has_segment() &&
      (proto.segment().begin() != 0 || proto.segment().end() != numel)) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': expected the whole tensor of ", numel,
                     " elements, got segment [", proto.segment().begin(), ", ",
                     proto.segment().end(), ")"));
  }
  std::optional<absl::string_view> raw_data;
  if (!proto.raw_data().empty()) raw_data = proto.raw_data();
  std::vector<absl::string_view> string_data(proto.string_data().begin(),
                                             proto.string_data().end());
  Tensor tensor = Tensor::Uninitialized(
      proto.data_type(),
      std::vector<int64_t>(proto.dims().begin(), proto.dims().end()));
  JG_RETURN_IF_ERROR(
      FillTensorSlice(name, proto, raw_data, string_data, 0, numel, &tensor));
  return tensor;
}

// ---------------------------------------------------------------------------
// Built-in serializers.

class TensorSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override {
    return std::string(kTensorTypeName);
  }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    return SerializeTensorUnchecked(name, blob.Get<Tensor>(), options, sink);
  }
  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(Tensor tensor,
                        TensorFromProto(proto.name(), proto.tensor()));
    target->Reset(std::make_unique<Tensor>(std::move(tensor)));
    return absl::OkStatus();
  }
};

class StringSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override {
    return std::string(kStringTypeName);
  }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const std::string& content = blob.Get<std::string>();
    if (content.size() > static_cast<size_t>(kMaxChunkBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot serialize blob '", name, "': a string of ", content.size(),
          " bytes is over the limit of ", kMaxChunkBytes));
    }
    BlobProto proto;
    proto.set_name(std::string(name));
    proto.set_type(type_name());
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
  std::string type_name() const override {
    return std::string(kCounterTypeName);
  }
  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const int64_t count = blob.Get<Counter>().Retrieve();
    BlobProto proto;
    proto.set_name(std::string(name));
    proto.set_type(type_name());
    TensorProto* tensor = proto.mutable_tensor();
    tensor->add_dims(1);
    tensor->set_data_type(INT64);
    tensor->set_raw_data(&count, sizeof(count));
    return sink(std::string(name), proto.SerializeAsString());
  }
  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(Tensor tensor,
                        TensorFromProto(proto.name(), proto.tensor()));
    if (tensor.dtype() != INT64 || tensor.shape() != std::vector<int64_t>{1}) {
      return absl::DataLossError(absl::StrCat(
          "blob '", proto.name(),
          "': a counter must be stored as int64[1], "
          "got ",
          DataTypeName(tensor.dtype()), ShapeString(tensor.shape())));
    }
    target->Reset(std::make_unique<Counter>(tensor.scalar<int64_t>()));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_SERIALIZER(Tensor, TensorSerializer);
JG_REGISTER_BLOB_SERIALIZER(std::string, StringSerializer);
JG_REGISTER_BLOB_SERIALIZER(Counter, CounterSerializer);

// ---------------------------------------------------------------------------
// Scanning.

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
      return in->ReadVarint32(&length) && length <= INT_MAX &&
             in->Skip(static_cast<int>(length));
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
  if (!in->ReadVarint32(&length) || length > INT_MAX ||
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
      if (!in.ReadVarint32(&length) || length > INT_MAX ||
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

}  // namespace

// ---------------------------------------------------------------------------
// Internals.

namespace serialization_internal {

int64_t ElementsPerChunk(size_t element_size, int64_t chunk_bytes) {
  CHECK_GT(element_size, 0u);
  CHECK_GT(chunk_bytes, 0);
  return std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(element_size));
}

std::vector<std::pair<int64_t, int64_t>> FixedWidthChunks(int64_t numel,
                                                          size_t element_size,
                                                          int64_t chunk_bytes) {
  const int64_t per_chunk = ElementsPerChunk(element_size, chunk_bytes);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t begin = 0;
  do {
    const int64_t end = begin + std::min(per_chunk, numel - begin);
    chunks.emplace_back(begin, end);
    begin = end;
  } while (begin < numel);
  return chunks;
}

absl::Status ScanBlobProto(absl::string_view value, ScannedBlobProto* out) {
  out->header.Clear();
  out->raw_data.reset();
  out->string_data.clear();
  if (value.size() > static_cast<size_t>(INT_MAX) ||
      !ScanBlobProtoFields(value, out)) {
    return absl::DataLossError(absl::StrCat("a value of ", value.size(),
                                            " bytes is not a valid BlobProto"));
  }
  return absl::OkStatus();
}

}  // namespace serialization_internal

// ---------------------------------------------------------------------------
// Registry and keys.

absl::Status RegisterBlobSerializer(
    std::type_index type, std::unique_ptr<BlobSerializer> serializer) {
  CHECK(serializer != nullptr);
  Registry& registry = GetRegistry();
  const std::string name = serializer->type_name();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (registry.by_type.count(type) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("a blob serializer for C++ type ", Blob::TypeNameOf(type),
                     " is already registered"));
  }
  if (registry.by_name.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a blob serializer for type name '", name, "' is already registered"));
  }
  const BlobSerializer* raw = serializer.release();  // never destroyed
  registry.by_type.emplace(type, raw);
  registry.by_name.emplace(name, raw);
  return absl::OkStatus();
}

const BlobSerializer* FindBlobSerializer(std::type_index type) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.by_type.find(type);
  return it == registry.by_type.end() ? nullptr : it->second;
}

const BlobSerializer* FindBlobSerializer(absl::string_view type_name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.by_name.find(type_name);
  return it == registry.by_name.end() ? nullptr : it->second;
}

std::string TensorChunkKey(absl::string_view name, int64_t chunk) {
  return absl::StrCat(name, kChunkSeparator, chunk);
}

absl::StatusOr<BlobKey> ParseBlobKey(absl::string_view key) {
  const size_t pos = key.find(kChunkSeparator);
  if (pos == absl::string_view::npos) {
    if (key.empty()) return absl::InvalidArgumentError("empty database key");
    return BlobKey{std::string(key), std::nullopt};
  }
  const absl::string_view name = key.substr(0, pos);
  const absl::string_view index = key.substr(pos + kChunkSeparator.size());
  int64_t chunk = 0;
  const bool canonical =
      !index.empty() && (index.size() == 1 || index[0] != '0') &&
      std::all_of(index.begin(), index.end(),
                  [](char c) { return absl::ascii_isdigit(c); }) &&
      absl::SimpleAtoi(index, &chunk);
  if (name.empty() || !canonical) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed database key '", key,
                     "': expected '<blob>' or '<blob>#%<chunk index>'"));
  }
  return BlobKey{std::string(name), chunk};
}

// ---------------------------------------------------------------------------
// Serialization entry points.

absl::Status SerializeBlob(absl::string_view name, const Blob& blob,
                           const SerializationOptions& options,
                           const BlobSink& sink) {
  JG_RETURN_IF_ERROR(CheckName(name));
  JG_RETURN_IF_ERROR(CheckOptions(name, options));
  if (!blob.IsInitialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("blob '", name,
                     "' is uninitialized, so there is nothing to "
                     "serialize"));
  }
  const BlobSerializer* serializer = FindBlobSerializer(blob.type());
  if (serializer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", name, "' holds ", blob.TypeName(),
        ", which has no registered serializer; only blobs of types with a "
        "serializer (JG_REGISTER_BLOB_SERIALIZER) can be checkpointed"));
  }
  return serializer->Serialize(name, blob, options, sink);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SerializeBlobToPairs(absl::string_view name, const Blob& blob,
                     const SerializationOptions& options) {
  std::vector<std::pair<std::string, std::string>> pairs;
  JG_RETURN_IF_ERROR(SerializeBlob(
      name, blob, options, [&pairs](std::string key, std::string value) {
        pairs.emplace_back(std::move(key), std::move(value));
        return absl::OkStatus();
      }));
  return pairs;
}

absl::Status SerializeTensor(absl::string_view name, const Tensor& tensor,
                             const SerializationOptions& options,
                             const BlobSink& sink) {
  JG_RETURN_IF_ERROR(CheckName(name));
  JG_RETURN_IF_ERROR(CheckOptions(name, options));
  return SerializeTensorUnchecked(name, tensor, options, sink);
}

// ---------------------------------------------------------------------------
// BlobAssembler.

absl::Status BlobAssembler::Add(absl::string_view name, absl::string_view value,
                                Blob* target) {
  CHECK(target != nullptr);
  ScannedBlobProto scanned;
  if (absl::Status s = ScanBlobProto(value, &scanned); !s.ok()) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': ", s.message()));
  }
  const bool is_tensor = scanned.header.type() == kTensorTypeName;

  auto it = blobs_.find(name);
  const bool first = it == blobs_.end();
  if (first) {
    it = blobs_.emplace(std::string(name), State()).first;
    it->second.target = target;
    it->second.is_tensor = is_tensor;
    target->Reset();
  } else {
    CHECK_EQ(it->second.target, target)
        << "pieces of blob '" << name << "' sent to two different targets";
  }
  State& state = it->second;
  if (state.is_tensor != is_tensor) {
    return absl::DataLossError(
        absl::StrCat("blob '", name, "': a piece of type '",
                     scanned.header.type(), "' after pieces of another type"));
  }
  if (is_tensor) {
    return AddTensorPiece(name, scanned, first, &state);
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
  JG_RETURN_IF_ERROR(serializer->Deserialize(proto, target));
  state.complete = true;
  ++num_complete_;
  return absl::OkStatus();
}

absl::Status BlobAssembler::AddTensorPiece(
    absl::string_view name,
    const serialization_internal::ScannedBlobProto& piece, bool first,
    State* state) {
  const TensorProto& proto = piece.header.tensor();
  if (first) {
    JG_RETURN_IF_ERROR(CheckTensorHeader(name, proto, &state->numel));
    state->dims.assign(proto.dims().begin(), proto.dims().end());
    state->data_type = proto.data_type();
    state->target->Reset(std::make_unique<Tensor>(
        Tensor::Uninitialized(state->data_type, state->dims)));
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
  state->segments.emplace(begin, end);
  state->received += end - begin;
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
  return names;
}

absl::Status BlobAssembler::Finish() const {
  const int incomplete = static_cast<int>(blobs_.size()) - num_complete_;
  for (const auto& [name, state] : blobs_) {
    if (state.complete) continue;
    std::string message =
        state.is_tensor
            ? absl::StrCat("blob '", name, "' is incomplete: got ",
                           state.received, " of ", state.numel, " elements")
            : absl::StrCat("blob '", name,
                           "' is incomplete: its value could not be read");
    if (incomplete > 1) {
      absl::StrAppend(&message, " (and ", incomplete - 1,
                      " more incomplete blobs)");
    }
    return absl::DataLossError(message);
  }
  return absl::OkStatus();
}

absl::Status DeserializeBlob(absl::string_view name, absl::string_view value,
                             Blob* target) {
  BlobAssembler assembler;
  JG_RETURN_IF_ERROR(assembler.Add(name, value, target));
  return assembler.Finish();
}

}  // namespace jobgraph

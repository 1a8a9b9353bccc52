#include "engine/tensor_reader.h"

#include <unistd.h>

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "engine/wire_format.h"  // for its little-endian host check
#include "glog/logging.h"

namespace jobgraph {
namespace serialization_internal {
namespace {

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

}  // namespace

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

absl::Status CheckShapeFitsBytes(absl::string_view name,
                                 const TensorProto& proto, int64_t numel,
                                 int64_t blob_bytes) {
  if (blob_bytes == -1) return absl::OkStatus();  // unknown
  // The fewest bytes an element takes on the wire: a varint of a per-type
  // field, or a string's tag and length.
  const int64_t per_element = proto.data_type() == STRING ? 2 : 1;
  if (numel <= blob_bytes / per_element) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "blob '", name, "': its shape ", ShapeString(proto.dims()), " declares ",
      numel, " ", DataTypeName(proto.data_type()),
      " elements, more than its values' ", blob_bytes, " bytes can hold"));
}

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

absl::StatusOr<Tensor> TensorFromProto(absl::string_view name,
                                       const TensorProto& proto) {
  int64_t numel = 0;
  JG_RETURN_IF_ERROR(CheckTensorHeader(name, proto, &numel));
  JG_RETURN_IF_ERROR(CheckShapeFitsBytes(
      name, proto, numel, static_cast<int64_t>(proto.ByteSizeLong())));
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

}  // namespace serialization_internal
}  // namespace jobgraph

// Reading tensors out of TensorProtos: checking a stored shape before
// anything is allocated for it, and filling elements from one piece, whether
// it holds jobgraph's raw_data / string_data or Caffe2's per-type fields
// (float_data, int32_data, ...). Errors name the blob and are DataLoss unless
// said otherwise: a value that does not parse as a tensor is damage.
//
// Internal to the serialization library (package-private target). The
// functions keep no state; the caller owns the target tensor.

#ifndef JOBGRAPH_ENGINE_TENSOR_READER_H_
#define JOBGRAPH_ENGINE_TENSOR_READER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace serialization_internal {

// Checks the data type and dims of a piece of blob `name` and sets `*numel`
// to the number of elements they describe. ResourceExhausted if holding them
// would take more than this machine's memory.
absl::Status CheckTensorHeader(absl::string_view name, const TensorProto& proto,
                               int64_t* numel);

// DataLoss if `numel` elements of proto's data type cannot fit in
// `blob_bytes` bytes of values (at least 1 byte per fixed-width element, 2
// per string), checked before the tensor is allocated; OK when `blob_bytes`
// is -1 (unknown).
absl::Status CheckShapeFitsBytes(absl::string_view name,
                                 const TensorProto& proto, int64_t numel,
                                 int64_t blob_bytes);

// Fills elements [begin, end) of `tensor` (whose dtype is proto's) from one
// piece: `proto` holds the non-bulk fields, `raw_data` and `string_data` the
// bulk data (views into the serialized value, or into a parsed proto). A
// call that writes takes the elements through a mutable accessor, so that
// after the last piece the tensor's write generation is one that no reader
// saw before it.
absl::Status FillTensorSlice(absl::string_view name, const TensorProto& proto,
                             const std::optional<absl::string_view>& raw_data,
                             const std::vector<absl::string_view>& string_data,
                             int64_t begin, int64_t end, Tensor* tensor);

// A whole tensor from a parsed proto whose segment is absent or covers it.
absl::StatusOr<Tensor> TensorFromProto(absl::string_view name,
                                       const TensorProto& proto);

}  // namespace serialization_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_TENSOR_READER_H_

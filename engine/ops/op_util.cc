#include "engine/ops/op_util.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jobgraph {
namespace ops_internal {
namespace {

std::string CountRange(int min, int max) {
  if (min == max) return absl::StrCat(min);
  return absl::StrCat(min, " to ", max);
}

}  // namespace

absl::Status CheckNumInputs(const OperatorBase& op, int min, int max) {
  if (op.InputSize() >= min && op.InputSize() <= max) return absl::OkStatus();
  return op.Error(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("expects ", CountRange(min, max),
                               " input(s), got ", op.InputSize()));
}

absl::Status CheckNumOutputs(const OperatorBase& op, int min, int max) {
  if (op.OutputSize() >= min && op.OutputSize() <= max) {
    return absl::OkStatus();
  }
  return op.Error(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("expects ", CountRange(min, max),
                               " output(s), got ", op.OutputSize()));
}

void PrepareOutput(Tensor* out, DataType dtype,
                   absl::Span<const int64_t> shape) {
  if (HasTypeAndShape(*out, dtype, shape)) return;
  // Copy the shape before assigning: it may live inside *out.
  std::vector<int64_t> new_shape(shape.begin(), shape.end());
  *out = Tensor::Uninitialized(dtype, std::move(new_shape));
}

void CopyTensor(const Tensor& src, Tensor* dst) {
  if (&src == dst) return;
  if (!HasTypeAndShape(*dst, src.dtype(), src.shape())) {
    *dst = src;
    return;
  }
  if (src.dtype() == STRING) {
    std::copy_n(src.data<std::string>(), src.numel(),
                dst->mutable_data<std::string>());
  } else if (src.nbytes() > 0) {
    std::memcpy(dst->raw_mutable_data(), src.raw_data(), src.nbytes());
  }
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::StatusOr<Broadcast> BroadcastShapes(const OperatorBase& op,
                                          const Tensor& a, const Tensor& b) {
  Broadcast bc;
  if (a.shape() == b.shape()) {
    bc.shape = a.shape();
  } else if (b.numel() == 1 && (a.numel() != 1 || a.ndim() >= b.ndim())) {
    bc.b_is_scalar = true;
    bc.shape = a.shape();
  } else if (a.numel() == 1) {
    bc.a_is_scalar = true;
    bc.shape = b.shape();
  } else {
    return op.Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("shapes ", ShapeString(a.shape()), " of '",
                     op.InputName(0), "' and ", ShapeString(b.shape()), " of '",
                     op.InputName(1),
                     "' do not match, and neither has a single element to "
                     "broadcast"));
  }
  return bc;
}

absl::Status CheckSameType(const OperatorBase& op, const Tensor& a,
                           const Tensor& b) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return op.Error(
      absl::StatusCode::kInvalidArgument,
      absl::StrCat("inputs must have the same type, but '", op.InputName(0),
                   "' is ", DataTypeName(a.dtype()), " and '", op.InputName(1),
                   "' is ", DataTypeName(b.dtype())));
}

}  // namespace ops_internal
}  // namespace jobgraph

#include "engine/ops/elementwise.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace ops_internal {

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

absl::StatusOr<SameTypeOperands> GetSameTypeOperands(const OperatorBase& op) {
  SameTypeOperands operands;
  JG_ASSIGN_OR_RETURN(operands.a, op.Input(0));
  JG_ASSIGN_OR_RETURN(operands.b, op.Input(1));
  JG_RETURN_IF_ERROR(CheckSameType(op, *operands.a, *operands.b));
  JG_ASSIGN_OR_RETURN(operands.bc,
                      BroadcastShapes(op, *operands.a, *operands.b));
  return operands;
}

}  // namespace ops_internal
}  // namespace jobgraph

// Boolean logic: And, Or (a, b -> c, with the scalar broadcasting of
// elementwise.h) and Not (a -> b), on bool tensors only. Or(stop, b -> stop) is
// how NetBuilder.stop_if accumulates its stop blob, so the output may be an
// input.

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/operator.h"
#include "engine/ops/elementwise.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace {

using ops_internal::ApplyBinary;
using ops_internal::Broadcast;

// InvalidArgument naming input `i` unless `t` is a bool tensor.
absl::Status CheckBool(const OperatorBase& op, int i, const Tensor& t) {
  if (t.dtype() == BOOL) return absl::OkStatus();
  return op.Error(
      absl::StatusCode::kInvalidArgument,
      absl::StrCat("input '", op.InputName(i), "' is ", DataTypeName(t.dtype()),
                   "; ", op.type(), " takes bool tensors"));
}

struct AndFn {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrFn {
  bool operator()(bool a, bool b) const { return a || b; }
};

template <typename Fn>
class BinaryLogicOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(2, 2, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* a, Input(0));
    JG_ASSIGN_OR_RETURN(const Tensor* b, Input(1));
    JG_RETURN_IF_ERROR(CheckBool(*this, 0, *a));
    JG_RETURN_IF_ERROR(CheckBool(*this, 1, *b));
    JG_ASSIGN_OR_RETURN(const Broadcast bc,
                        ops_internal::BroadcastShapes(*this, *a, *b));
    ApplyBinary<bool, bool>(*a, *b, bc, Output(0), Fn());
    return absl::OkStatus();
  }
};

JG_REGISTER_OPERATOR(And, BinaryLogicOp<AndFn>);
JG_REGISTER_OPERATOR(Or, BinaryLogicOp<OrFn>);

class NotOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* in, Input(0));
    JG_RETURN_IF_ERROR(CheckBool(*this, 0, *in));
    Tensor* out = Output(0);
    // Same type and shape, so an aliased output keeps its storage and each
    // element is read before it is overwritten.
    PrepareOutput(out, BOOL, in->shape());
    const bool* x = in->data<bool>();
    bool* y = out->mutable_data<bool>();
    for (int64_t i = 0; i < in->numel(); ++i) y[i] = !x[i];
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(Not, NotOp);

}  // namespace
}  // namespace jobgraph

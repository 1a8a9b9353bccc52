// The element-wise kernels of the binary operators (arithmetic, comparison,
// logic): numeric-type dispatch and Caffe2-style scalar broadcasting. The
// plumbing every op shares (wiring, arguments, inputs, errors, outputs) is on
// OperatorBase (engine/operator.h).
//
// Internal to //engine/ops. Stateless; every function is thread-compatible
// (callers own the tensors they pass).

#ifndef JOBGRAPH_ENGINE_OPS_ELEMENTWISE_H_
#define JOBGRAPH_ENGINE_OPS_ELEMENTWISE_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/operator.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace ops_internal {

// Calls f(T{}) for the arithmetic element types (uint8, int32, int64, float,
// double) and returns true; returns false for the others.
template <typename F>
bool DispatchArithmetic(DataType dtype, F&& f) {
  switch (dtype) {
    case UINT8:
      f(uint8_t{});
      return true;
    case INT32:
      f(int32_t{});
      return true;
    case INT64:
      f(int64_t{});
      return true;
    case FLOAT:
      f(float{});
      return true;
    case DOUBLE:
      f(double{});
      return true;
    default:
      return false;
  }
}

// How the operands of a binary op line up. Shapes that are equal combine
// element by element; otherwise an operand with one element (shape [] or
// [1], ...) is repeated against the other, whose shape the result takes.
// When both have one element the result takes the shape of more dimensions,
// as numpy would.
struct Broadcast {
  bool a_is_scalar = false;
  bool b_is_scalar = false;
  // The result's shape. It points into a's or b's shape, so it is valid
  // only while both stay unchanged.
  absl::Span<const int64_t> shape;
};

// The Broadcast for inputs 0 and 1 of `op`, or InvalidArgument naming both
// blobs and shapes.
absl::StatusOr<Broadcast> BroadcastShapes(const OperatorBase& op,
                                          const Tensor& a, const Tensor& b);

// InvalidArgument naming both blobs and types unless a and b have one dtype.
absl::Status CheckSameType(const OperatorBase& op, const Tensor& a,
                           const Tensor& b);

// The operands of a binary op whose inputs must have one dtype.
struct SameTypeOperands {
  const Tensor* a = nullptr;  // input 0
  const Tensor* b = nullptr;  // input 1
  Broadcast bc;
};

// Inputs 0 and 1 of `op` as tensors of one dtype and shapes that broadcast;
// otherwise the error of Input, CheckSameType or BroadcastShapes.
absl::StatusOr<SameTypeOperands> GetSameTypeOperands(const OperatorBase& op);

// out[i] = fn(a[i], b[i]) with `bc` applied. `out` must already have the
// result's shape and may be the same storage as a or b: element i of each is
// read before element i of out is written, and a broadcast operand is read
// once up front.
template <typename In, typename Out, typename Fn>
void BinaryKernel(const In* a, const In* b, Out* out, int64_t n,
                  const Broadcast& bc, Fn fn) {
  if (bc.a_is_scalar) {
    const In av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = fn(av, b[i]);
  } else if (bc.b_is_scalar) {
    const In bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = fn(a[i], bv);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = fn(a[i], b[i]);
  }
}

// Writes fn(a, b) element-wise into `out` as a tensor of Out. `out` may be
// the tensor a or b: when the result would need new storage (other shape or
// type), it is computed into a temporary first, so the inputs are never
// freed while they are read.
template <typename In, typename Out, typename Fn>
void ApplyBinary(const Tensor& a, const Tensor& b, const Broadcast& bc,
                 Tensor* out, Fn fn) {
  constexpr DataType kOutType = DataTypeOf<Out>::value;
  const bool aliased = out == &a || out == &b;
  if (aliased && !HasTypeAndShape(*out, kOutType, bc.shape)) {
    Tensor result = Tensor::Uninitialized(
        kOutType, std::vector<int64_t>(bc.shape.begin(), bc.shape.end()));
    BinaryKernel<In, Out>(a.data<In>(), b.data<In>(),
                          result.mutable_data<Out>(), result.numel(), bc, fn);
    *out = std::move(result);
    return;
  }
  PrepareOutput(out, kOutType, bc.shape);
  BinaryKernel<In, Out>(a.data<In>(), b.data<In>(), out->mutable_data<Out>(),
                        out->numel(), bc, fn);
}

}  // namespace ops_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_OPS_ELEMENTWISE_H_

// Element-wise arithmetic: Add, Sub, Mul, Div (a, b -> c) on uint8, int32,
// int64, float and double, with scalar broadcasting (elementwise.h). The output
// may be one of the inputs, as in Add(total, val -> total).
//
// Integer arithmetic wraps around on overflow (as numpy does) instead of being
// undefined behaviour; integer division truncates toward zero (as C++ and
// Caffe2 do) and division by zero is an error, not a crash.

#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/operator.h"
#include "engine/ops/elementwise.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace {

using ops_internal::ApplyBinary;
using ops_internal::SameTypeOperands;

// Two's-complement wrap-around for signed integers; plain arithmetic for the
// rest (uint8 promotes to int, so it cannot overflow before the narrowing).
template <typename T, bool = (std::is_integral_v<T> && std::is_signed_v<T>)>
struct Wrap {
  using type = T;
};
template <typename T>
struct Wrap<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename Wrap<T>::type;

struct AddFn {
  static constexpr const char* kName = "Add";
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapType<T>>(a) +
                          static_cast<WrapType<T>>(b));
  }
};

struct SubFn {
  static constexpr const char* kName = "Sub";
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapType<T>>(a) -
                          static_cast<WrapType<T>>(b));
  }
};

struct MulFn {
  static constexpr const char* kName = "Mul";
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapType<T>>(a) *
                          static_cast<WrapType<T>>(b));
  }
};

struct DivFn {
  static constexpr const char* kName = "Div";
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      // min / -1 overflows (and traps on x86); wrap it like the others.
      if (b == -1) return static_cast<T>(-static_cast<WrapType<T>>(a));
    }
    return static_cast<T>(a / b);
  }
};

// InvalidArgument naming the divisor blob if an integer divisor has a zero.
// Checked before anything is written, so an aliased output stays intact.
template <typename T>
absl::Status CheckNoZeroDivisor(const OperatorBase& op, const Tensor& b) {
  if constexpr (std::is_integral_v<T>) {
    const T* data = b.data<T>();
    for (int64_t i = 0; i < b.numel(); ++i) {
      if (data[i] == 0) {
        return op.Error(absl::StatusCode::kInvalidArgument,
                        absl::StrCat("integer division by zero: element ", i,
                                     " of '", op.InputName(1), "' is 0"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename Fn>
class ArithmeticOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(2, 2, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const SameTypeOperands in,
                        ops_internal::GetSameTypeOperands(*this));
    const Tensor* a = in.a;
    const Tensor* b = in.b;
    Tensor* out = Output(0);
    absl::Status status;
    const bool supported =
        ops_internal::DispatchArithmetic(a->dtype(), [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<Fn, DivFn>) {
            status = CheckNoZeroDivisor<T>(*this, *b);
            if (!status.ok()) return;
          }
          ApplyBinary<T, T>(*a, *b, in.bc, out, Fn());
        });
    if (!supported) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat(Fn::kName, " does not support ",
                                DataTypeName(a->dtype()), " tensors"));
    }
    return status;
  }
};

JG_REGISTER_OPERATOR(Add, ArithmeticOp<AddFn>);
JG_REGISTER_OPERATOR(Sub, ArithmeticOp<SubFn>);
JG_REGISTER_OPERATOR(Mul, ArithmeticOp<MulFn>);
JG_REGISTER_OPERATOR(Div, ArithmeticOp<DivFn>);

}  // namespace
}  // namespace jobgraph

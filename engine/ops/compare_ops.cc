// Comparisons LT, LE, GT, GE, EQ, NE (a, b -> bool c) with the scalar
// broadcasting of elementwise.h. The ordering comparisons take the arithmetic
// types; EQ and NE also take bool and string tensors.

#include <string>
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

struct LtFn {
  static constexpr const char* kName = "LT";
  static constexpr bool kEquality = false;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a < b;
  }
};
struct LeFn {
  static constexpr const char* kName = "LE";
  static constexpr bool kEquality = false;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a <= b;
  }
};
struct GtFn {
  static constexpr const char* kName = "GT";
  static constexpr bool kEquality = false;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a > b;
  }
};
struct GeFn {
  static constexpr const char* kName = "GE";
  static constexpr bool kEquality = false;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a >= b;
  }
};
struct EqFn {
  static constexpr const char* kName = "EQ";
  static constexpr bool kEquality = true;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a == b;
  }
};
struct NeFn {
  static constexpr const char* kName = "NE";
  static constexpr bool kEquality = true;
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a != b;
  }
};

template <typename Fn>
class CompareOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(2, 2, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const SameTypeOperands in,
                        ops_internal::GetSameTypeOperands(*this));
    const DataType dtype = in.a->dtype();
    Tensor* out = Output(0);
    const auto apply = [&](auto zero) {
      using T = decltype(zero);
      ApplyBinary<T, bool>(*in.a, *in.b, in.bc, out, Fn());
    };
    if (ops_internal::DispatchArithmetic(dtype, apply)) {
      return absl::OkStatus();
    }
    if constexpr (Fn::kEquality) {
      if (dtype == BOOL) {
        apply(bool{});
        return absl::OkStatus();
      }
      if (dtype == STRING) {
        apply(std::string{});
        return absl::OkStatus();
      }
    }
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat(Fn::kName, " does not support ",
                              DataTypeName(dtype), " tensors"));
  }
};

JG_REGISTER_OPERATOR(LT, CompareOp<LtFn>);
JG_REGISTER_OPERATOR(LE, CompareOp<LeFn>);
JG_REGISTER_OPERATOR(GT, CompareOp<GtFn>);
JG_REGISTER_OPERATOR(GE, CompareOp<GeFn>);
JG_REGISTER_OPERATOR(EQ, CompareOp<EqFn>);
JG_REGISTER_OPERATOR(NE, CompareOp<NeFn>);

}  // namespace
}  // namespace jobgraph

// Fill operators: ConstantFill and the GivenTensor*Fill family that Caffe2's
// Net.Const emits. Arguments are validated once in Init(); Run() only writes
// the output, reusing its storage, because later ops may modify the output in
// place (Add(total, val -> total)) and every run must start from the constant.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace {

// InvalidArgument unless every dimension of `shape` is >= 0; Tensor would
// CHECK-fail on a negative one.
absl::Status CheckShape(const OperatorBase& op,
                        const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return op.Error(absl::StatusCode::kInvalidArgument,
                      absl::StrCat("argument 'shape' ", ShapeString(shape),
                                   " has a negative dimension"));
    }
  }
  return absl::OkStatus();
}

// An integer argument value, range-checked for the integer type T.
template <typename T>
absl::Status CheckIntRange(const OperatorBase& op, absl::string_view what,
                           int64_t v) {
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat(what, " ", v, " does not fit in ",
                                 DataTypeName(DataTypeOf<T>::value)));
  }
  return absl::OkStatus();
}

// ConstantFill: output = `value` of `dtype`, shaped by `shape` or, given an
// input, by the input's shape.
class ConstantFillOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 1, 1, 1));
    if (GetArg<int>("input_as_shape", 0) != 0) {
      return Error(absl::StatusCode::kUnimplemented,
                   "input_as_shape=1 (shape given by the input's values) is "
                   "not supported; the output takes the input's shape");
    }
    if (InputSize() == 1 && HasArg("shape")) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "give either an input or the 'shape' argument, not both");
    }
    shape_ = GetRepeatedArg<int64_t>("shape");
    JG_RETURN_IF_ERROR(CheckShape(*this, shape_));
    const auto dtype = static_cast<DataType>(GetArg<int>("dtype", FLOAT));
    if (!IsSupportedDataType(dtype)) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("unsupported dtype ", DataTypeName(dtype)));
    }
    JG_ASSIGN_OR_RETURN(value_, MakeValue(dtype));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    // The input first: Output(0) may be the same blob and would replace a
    // non-tensor there before Input(0) could report it.
    const Tensor* in = nullptr;
    if (InputSize() == 1) {
      JG_ASSIGN_OR_RETURN(in, Input(0));
    }
    Tensor* out = Output(0);
    PrepareOutput(out, value_.dtype(), in != nullptr ? in->shape() : shape_);
    DispatchDataType(value_.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T& v = value_.data<T>()[0];
      T* data = out->mutable_data<T>();
      for (int64_t i = 0; i < out->numel(); ++i) data[i] = v;
    });
    return absl::OkStatus();
  }

 private:
  // The scalar `value` argument as a tensor of `dtype`, or InvalidArgument
  // when it is given in a field that does not fit the type.
  absl::StatusOr<Tensor> MakeValue(DataType dtype) const {
    switch (dtype) {
      case FLOAT:
        return Tensor::Scalar<float>(GetArg<float>("value", 0));
      case DOUBLE:
        return Tensor::Scalar<double>(GetArg<double>("value", 0));
      case STRING:
        return Tensor::Scalar<std::string>(GetArg<std::string>("value", ""));
      default:
        break;
    }
    JG_ASSIGN_OR_RETURN(int64_t v, IntegerValue());
    switch (dtype) {
      case BOOL:
        return Tensor::Scalar<bool>(v != 0);
      case UINT8:
        JG_RETURN_IF_ERROR(CheckIntRange<uint8_t>(*this, "value", v));
        return Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v));
      case INT32:
        JG_RETURN_IF_ERROR(CheckIntRange<int32_t>(*this, "value", v));
        return Tensor::Scalar<int32_t>(static_cast<int32_t>(v));
      case INT64:
        return Tensor::Scalar<int64_t>(v);
      default:
        LOG(FATAL) << "unhandled dtype " << DataTypeName(dtype);
    }
  }

  // `value` for an integer or bool dtype. Python callers often pass 1.0 for
  // an int fill, so an integral float is accepted; 1.5 is not.
  absl::StatusOr<int64_t> IntegerValue() const {
    for (const Argument& arg : def().arg()) {
      if (arg.name() != "value") continue;
      if (arg.has_i()) return arg.i();
      const double d = arg.has_d() ? arg.d() : arg.f();
      // Bounds just inside +-2^63, so that the cast below is defined.
      if (d != std::trunc(d) || d < -9.2e18 || d > 9.2e18) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("value ", d, " is not an integer"));
      }
      return static_cast<int64_t>(d);
    }
    return 0;
  }

  std::vector<int64_t> shape_;
  Tensor value_;  // a scalar of the output's dtype
};
JG_REGISTER_OPERATOR(ConstantFill, ConstantFillOp);

// The GivenTensor*Fill ops: output = `values`, shaped by `shape` (default
// [len(values)]). T is the element type, Arg the type `values` is read as.
template <typename T, typename Arg>
class GivenTensorFillOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    const std::vector<Arg> values = GetRepeatedArg<Arg>("values");
    // An explicit empty `shape` means a scalar (Const(5) has shape ()).
    std::vector<int64_t> shape =
        HasArg("shape")
            ? GetRepeatedArg<int64_t>("shape")
            : std::vector<int64_t>{static_cast<int64_t>(values.size())};
    JG_RETURN_IF_ERROR(CheckShape(*this, shape));
    const int64_t numel = NumElements(shape);
    if (numel != static_cast<int64_t>(values.size())) {
      return Error(
          absl::StatusCode::kInvalidArgument,
          absl::StrCat("shape ", ShapeString(shape), " holds ", numel,
                       " element(s) but 'values' has ", values.size()));
    }
    value_ = Tensor::Uninitialized(DataTypeOf<T>::value, std::move(shape));
    T* data = value_.mutable_data<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      JG_ASSIGN_OR_RETURN(data[i], Convert(values[i], i));
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    CopyTensor(value_, Output(0));
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<T> Convert(const Arg& v, size_t index) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (v != 0 && v != 1) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("values[", index, "] is ", v,
                                  "; a bool must be 0 or 1"));
      }
      return v != 0;
    } else if constexpr (std::is_same_v<Arg, int64_t> &&
                         !std::is_same_v<T, int64_t>) {
      JG_RETURN_IF_ERROR(
          CheckIntRange<T>(*this, absl::StrCat("values[", index, "]"), v));
      return static_cast<T>(v);
    } else {
      return static_cast<T>(v);
    }
  }

  Tensor value_;
};

using GivenTensorFloatFillOp = GivenTensorFillOp<float, float>;
using GivenTensorDoubleFillOp = GivenTensorFillOp<double, double>;
using GivenTensorIntFillOp = GivenTensorFillOp<int32_t, int64_t>;
using GivenTensorInt64FillOp = GivenTensorFillOp<int64_t, int64_t>;
using GivenTensorBoolFillOp = GivenTensorFillOp<bool, int64_t>;
using GivenTensorUInt8FillOp = GivenTensorFillOp<uint8_t, int64_t>;
using GivenTensorStringFillOp = GivenTensorFillOp<std::string, std::string>;

JG_REGISTER_OPERATOR(GivenTensorFill, GivenTensorFloatFillOp);
JG_REGISTER_OPERATOR(GivenTensorDoubleFill, GivenTensorDoubleFillOp);
JG_REGISTER_OPERATOR(GivenTensorIntFill, GivenTensorIntFillOp);
JG_REGISTER_OPERATOR(GivenTensorInt64Fill, GivenTensorInt64FillOp);
JG_REGISTER_OPERATOR(GivenTensorBoolFill, GivenTensorBoolFillOp);
JG_REGISTER_OPERATOR(GivenTensorUInt8Fill, GivenTensorUInt8FillOp);
JG_REGISTER_OPERATOR(GivenTensorStringFill, GivenTensorStringFillOp);

}  // namespace
}  // namespace jobgraph

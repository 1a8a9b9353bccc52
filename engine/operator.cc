#include "engine/operator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"

namespace jobgraph {

OperatorBase::OperatorBase(const OperatorDef& def, Workspace* ws)
    : def_(def), ws_(ws) {
  inputs_.reserve(def.input_size());
  for (const std::string& name : def.input()) {
    Blob* blob = ws->GetBlob(name);
    CHECK(blob != nullptr) << "input '" << name
                           << "' must be checked by OperatorRegistry::Create";
    inputs_.push_back(blob);
  }
  const std::vector<absl::string_view> names(def.output().begin(),
                                             def.output().end());
  outputs_ = ws->CreateBlobs(names);
}

namespace {

// "2", "2 to 3" or "at least 2".
std::string CountRange(int min, int max) {
  if (min == max) return absl::StrCat(min);
  if (max == OperatorBase::kUnbounded) return absl::StrCat("at least ", min);
  return absl::StrCat(min, " to ", max);
}

bool InRange(int n, int min, int max) {
  return n >= min && (max == OperatorBase::kUnbounded || n <= max);
}

// "a 2-D tensor of float" or "a tensor of float".
std::string TensorDescription(DataType dtype, int ndim) {
  return absl::StrCat(
      "a ", ndim == OperatorBase::kAnyRank ? "" : absl::StrCat(ndim, "-D "),
      "tensor of ", DataTypeName(dtype));
}

}  // namespace

absl::Status OperatorBase::CheckArity(int min_inputs, int max_inputs,
                                      int min_outputs, int max_outputs) const {
  if (!InRange(InputSize(), min_inputs, max_inputs)) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("expects ", CountRange(min_inputs, max_inputs),
                              " input(s), got ", InputSize()));
  }
  if (!InRange(OutputSize(), min_outputs, max_outputs)) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("expects ", CountRange(min_outputs, max_outputs),
                              " output(s), got ", OutputSize()));
  }
  return absl::OkStatus();
}

absl::Status OperatorBase::CheckInPlace(int output, int input) const {
  if (OutputName(output) == InputName(input)) return absl::OkStatus();
  return Error(absl::StatusCode::kInvalidArgument,
               absl::StrCat("output ", output, " ('", OutputName(output),
                            "') must be input ", input, " ('", InputName(input),
                            "'): the op updates it in place"));
}

std::string OperatorBase::WrongInputType(int i, absl::string_view what,
                                         absl::string_view creator) const {
  std::string message = absl::StrCat("input '", InputName(i), "' holds ",
                                     inputs_[i]->TypeName(), ", not a ", what);
  if (!creator.empty()) {
    absl::StrAppend(&message, " (create it with ", creator, ")");
  }
  return message;
}

absl::StatusOr<const Tensor*> OperatorBase::Input(int i) const {
  JG_ASSIGN_OR_RETURN(const Tensor* tensor, InputAs<Tensor>(i, "Tensor", ""));
  return tensor;
}

absl::StatusOr<const Tensor*> OperatorBase::Input(int i, DataType dtype,
                                                  int ndim) const {
  JG_ASSIGN_OR_RETURN(const Tensor* t, Input(i));
  if (t->dtype() != dtype || (ndim != kAnyRank && t->ndim() != ndim)) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("input '", InputName(i), "' must be ",
                              TensorDescription(dtype, ndim), ", got ",
                              t->DebugString(4)));
  }
  return t;
}

absl::StatusOr<const Tensor*> OperatorBase::ScalarInput(int i,
                                                        DataType dtype) const {
  JG_ASSIGN_OR_RETURN(const Tensor* t, Input(i));
  if (t->dtype() != dtype || t->numel() != 1) {
    return Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("input '", InputName(i),
                     "' must be a single-element tensor of ",
                     DataTypeName(dtype), ", got ", t->DebugString(4)));
  }
  return t;
}

const Argument* OperatorBase::FindArg(absl::string_view name) const {
  for (const Argument& arg : def_.arg()) {
    if (arg.name() == name) return &arg;
  }
  return nullptr;
}

bool OperatorBase::HasArg(absl::string_view name) const {
  return FindArg(name) != nullptr;
}

template <>
int64_t OperatorBase::GetArg<int64_t>(absl::string_view name,
                                      int64_t default_value) const {
  const Argument* arg = FindArg(name);
  return arg != nullptr && arg->has_i() ? arg->i() : default_value;
}

template <>
int OperatorBase::GetArg<int>(absl::string_view name, int default_value) const {
  return static_cast<int>(GetArg<int64_t>(name, default_value));
}

template <>
bool OperatorBase::GetArg<bool>(absl::string_view name,
                                bool default_value) const {
  return GetArg<int64_t>(name, default_value ? 1 : 0) != 0;
}

template <>
double OperatorBase::GetArg<double>(absl::string_view name,
                                    double default_value) const {
  const Argument* arg = FindArg(name);
  if (arg == nullptr) return default_value;
  if (arg->has_d()) return arg->d();
  if (arg->has_f()) return arg->f();
  if (arg->has_i()) return static_cast<double>(arg->i());
  return default_value;
}

template <>
float OperatorBase::GetArg<float>(absl::string_view name,
                                  float default_value) const {
  return static_cast<float>(GetArg<double>(name, default_value));
}

template <>
std::string OperatorBase::GetArg<std::string>(absl::string_view name,
                                              std::string default_value) const {
  const Argument* arg = FindArg(name);
  return arg != nullptr && arg->has_s() ? arg->s() : default_value;
}

template <>
std::vector<int64_t> OperatorBase::GetRepeatedArg<int64_t>(
    absl::string_view name) const {
  const Argument* arg = FindArg(name);
  if (arg == nullptr) return {};
  return {arg->ints().begin(), arg->ints().end()};
}

template <>
std::vector<float> OperatorBase::GetRepeatedArg<float>(
    absl::string_view name) const {
  const Argument* arg = FindArg(name);
  if (arg == nullptr) return {};
  if (arg->floats_size() > 0)
    return {arg->floats().begin(), arg->floats().end()};
  std::vector<float> out;
  for (double d : arg->doubles()) out.push_back(static_cast<float>(d));
  for (int64_t i : arg->ints()) out.push_back(static_cast<float>(i));
  return out;
}

template <>
std::vector<double> OperatorBase::GetRepeatedArg<double>(
    absl::string_view name) const {
  const Argument* arg = FindArg(name);
  if (arg == nullptr) return {};
  if (arg->doubles_size() > 0) {
    return {arg->doubles().begin(), arg->doubles().end()};
  }
  std::vector<double> out;
  for (float f : arg->floats()) out.push_back(f);
  for (int64_t i : arg->ints()) out.push_back(static_cast<double>(i));
  return out;
}

template <>
std::vector<std::string> OperatorBase::GetRepeatedArg<std::string>(
    absl::string_view name) const {
  const Argument* arg = FindArg(name);
  if (arg == nullptr) return {};
  return {arg->strings().begin(), arg->strings().end()};
}

absl::StatusOr<std::string> OperatorBase::GetRequiredStringArg(
    absl::string_view name, absl::string_view what) const {
  std::string value = GetArg<std::string>(name, "");
  if (value.empty()) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("argument '", name, "'",
                              what.empty() ? "" : absl::StrCat(" (", what, ")"),
                              " is required"));
  }
  return value;
}

template <>
absl::StatusOr<int64_t> OperatorBase::GetPositiveArg<int64_t>(
    absl::string_view name, int64_t default_value) const {
  const int64_t value = GetArg<int64_t>(name, default_value);
  if (value <= 0) {
    return Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("argument '", name, "' must be positive, got ", value));
  }
  return value;
}

template <>
absl::StatusOr<double> OperatorBase::GetPositiveArg<double>(
    absl::string_view name, double default_value) const {
  const double value = GetArg<double>(name, default_value);
  if (!(value > 0) || !std::isfinite(value)) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("argument '", name,
                              "' must be positive and finite, got ", value));
  }
  return value;
}

template <>
absl::StatusOr<int64_t> OperatorBase::GetNonNegativeArg<int64_t>(
    absl::string_view name, int64_t default_value) const {
  const int64_t value = GetArg<int64_t>(name, default_value);
  if (value < 0) {
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat(name, " must be >= 0, got ", value));
  }
  return value;
}

template <>
absl::StatusOr<double> OperatorBase::GetNonNegativeArg<double>(
    absl::string_view name, double default_value) const {
  const double value = GetArg<double>(name, default_value);
  if (!(value >= 0)) {  // NaN too
    return Error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat(name, " must be >= 0, got ", value));
  }
  return value;
}

std::string OperatorBase::Describe() const {
  return absl::StrCat(def_.type(), "(", absl::StrJoin(def_.input(), ", "),
                      " -> ", absl::StrJoin(def_.output(), ", "), ")");
}

absl::Status OperatorBase::Error(absl::StatusCode code,
                                 absl::string_view message) const {
  return absl::Status(code, absl::StrCat("op ", Describe(), ": ", message));
}

absl::Status OperatorBase::Annotate(const absl::Status& status,
                                    absl::string_view context) const {
  if (status.ok()) return status;
  if (context.empty()) return Error(status.code(), status.message());
  return Error(status.code(), absl::StrCat(context, ": ", status.message()));
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

OperatorRegistry& OperatorRegistry::Global() {
  static OperatorRegistry* registry = new OperatorRegistry;  // never destroyed
  return *registry;
}

absl::Status OperatorRegistry::Register(const std::string& type,
                                        OperatorFactory factory) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!factories_.emplace(type, std::move(factory)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("operator type '", type, "' is already registered"));
  }
  return absl::OkStatus();
}

bool OperatorRegistry::IsRegistered(absl::string_view type) const {
  std::lock_guard<std::mutex> lock(mu_);
  return factories_.find(type) != factories_.end();
}

std::vector<std::string> OperatorRegistry::Types() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> types;
  for (const auto& [type, factory] : factories_) types.push_back(type);
  return types;
}

absl::StatusOr<std::unique_ptr<OperatorBase>> OperatorRegistry::Create(
    const OperatorDef& def, Workspace* ws) const {
  OperatorFactory factory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = factories_.find(def.type());
    if (it == factories_.end()) {
      std::vector<std::string> known;
      for (const auto& [type, f] : factories_) known.push_back(type);
      return absl::NotFoundError(
          absl::StrCat("unknown operator type '", def.type(),
                       "'; known types: ", absl::StrJoin(known, ", ")));
    }
    factory = it->second;
  }
  for (const std::string& input : def.input()) {
    if (!ws->HasBlob(input)) {
      return absl::NotFoundError(absl::StrCat(
          "op ", def.type(), ": input blob '", input,
          "' does not exist in workspace '", ws->name(),
          "' (create it in an earlier net or task, e.g. the init group)"));
    }
  }
  std::unique_ptr<OperatorBase> op = factory(def, ws);
  absl::Status init = op->Init();
  if (!init.ok()) return init;
  return op;
}

}  // namespace jobgraph

#include "engine/operator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  outputs_.reserve(def.output_size());
  for (const std::string& name : def.output()) {
    outputs_.push_back(ws->CreateBlob(name));
  }
}

absl::StatusOr<const Tensor*> OperatorBase::Input(int i) const {
  const Blob* blob = inputs_[i];
  if (!blob->IsType<Tensor>()) {
    return Error(absl::StatusCode::kFailedPrecondition,
                 absl::StrCat("input '", InputName(i), "' holds ",
                              blob->TypeName(), ", not a Tensor"));
  }
  return &blob->Get<Tensor>();
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

std::string OperatorBase::Describe() const {
  return absl::StrCat(def_.type(), "(", absl::StrJoin(def_.input(), ", "),
                      " -> ", absl::StrJoin(def_.output(), ", "), ")");
}

absl::Status OperatorBase::Error(absl::StatusCode code,
                                 absl::string_view message) const {
  return absl::Status(code, absl::StrCat("op ", Describe(), ": ", message));
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

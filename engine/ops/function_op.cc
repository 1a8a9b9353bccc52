#include "engine/ops/function_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {

const std::string& FunctionContext::InputName(int i) const {
  CHECK(i >= 0 && i < InputSize())
      << "input index " << i << " of " << op_.Describe();
  return op_.InputName(i);
}

const std::string& FunctionContext::OutputName(int i) const {
  CHECK(i >= 0 && i < OutputSize())
      << "output index " << i << " of " << op_.Describe();
  return op_.OutputName(i);
}

Blob* FunctionContext::InputBlob(int i) const {
  CHECK(i >= 0 && i < InputSize())
      << "input index " << i << " of " << op_.Describe();
  return op_.InputBlob(i);
}

Blob* FunctionContext::OutputBlob(int i) const {
  CHECK(i >= 0 && i < OutputSize())
      << "output index " << i << " of " << op_.Describe();
  return op_.OutputBlob(i);
}

absl::StatusOr<const Tensor*> FunctionContext::Input(int i) const {
  const Blob* blob = InputBlob(i);
  // Not op_.Input(i): its message already names the op, and the op adds its
  // description again to whatever the callable returns.
  if (!blob->IsType<Tensor>()) {
    return absl::FailedPreconditionError(op_.WrongInputType(i, "Tensor", ""));
  }
  return &blob->Get<Tensor>();
}

Tensor* FunctionContext::Output(int i) const {
  CHECK(i >= 0 && i < OutputSize())
      << "output index " << i << " of " << op_.Describe();
  return op_.Output(i);
}

FunctionRegistry& FunctionRegistry::Global() {
  static FunctionRegistry* registry = new FunctionRegistry;  // never destroyed
  return *registry;
}

absl::Status FunctionRegistry::Register(const std::string& name,
                                        OpFunction fn) {
  if (name.empty()) {
    return absl::InvalidArgumentError("a function needs a non-empty name");
  }
  if (fn == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("function '", name, "' is empty"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!functions_.emplace(name, std::move(fn)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("function '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

bool FunctionRegistry::IsRegistered(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return functions_.find(name) != functions_.end();
}

std::vector<std::string> FunctionRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(functions_.size());
  for (const auto& [name, fn] : functions_) names.push_back(name);
  return names;
}

absl::StatusOr<OpFunction> FunctionRegistry::Get(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  std::vector<std::string> known;
  known.reserve(functions_.size());
  for (const auto& [known_name, fn] : functions_) known.push_back(known_name);
  return absl::NotFoundError(absl::StrCat(
      "no function named '", name, "' is registered; registered functions: ",
      known.empty() ? "(none)" : absl::StrJoin(known, ", ")));
}

namespace {

// Function(inputs -> outputs), arg `func`: runs the registered function.
class FunctionOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_ASSIGN_OR_RETURN(
        const std::string name,
        GetRequiredStringArg("func", "the name of a registered function"));
    absl::StatusOr<OpFunction> fn = FunctionRegistry::Global().Get(name);
    if (!fn.ok()) return Annotate(fn.status());
    fn_ = *std::move(fn);
    return absl::OkStatus();
  }

  absl::Status Run() override {
    FunctionContext context(this);
    return Annotate(fn_(context));
  }

 private:
  OpFunction fn_;
};
JG_REGISTER_OPERATOR(Function, FunctionOp);

}  // namespace
}  // namespace jobgraph

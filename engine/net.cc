#include "engine/net.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace jobgraph {

Net::Net(std::string name, std::vector<std::unique_ptr<OperatorBase>> ops)
    : name_(std::move(name)), ops_(std::move(ops)) {}

absl::StatusOr<std::unique_ptr<Net>> Net::Create(const NetDef& def,
                                                 Workspace* ws) {
  if (!def.type().empty() && def.type() != "simple") {
    return absl::InvalidArgumentError(
        absl::StrCat("net '", def.name(), "' has type '", def.type(),
                     "'; only \"simple\" (sequential) nets are supported"));
  }
  std::vector<std::unique_ptr<OperatorBase>> ops;
  ops.reserve(def.op_size());
  for (int i = 0; i < def.op_size(); ++i) {
    auto op = OperatorRegistry::Global().Create(def.op(i), ws);
    if (!op.ok()) {
      return absl::Status(op.status().code(),
                          absl::StrCat("net '", def.name(), "', op #", i, ": ",
                                       op.status().message()));
    }
    ops.push_back(*std::move(op));
  }
  return std::unique_ptr<Net>(new Net(def.name(), std::move(ops)));
}

absl::Status Net::Run() {
  for (const std::unique_ptr<OperatorBase>& op : ops_) {
    absl::Status status = op->Run();
    if (ABSL_PREDICT_FALSE(!status.ok())) {
      return absl::Status(
          status.code(), absl::StrCat("net '", name_, "': ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

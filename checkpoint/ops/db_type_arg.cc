#include "checkpoint/ops/db_type_arg.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/db/db_registry.h"

namespace jobgraph {

absl::StatusOr<std::string> GetDbTypeArg(const OperatorBase& op) {
  const std::string db_type = op.GetArg<std::string>("db_type", "");
  if (DbRegistry::Global().IsRegistered(db_type)) return db_type;
  const std::string known = absl::StrJoin(DbRegistry::Global().Types(), ", ");
  if (db_type.empty()) {
    return op.Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("argument 'db_type' is required; known types: ", known));
  }
  return op.Error(
      absl::StatusCode::kNotFound,
      absl::StrCat("unknown db_type '", db_type, "'; known types: ", known));
}

}  // namespace jobgraph

#include "engine/data/op_checks.h"

namespace jobgraph {
namespace data_internal {

absl::Status CheckArity(const OperatorBase& op, int min_inputs, int max_inputs,
                        int min_outputs, int max_outputs) {
  auto range = [](int min, int max) {
    if (min == max) return absl::StrCat(min);
    if (max < 0) return absl::StrCat("at least ", min);
    return absl::StrCat(min, " to ", max);
  };
  if (op.InputSize() < min_inputs ||
      (max_inputs >= 0 && op.InputSize() > max_inputs)) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("takes ", range(min_inputs, max_inputs),
                                 " inputs, got ", op.InputSize()));
  }
  if (op.OutputSize() < min_outputs ||
      (max_outputs >= 0 && op.OutputSize() > max_outputs)) {
    return op.Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("takes ", range(min_outputs, max_outputs),
                                 " outputs, got ", op.OutputSize()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PositiveArg(const OperatorBase& op,
                                    absl::string_view name,
                                    int64_t default_value) {
  const int64_t value = op.GetArg<int64_t>(name, default_value);
  if (value <= 0) {
    return op.Error(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("argument '", name, "' must be positive, got ", value));
  }
  return value;
}

absl::Status CursorError(const OperatorBase& op, int cursor_input,
                         const absl::Status& status) {
  if (status.ok()) return status;
  return op.Error(status.code(),
                  absl::StrCat("cursor '", op.InputName(cursor_input),
                               "': ", status.message()));
}

}  // namespace data_internal
}  // namespace jobgraph

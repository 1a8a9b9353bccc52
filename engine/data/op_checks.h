// Argument and input checks shared by the data operators.
//
// Internal to //engine/data. Stateless; thread-safe.

#ifndef JOBGRAPH_ENGINE_DATA_OP_CHECKS_H_
#define JOBGRAPH_ENGINE_DATA_OP_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/operator.h"

namespace jobgraph {
namespace data_internal {

// InvalidArgument naming the op unless its input and output counts are in
// the given ranges (the registry does not know an op's arity).
absl::Status CheckArity(const OperatorBase& op, int min_inputs, int max_inputs,
                        int min_outputs, int max_outputs);

// The positive integer argument `name` (default `default_value`), or
// InvalidArgument naming the op.
absl::StatusOr<int64_t> PositiveArg(const OperatorBase& op,
                                    absl::string_view name,
                                    int64_t default_value);

// Input i as a T (a cursor type), or FailedPrecondition naming the blob, what
// it holds, and the op that `creator` names for making one.
template <typename T>
absl::StatusOr<T*> InputOfType(const OperatorBase& op, int i,
                               absl::string_view creator) {
  Blob* blob = op.InputBlob(i);
  if (!blob->IsType<T>()) {
    return op.Error(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("input '", op.InputName(i), "' holds ", blob->TypeName(),
                     ", not a ", Blob::TypeNameOf(typeid(T)),
                     " (create it with ", creator, ")"));
  }
  return blob->GetMutable<T>();
}

// `status` with "cursor '<name>': " and the op's description in front,
// keeping its code.
absl::Status CursorError(const OperatorBase& op, int cursor_input,
                         const absl::Status& status);

}  // namespace data_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_OP_CHECKS_H_

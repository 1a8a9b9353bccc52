// The `db_type` argument that the Save, Load and DBExists operators share.
//
// Functions only; thread-safe (the registry is).

#ifndef JOBGRAPH_CHECKPOINT_OPS_DB_TYPE_ARG_H_
#define JOBGRAPH_CHECKPOINT_OPS_DB_TYPE_ARG_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/operator.h"

namespace jobgraph {

// The registered DB type that `op`'s argument 'db_type' names. An absent or
// empty argument is InvalidArgument and an unknown type NotFound, both with
// this op's description and the list of known types: a typo must never
// look like a missing checkpoint.
absl::StatusOr<std::string> GetDbTypeArg(const OperatorBase& op);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_OPS_DB_TYPE_ARG_H_

// Propagation helpers for absl::Status / absl::StatusOr.
//
// The Abseil in Debian 12 (20220623) predates ABSL_RETURN_IF_ERROR, so the
// project defines its own pair. Both evaluate their argument exactly once.
// Annotate adds the context a caller knows to a status it passes on.

#ifndef JOBGRAPH_ENGINE_STATUS_MACROS_H_
#define JOBGRAPH_ENGINE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define JG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status jg_status_ = (expr);      \
    if (!jg_status_.ok()) return jg_status_; \
  } while (false)

#define JG_STATUS_CONCAT_INNER_(a, b) a##b
#define JG_STATUS_CONCAT_(a, b) JG_STATUS_CONCAT_INNER_(a, b)

// `JG_ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of an OK StatusOr to
// `x`, or returns its status from the enclosing function.
#define JG_ASSIGN_OR_RETURN(lhs, expr)                                      \
  JG_ASSIGN_OR_RETURN_IMPL_(JG_STATUS_CONCAT_(jg_statusor_, __LINE__), lhs, \
                            expr)

#define JG_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)     \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

namespace jobgraph {

// `status` with "<what>: " before its message; OK stays OK.
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view what) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(what, ": ", status.message()));
}

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_STATUS_MACROS_H_

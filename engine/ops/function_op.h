// The Function operator and its registry: jobgraph's analogue of Caffe2's
// ops.Python. C++ code registers a named callable once; a net then runs it
// with an op of type "Function" whose `func` argument names it:
//
//   FunctionRegistry::Global().Register(
//       "upload", [](FunctionContext& ctx) -> absl::Status {
//         JG_ASSIGN_OR_RETURN(const Tensor* in, ctx.Input(0));
//         ...
//         return absl::OkStatus();
//       });
//   // op { type: "Function" input: "x" arg { name: "func" s: "upload" } }
//
// The name is resolved when the net is built, so a typo fails then. Errors
// the callable returns keep their code and get the op's description in front.
//
// The registry is thread-safe and keeps callables for the process's lifetime.
// A callable may run on several threads at once (one per task that uses it),
// so it must be thread-safe itself.

#ifndef JOBGRAPH_ENGINE_OPS_FUNCTION_OP_H_
#define JOBGRAPH_ENGINE_OPS_FUNCTION_OP_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// What a callable sees of the op that runs it: its input and output blobs
// (by index, as listed in the OperatorDef), their names, its arguments and
// its workspace. Valid only during the call. Indexes out of range are a bug
// in the callable and CHECK-fail; check InputSize()/OutputSize() first when
// the net may wire the op differently.
class FunctionContext {
 public:
  explicit FunctionContext(const OperatorBase* op) : op_(*op) {}

  int InputSize() const { return op_.InputSize(); }
  int OutputSize() const { return op_.OutputSize(); }
  const std::string& InputName(int i) const;
  const std::string& OutputName(int i) const;
  Blob* InputBlob(int i) const;
  Blob* OutputBlob(int i) const;
  // Input i as a tensor, or FailedPrecondition naming the blob (the op adds
  // its own description when the callable returns the error).
  absl::StatusOr<const Tensor*> Input(int i) const;
  // Output i as a tensor (the blob is made to hold one).
  Tensor* Output(int i) const;

  // The workspace the op runs in (a task's child workspace for PRIVATE
  // tasks; lookups fall through to the node's root workspace).
  Workspace* workspace() const { return op_.workspace(); }
  // The op's definition, for arguments beyond `func`.
  const OperatorDef& def() const { return op_.def(); }
  template <typename T>
  T GetArg(absl::string_view name, T default_value) const {
    return op_.GetArg<T>(name, std::move(default_value));
  }

 private:
  const OperatorBase& op_;
};

using OpFunction = std::function<absl::Status(FunctionContext&)>;

class FunctionRegistry {
 public:
  // The process-wide registry that Function ops look names up in.
  static FunctionRegistry& Global();

  // AlreadyExists if `name` is taken; InvalidArgument for an empty name or
  // function.
  absl::Status Register(const std::string& name, OpFunction fn);
  bool IsRegistered(absl::string_view name) const;
  // Registered names, sorted.
  std::vector<std::string> Names() const;
  // The function named `name`, or NotFound listing the registered names.
  absl::StatusOr<OpFunction> Get(absl::string_view name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, OpFunction, std::less<>> functions_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_OPS_FUNCTION_OP_H_

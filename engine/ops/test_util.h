// Helpers for operator tests: OperatorDef builders and one-shot runners.
//
// Test-only. Stateless apart from the workspaces the caller passes.

#ifndef JOBGRAPH_ENGINE_OPS_TEST_UTIL_H_
#define JOBGRAPH_ENGINE_OPS_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/operator.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace ops_test {

Argument IntArg(absl::string_view name, int64_t value);
Argument FloatArg(absl::string_view name, float value);
Argument DoubleArg(absl::string_view name, double value);
Argument StringArg(absl::string_view name, absl::string_view value);
Argument IntsArg(absl::string_view name, const std::vector<int64_t>& values);
Argument FloatsArg(absl::string_view name, const std::vector<float>& values);
Argument DoublesArg(absl::string_view name, const std::vector<double>& values);
Argument StringsArg(absl::string_view name,
                    const std::vector<std::string>& values);

// An op that is never registered, only constructed, to give the helpers under
// test an OperatorBase for their messages.
class NoOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override { return absl::OkStatus(); }
};

OperatorDef MakeOp(absl::string_view type,
                   const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs,
                   const std::vector<Argument>& args = {});

// Builds `def` in `ws` through the global registry.
absl::StatusOr<std::unique_ptr<OperatorBase>> CreateOp(const OperatorDef& def,
                                                       Workspace* ws);
// Builds `def` in `ws` and runs it once.
absl::Status RunOp(const OperatorDef& def, Workspace* ws);

// The tensor in blob `name`; fails the test (and returns an empty tensor)
// when there is none.
const Tensor& TensorOf(const Workspace& ws, absl::string_view name);

// The elements of `t` as a vector, for EXPECT_EQ / ElementsAre.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  absl::Span<const T> v = t.values<T>();
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace ops_test
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_OPS_TEST_UTIL_H_

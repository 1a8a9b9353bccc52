// Net: a sequence of operators, built from a NetDef against one workspace and
// run in order.
//
// Building a net builds its operators, so inputs must exist and outputs are
// created then. A net belongs to the workspace it was built in and is used by
// one thread at a time.

#ifndef JOBGRAPH_ENGINE_NET_H_
#define JOBGRAPH_ENGINE_NET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/operator.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class Net {
 public:
  // Builds every operator of `def` in `ws` (borrowed; must outlive the net).
  // Errors name the net and the failing op.
  static absl::StatusOr<std::unique_ptr<Net>> Create(const NetDef& def,
                                                     Workspace* ws);

  // Runs the operators in order and stops at the first error, which names
  // the net and the op.
  absl::Status Run();

  const std::string& name() const { return name_; }
  size_t size() const { return ops_.size(); }

 private:
  Net(std::string name, std::vector<std::unique_ptr<OperatorBase>> ops);

  const std::string name_;
  const std::vector<std::unique_ptr<OperatorBase>> ops_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_NET_H_

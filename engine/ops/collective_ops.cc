// Collective operators over the nodes of a TaskGroup run (collectives.h):
//
//   Allreduce (x -> y)  y = the sum of x over every node, added in node order
//                       (float, double, int32, int64; same shape everywhere);
//   Broadcast (x -> y)  y = x of node `root` (argument; default: the group's
//                       first node), any dtype;
//   Barrier ()          returns once every node has reached it.
//
// Every node of the group must run the same collective operators in the same
// order. They work the same under LocalSession and MpiSession.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/collectives.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace jobgraph {
namespace {

// The node an op runs on: the name of its root workspace.
const std::string& NodeOf(const Workspace* ws) {
  while (ws->parent() != nullptr) ws = ws->parent();
  return ws->name();
}

class CollectiveOp : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

 protected:
  // This node's part of the round; every node's bytes in node order.
  absl::StatusOr<std::vector<std::string>> Exchange(std::string bytes) {
    Collectives* collectives = workspace()->collectives();
    if (collectives == nullptr) {
      return Error(absl::StatusCode::kFailedPrecondition,
                   "runs only inside a session's Run of a task group");
    }
    absl::StatusOr<std::vector<std::string>> all = collectives->Exchange(
        NodeOf(workspace()), Describe(), std::move(bytes));
    if (!all.ok()) return Annotate(all.status());
    return all;
  }

  const std::vector<std::string>& Participants() const {
    return workspace()->collectives()->participants();
  }
};

template <typename T>
void AddInto(const Tensor& x, Tensor* sum) {
  const T* in = x.data<T>();
  T* out = sum->mutable_data<T>();
  for (int64_t i = 0; i < sum->numel(); ++i) out[i] += in[i];
}

class AllreduceOp final : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* x, Input(0));
    const DataType dtype = x->dtype();
    if (dtype != FLOAT && dtype != DOUBLE && dtype != INT32 && dtype != INT64) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("sums float, double, int32 or int64 tensors; "
                                "input '",
                                InputName(0), "' is ", x->DebugString(4)));
    }
    JG_ASSIGN_OR_RETURN(std::string mine, EncodeTensor(*x));
    JG_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        Exchange(std::move(mine)));
    Tensor sum;
    for (size_t i = 0; i < all.size(); ++i) {
      absl::StatusOr<Tensor> t = DecodeTensor(all[i]);
      if (!t.ok()) return Annotate(t.status());
      if (t->dtype() != dtype || t->shape() != x->shape()) {
        return Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat("input '", InputName(0), "' is ", x->DebugString(4),
                         " on node '", NodeOf(workspace()), "' but ",
                         t->DebugString(4), " on node '", Participants()[i],
                         "'; every node must give the same dtype "
                         "and shape"));
      }
      if (i == 0) {
        sum = *std::move(t);
        continue;
      }
      switch (dtype) {
        case FLOAT:
          AddInto<float>(*t, &sum);
          break;
        case DOUBLE:
          AddInto<double>(*t, &sum);
          break;
        case INT32:
          AddInto<int32_t>(*t, &sum);
          break;
        default:
          AddInto<int64_t>(*t, &sum);
          break;
      }
    }
    *Output(0) = std::move(sum);
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(Allreduce, AllreduceOp);

class BroadcastOp final : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  absl::Status Init() override {
    root_ = GetArg<std::string>("root", "");
    return CheckArity(1, 1, 1, 1);
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* x, Input(0));
    const std::vector<std::string>& nodes = Participants();
    const std::string root = root_.empty() ? nodes.front() : root_;
    size_t root_index = nodes.size();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i] == root) root_index = i;
    }
    if (root_index == nodes.size()) {
      return Error(
          absl::StatusCode::kInvalidArgument,
          absl::StrCat("root node '", root, "' runs no task in this group"));
    }
    std::string mine;
    if (NodeOf(workspace()) == root) {
      JG_ASSIGN_OR_RETURN(mine, EncodeTensor(*x));
    }
    JG_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        Exchange(std::move(mine)));
    absl::StatusOr<Tensor> value = DecodeTensor(all[root_index]);
    if (!value.ok()) return Annotate(value.status());
    *Output(0) = *std::move(value);
    return absl::OkStatus();
  }

 private:
  std::string root_;
};
JG_REGISTER_OPERATOR(Broadcast, BroadcastOp);

class BarrierOp final : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  absl::Status Init() override { return CheckArity(0, 0, 0, 0); }

  absl::Status Run() override { return Exchange("").status(); }
};
JG_REGISTER_OPERATOR(Barrier, BarrierOp);

}  // namespace
}  // namespace jobgraph

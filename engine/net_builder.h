// NetBuilder: the C++ builder API that turns operator calls into NetDefs and
// ExecutionSteps, with Caffe2's net_builder.py structure.
//
// A builder holds an ordered list of children: nets and nested builders. Ops
// are appended to the open net; a nested builder (Loop, AddChild) or
// NewNet() closes it. A builder with only nets becomes one step that runs
// them in order; otherwise every child becomes a substep. The executor checks
// a builder's stop blob after each of its nets, which is what StopIf relies
// on.
//
// Names are deterministic: every net and every auto-named blob is derived
// from the task's name and the position of the op, never from a process-wide
// counter, so building the same job twice gives identical protos.
//
// Example:
//   NetBuilder& net = task.net();
//   BlobRef total = net.Const<int64_t>("total", {100});
//   BlobRef one = net.Const<int64_t>("", {1});
//   net.Loop(3, [&](NetBuilder& body) { body.Add(total, one, total); });
//
// A NetBuilder is owned by its Task (or parent builder) and is not
// thread-safe.

#ifndef JOBGRAPH_ENGINE_NET_BUILDER_H_
#define JOBGRAPH_ENGINE_NET_BUILDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class Task;

// A blob by name, on a node. Cheap to copy; it does not hold the value.
class BlobRef {
 public:
  BlobRef() = default;
  BlobRef(std::string name, std::string node = "")  // NOLINT: implicit
      : name_(std::move(name)), node_(std::move(node)) {}
  BlobRef(const char* name)  // NOLINT: implicit, for {"a", "b"} lists
      : name_(name) {}

  const std::string& name() const { return name_; }
  const std::string& node() const { return node_; }
  bool valid() const { return !name_.empty(); }

  friend bool operator==(const BlobRef& a, const BlobRef& b) {
    return a.name_ == b.name_ && a.node_ == b.node_;
  }

 private:
  std::string name_;
  std::string node_;
};

// Operator arguments: MakeArg("shape", std::vector<int64_t>{2, 3}).
Argument MakeArg(const std::string& name, int64_t value);
Argument MakeArg(const std::string& name, int value);
Argument MakeArg(const std::string& name, bool value);
Argument MakeArg(const std::string& name, float value);
Argument MakeArg(const std::string& name, double value);
Argument MakeArg(const std::string& name, const std::string& value);
Argument MakeArg(const std::string& name, const char* value);
Argument MakeArg(const std::string& name, const std::vector<int64_t>& values);
Argument MakeArg(const std::string& name, const std::vector<float>& values);
Argument MakeArg(const std::string& name, const std::vector<double>& values);
Argument MakeArg(const std::string& name,
                 const std::vector<std::string>& values);

// Unique net names within one task (Caffe2 made them unique per process).
class NameScope {
 public:
  // `base`, or `base_1`, `base_2`, ... if taken.
  std::string UniqueNetName(const std::string& base);

 private:
  std::set<std::string> used_;
};

class NetBuilder {
 public:
  // `scope` and `task` are borrowed and must outlive the builder.
  NetBuilder(std::string name, std::string node, NameScope* scope, Task* task);
  NetBuilder(const NetBuilder&) = delete;
  NetBuilder& operator=(const NetBuilder&) = delete;
  ~NetBuilder();

  const std::string& name() const { return name_; }
  const std::string& node() const { return node_; }
  // The task this builder belongs to (for task-level setup nets).
  Task* task() const { return task_; }
  bool empty() const { return children_.empty(); }

  // Appends an operator to the open net. `outputs` are used as given; the
  // overload with a count names them "<net>/<type>:<i>" (Caffe2's rule, with
  // "<type>_2", "<type>_3"... on a repeat within the net).
  std::vector<BlobRef> Op(const std::string& type,
                          const std::vector<BlobRef>& inputs,
                          const std::vector<BlobRef>& outputs,
                          std::vector<Argument> args = {});
  std::vector<BlobRef> Op(const std::string& type,
                          const std::vector<BlobRef>& inputs, int num_outputs,
                          std::vector<Argument> args = {});

  // A constant tensor, filled by the GivenTensor*Fill op of its type. An
  // empty `name` auto-names it.
  BlobRef Const(const Tensor& value, const std::string& name = "");
  // A 1-D constant: Const<int64_t>("total", {100}) has shape [1].
  template <typename T>
  BlobRef Const(const std::string& name, const std::vector<T>& values) {
    return Const(Tensor::FromVector<T>(values), name);
  }
  // A scalar constant (shape []).
  template <typename T>
  BlobRef ConstScalar(const std::string& name, T value) {
    return Const(Tensor::Scalar<T>(value), name);
  }

  // Typed helpers for the core operators. An invalid `out` auto-names it.
  BlobRef Copy(BlobRef x, BlobRef out = {});
  BlobRef Add(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef Sub(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef Mul(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef Div(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef LT(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef LE(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef GT(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef GE(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef EQ(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef And(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef Or(BlobRef a, BlobRef b, BlobRef out = {});
  BlobRef Not(BlobRef a, BlobRef out = {});
  BlobRef IsEmpty(BlobRef x, BlobRef out = {});
  void Print(BlobRef x);
  BlobRef CreateCounter(int64_t init_count, BlobRef out = {});
  BlobRef CountDown(BlobRef counter, BlobRef out = {});
  BlobRef CountUp(BlobRef counter, BlobRef out = {});
  BlobRef RetrieveCount(BlobRef counter, BlobRef out = {});
  void ResetCounter(BlobRef counter, int64_t init_count);
  // A function operator calling the callable registered under `function`.
  std::vector<BlobRef> Function(const std::string& function,
                                const std::vector<BlobRef>& inputs,
                                const std::vector<BlobRef>& outputs);

  // Ends the open net: the next op starts a new one, so the stop blob is
  // checked between them.
  void NewNet();

  // A nested builder; it becomes a substep. `name` is made unique in the
  // task by appending "_1", "_2"...
  NetBuilder& AddChild(const std::string& name);

  // Runs `body` `iterations` times (a step with num_iter). When the body
  // calls StopIf it may end early; with iterations < 0 it repeats until it
  // does.
  void Loop(int64_t iterations, const std::function<void(NetBuilder&)>& body);
  void Loop(const std::function<void(NetBuilder&)>& body) { Loop(-1, body); }

  // Stops this builder's step when `condition` (a bool scalar) is true:
  // ORs it into the stop blob and ends the open net, so the executor checks
  // right after. The stop blob is reset to false at the start of every run
  // of the builder's step.
  void StopIf(BlobRef condition);
  // Stops unconditionally after the open net.
  void Stop();

  // Step controls for builders made with AddChild.
  void SetStopBlob(BlobRef blob) { stop_blob_ = std::move(blob); }
  void SetNumIter(int64_t n) { num_iter_ = n; }
  void SetOnlyOnce(bool only_once) { only_once_ = only_once; }
  void SetConcurrentSubsteps(bool concurrent) { concurrent_ = concurrent; }
  const BlobRef& stop_blob() const { return stop_blob_; }

  // The builder's step; nets are added to `plan`. A builder with nothing in
  // it gives an empty step. Errors name the builder.
  absl::Status BuildStep(PlanDef* plan, ExecutionStep* step) const;

 private:
  struct Child {
    std::unique_ptr<NetDef> net;          // a net, or
    std::unique_ptr<NetBuilder> builder;  // a nested builder
  };

  NetDef* OpenNet();
  BlobRef Ref(const std::string& name) const { return BlobRef(name, node_); }
  BlobRef EnsureStopBlob();
  BlobRef Unary(const std::string& type, BlobRef a, BlobRef out);
  BlobRef Binary(const std::string& type, BlobRef a, BlobRef b, BlobRef out);

  const std::string name_;
  const std::string node_;
  NameScope* const scope_;
  Task* const task_;
  std::vector<Child> children_;
  NetDef* open_net_ = nullptr;
  // Per-net counts of auto-named outputs by op type, for "<type>_2" names.
  std::map<std::string, std::map<std::string, int>> auto_names_;
  BlobRef stop_blob_;
  int64_t num_iter_ = -1;
  bool only_once_ = false;
  bool concurrent_ = false;
  bool requires_stop_ = false;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_NET_BUILDER_H_

// OperatorBase and the operator registry.
//
// An operator is built from an OperatorDef against a Workspace: its inputs
// must already exist (a clear error otherwise) and its outputs are created
// then, as in Caffe2, so that later nets and stop conditions can refer to
// them. Run() reads inputs and writes outputs and returns a Status whose
// message names what went wrong.
//
// Built-in and user operators register the same way:
//
//   class MyOp final : public OperatorBase {
//    public:
//     using OperatorBase::OperatorBase;
//     absl::Status Run() override { ... }
//   };
//   JG_REGISTER_OPERATOR(MyOp, MyOp);
//
// The registry is thread-safe. An operator instance is used by one thread at
// a time; the blobs it reads may be shared (see Workspace).

#ifndef JOBGRAPH_ENGINE_OPERATOR_H_
#define JOBGRAPH_ENGINE_OPERATOR_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class OperatorBase {
 public:
  // Called by the registry after the inputs were checked and outputs created.
  OperatorBase(const OperatorDef& def, Workspace* ws);
  OperatorBase(const OperatorBase&) = delete;
  OperatorBase& operator=(const OperatorBase&) = delete;
  virtual ~OperatorBase() = default;

  // Validates arguments once, after construction; an error here fails the
  // net's construction, naming the op.
  virtual absl::Status Init() { return absl::OkStatus(); }
  virtual absl::Status Run() = 0;

  const OperatorDef& def() const { return def_; }
  const std::string& type() const { return def_.type(); }
  Workspace* workspace() const { return ws_; }

  int InputSize() const { return static_cast<int>(inputs_.size()); }
  int OutputSize() const { return static_cast<int>(outputs_.size()); }
  const std::string& InputName(int i) const { return def_.input(i); }
  const std::string& OutputName(int i) const { return def_.output(i); }
  Blob* InputBlob(int i) const { return inputs_[i]; }
  Blob* OutputBlob(int i) const { return outputs_[i]; }

  // Input i as a tensor; an error naming the blob if it holds anything else.
  absl::StatusOr<const Tensor*> Input(int i) const;
  // Output i as a tensor (the blob is made to hold one).
  Tensor* Output(int i) const { return outputs_[i]->GetMutable<Tensor>(); }

  bool HasArg(absl::string_view name) const;
  // Typed arguments. T is one of bool, int, int64_t, float, double,
  // std::string; ints convert to floats, not the other way round.
  template <typename T>
  T GetArg(absl::string_view name, T default_value) const;
  // Repeated arguments. T is one of int64_t, float, double, std::string.
  template <typename T>
  std::vector<T> GetRepeatedArg(absl::string_view name) const;

  // An error of `code` whose message starts with this op's description.
  absl::Status Error(absl::StatusCode code, absl::string_view message) const;
  // "Add(a, b -> c)".
  std::string Describe() const;

 private:
  friend class OperatorRegistry;
  const Argument* FindArg(absl::string_view name) const;

  const OperatorDef def_;
  Workspace* const ws_;
  std::vector<Blob*> inputs_;
  std::vector<Blob*> outputs_;
};

using OperatorFactory = std::function<std::unique_ptr<OperatorBase>(
    const OperatorDef& def, Workspace* ws)>;

class OperatorRegistry {
 public:
  // The process-wide registry used by nets.
  static OperatorRegistry& Global();

  // AlreadyExists if `type` is registered.
  absl::Status Register(const std::string& type, OperatorFactory factory);
  bool IsRegistered(absl::string_view type) const;
  // Registered type names, sorted.
  std::vector<std::string> Types() const;

  // Checks that every input exists in `ws` (NotFound naming the blob and op
  // otherwise), creates the outputs, constructs the op and runs its Init().
  // An unknown type is NotFound with the list of known types.
  absl::StatusOr<std::unique_ptr<OperatorBase>> Create(const OperatorDef& def,
                                                       Workspace* ws) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, OperatorFactory, std::less<>> factories_
      ABSL_GUARDED_BY(mu_);
};

// Registers operator class CLASS under TYPE at start-up; a duplicate TYPE is a
// fatal error naming it. Libraries that register operators must be linked
// with alwayslink = True.
#define JG_REGISTER_OPERATOR(TYPE, CLASS) \
  JG_REGISTER_OPERATOR_IMPL_(TYPE, CLASS, __COUNTER__)
#define JG_REGISTER_OPERATOR_IMPL_(TYPE, CLASS, N) \
  JG_REGISTER_OPERATOR_IMPL2_(TYPE, CLASS, N)
#define JG_REGISTER_OPERATOR_IMPL2_(TYPE, CLASS, N)                       \
  static const bool jg_operator_registered_##N = [] {                     \
    absl::Status s = ::jobgraph::OperatorRegistry::Global().Register(     \
        #TYPE,                                                            \
        [](const ::jobgraph::OperatorDef& def, ::jobgraph::Workspace* ws) \
            -> std::unique_ptr<::jobgraph::OperatorBase> {                \
          return std::make_unique<CLASS>(def, ws);                        \
        });                                                               \
    CHECK(s.ok()) << s;                                                   \
    return true;                                                          \
  }()

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_OPERATOR_H_

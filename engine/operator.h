// OperatorBase and the operator registry.
//
// An operator is built from an OperatorDef against a Workspace: its inputs
// must already exist (a clear error otherwise) and its outputs are created
// then, as in Caffe2, so that later nets and stop conditions can refer to
// them. Run() reads inputs and writes outputs and returns a Status whose
// message names what went wrong.
//
// OperatorBase also carries the plumbing every op needs: checks of how it is
// wired, typed arguments and inputs, and errors that name the op and the
// blob. Ops of every package use it, so they read and fail the same way.
//
// Built-in and user operators register the same way:
//
//   class ScaleOp final : public OperatorBase {
//    public:
//     using OperatorBase::OperatorBase;
//     absl::Status Init() override {
//       JG_RETURN_IF_ERROR(CheckArity(1, 1, 1, 1));
//       JG_ASSIGN_OR_RETURN(factor_, GetPositiveArg<double>("factor", 1.0));
//       return absl::OkStatus();
//     }
//     absl::Status Run() override {
//       JG_ASSIGN_OR_RETURN(const Tensor* x, Input(0, FLOAT));
//       ...
//     }
//    private:
//     double factor_ = 1;
//   };
//   JG_REGISTER_OPERATOR(Scale, ScaleOp);
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
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/blob.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class OperatorBase {
 public:
  // As `max` of CheckArity: no upper limit.
  static constexpr int kUnbounded = -1;
  // As `ndim` of Input(i, dtype, ndim): any number of dimensions.
  static constexpr int kAnyRank = -1;

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

  // --- Wiring, checked in Init(): the registry does not know how an op is
  // wired, and Run() must not index past the end.

  // InvalidArgument unless the op has `min_inputs` to `max_inputs` inputs and
  // `min_outputs` to `max_outputs` outputs (kUnbounded: no maximum), e.g.
  // "expects 2 to 3 input(s), got 1".
  absl::Status CheckArity(int min_inputs, int max_inputs, int min_outputs,
                          int max_outputs) const;
  // InvalidArgument unless output `output` names the same blob as input
  // `input`, for ops that update a blob in place.
  absl::Status CheckInPlace(int output, int input) const;

  // --- Arguments.

  bool HasArg(absl::string_view name) const;
  // Typed arguments. T is one of bool, int, int64_t, float, double,
  // std::string; ints convert to floats, not the other way round.
  template <typename T>
  T GetArg(absl::string_view name, T default_value) const;
  // Repeated arguments. T is one of int64_t, float, double, std::string.
  template <typename T>
  std::vector<T> GetRepeatedArg(absl::string_view name) const;
  // String argument `name`, or InvalidArgument when it is absent or empty:
  // "argument 'path' (the text file to read) is required", where `what`
  // (may be empty) says what the argument is.
  absl::StatusOr<std::string> GetRequiredStringArg(
      absl::string_view name, absl::string_view what) const;
  // Argument `name` (default `default_value`), or InvalidArgument unless it
  // is > 0 ("argument 'batch_size' must be positive, got 0"), and for double
  // also finite. T is int64_t or double.
  template <typename T>
  absl::StatusOr<T> GetPositiveArg(absl::string_view name,
                                   T default_value) const;
  // Argument `name` (default `default_value`), or InvalidArgument unless it
  // is >= 0 ("limit must be >= 0, got -1"). T is int64_t or double.
  template <typename T>
  absl::StatusOr<T> GetNonNegativeArg(absl::string_view name,
                                      T default_value) const;

  // --- Inputs. Errors name the op and the blob. A blob of the wrong type is
  // FailedPrecondition (an earlier op did not make it); a tensor of the wrong
  // element type or shape is InvalidArgument.

  // Input i as a tensor.
  absl::StatusOr<const Tensor*> Input(int i) const;
  // Input i as a tensor of `dtype` with `ndim` dimensions (any number for
  // kAnyRank): "input 'x' must be a 2-D tensor of float, got float[3] {...}".
  absl::StatusOr<const Tensor*> Input(int i, DataType dtype,
                                      int ndim = kAnyRank) const;
  // Input i as a tensor of `dtype` holding one element (shape [] or [1], ...).
  absl::StatusOr<const Tensor*> ScalarInput(int i, DataType dtype) const;
  // Input i as a T (a counter, a cursor, ...). `what` names a T for users;
  // `creator`, if not empty, names the op that makes one: "input 'c' holds
  // Tensor, not a counter (create it with CreateCounter)".
  template <typename T>
  absl::StatusOr<T*> InputAs(int i, absl::string_view what,
                             absl::string_view creator) const {
    Blob* blob = inputs_[i];
    if (!blob->IsType<T>()) {
      return Error(absl::StatusCode::kFailedPrecondition,
                   WrongInputType(i, what, creator));
    }
    return blob->GetMutable<T>();
  }
  // The message of InputAs for input i, without the op's description, for
  // callers that add their own.
  std::string WrongInputType(int i, absl::string_view what,
                             absl::string_view creator) const;

  // --- Outputs.

  // Output i as a tensor (the blob is made to hold one).
  Tensor* Output(int i) const { return outputs_[i]->GetMutable<Tensor>(); }

  // --- Errors.

  // An error of `code` whose message starts with this op's description.
  absl::Status Error(absl::StatusCode code, absl::string_view message) const;
  // `status` with this op's description, then `context` if not empty, in
  // front of its message, keeping its code; OK stays OK. For errors from what
  // the op calls: "op ReadLines(c -> l): cursor 'c': <message>".
  absl::Status Annotate(const absl::Status& status,
                        absl::string_view context = "") const;
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

// Writing output tensors without reallocating: a net runs the same ops again
// and again, so an output that already has the right type and shape keeps its
// storage and steady-state runs do not allocate.

// True when `t` already has `dtype` and `shape`.
inline bool HasTypeAndShape(const Tensor& t, DataType dtype,
                            absl::Span<const int64_t> shape) {
  return t.dtype() == dtype && absl::MakeConstSpan(t.shape()) == shape;
}

// Makes `out` a tensor of `dtype` and `shape`, keeping its storage when it
// already has both. Element values are unspecified afterwards; the caller
// overwrites all of them. `shape` may point into `out` itself.
void PrepareOutput(Tensor* out, DataType dtype,
                   absl::Span<const int64_t> shape);

// Sets `out` to the scalar `value`.
template <typename T>
void SetScalar(Tensor* out, T value) {
  PrepareOutput(out, DataTypeOf<T>::value, {});
  out->mutable_data<T>()[0] = std::move(value);
}

// Deep-copies `src` into `dst`. A no-op when they are the same tensor.
void CopyTensor(const Tensor& src, Tensor* dst);

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

// AtomicOr (x, cond) -> (x): x = x OR cond for bool scalars, under a lock.
//
// ReaderWithLimit accumulates its data_finished flag this way. Caffe2 used
// Or(data_finished, local_done -> data_finished), which is a read-modify-
// write of a blob shared by every runtime instance of the reading task: two
// instances finishing together can lose the `true` one of them wrote. The
// lock makes the update atomic; the result is the same as Or's.

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/data/op_checks.h"
#include "engine/operator.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

// One lock for every AtomicOr: the critical section is a few loads and a
// store, run once per batch read.
std::mutex& AtomicOrMutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed
  return *mu;
}

class AtomicOrOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(data_internal::CheckArity(*this, 2, 2, 1, 1));
    if (OutputName(0) != InputName(0)) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "the output must be the first input (x = x OR cond)");
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    std::lock_guard<std::mutex> lock(AtomicOrMutex());
    JG_ASSIGN_OR_RETURN(const Tensor* x, Input(0));
    JG_ASSIGN_OR_RETURN(const Tensor* cond, Input(1));
    for (int i = 0; i < 2; ++i) {
      const Tensor* t = i == 0 ? x : cond;
      if (t->dtype() != BOOL || t->numel() != 1) {
        return Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat("input '", InputName(i),
                         "' must be a bool scalar, got ", t->DebugString(4)));
      }
    }
    if (cond->data<bool>()[0]) Output(0)->mutable_data<bool>()[0] = true;
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(AtomicOr, AtomicOrOp);

}  // namespace
}  // namespace jobgraph

// AtomicOr (x, cond) -> (x): x = x OR cond for bool scalars, under a lock.
//
// ReaderWithLimit accumulates its data_finished flag this way. Caffe2 used
// Or(data_finished, local_done -> data_finished), which is a read-modify-
// write of a blob shared by every runtime instance of the reading task: two
// instances finishing together can lose the `true` one of them wrote. The
// lock makes the update atomic; the result is the same as Or's.

#include <mutex>

#include "absl/status/status.h"
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
    JG_RETURN_IF_ERROR(CheckArity(2, 2, 1, 1));
    return CheckInPlace(0, 0);
  }

  absl::Status Run() override {
    std::lock_guard<std::mutex> lock(AtomicOrMutex());
    JG_RETURN_IF_ERROR(ScalarInput(0, BOOL).status());
    JG_ASSIGN_OR_RETURN(const Tensor* cond, ScalarInput(1, BOOL));
    if (cond->data<bool>()[0]) Output(0)->mutable_data<bool>()[0] = true;
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(AtomicOr, AtomicOrOp);

}  // namespace
}  // namespace jobgraph

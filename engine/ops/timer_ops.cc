#include "engine/ops/timer_ops.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "glog/logging.h"

namespace jobgraph {

bool TimerInstance::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

absl::Status TimerInstance::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) {
    return absl::FailedPreconditionError(
        absl::StrCat("timer '", name_, "' is already running"));
  }
  running_ = true;
  start_ = Clock::now();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TimerInstance::End() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return NotRunningError();
  running_ = false;
  return ElapsedNanosLocked();
}

absl::StatusOr<int64_t> TimerInstance::ElapsedNanos() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return NotRunningError();
  return ElapsedNanosLocked();
}

int64_t TimerInstance::ElapsedNanosLocked() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                              start_)
      .count();
}

absl::Status TimerInstance::NotRunningError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("timer '", name_, "' is not running (TimerBegin it first)"));
}

JG_REGISTER_BLOB_TYPE(TimerInstance, "TimerInstance*");

namespace {

// The timer held by input 0.
absl::StatusOr<TimerInstance*> InputTimer(const OperatorBase& op) {
  return op.InputAs<TimerInstance>(0, "timer", "TimerBegin");
}

// TimerBegin([] -> t): starts the timer in t, making one on first use. Caffe2
// keeps the timer inside the op; keeping it in the blob instead means a blob
// never points into an op that may be destroyed first, while a second Begin
// without End still fails as it does there.
class TimerBeginOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    name_ = GetArg<std::string>("counter_name", OutputName(0));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    Blob* blob = OutputBlob(0);
    TimerInstance* timer =
        blob->IsType<TimerInstance>()
            ? blob->GetMutable<TimerInstance>()
            : blob->Reset(std::make_unique<TimerInstance>(name_));
    return Annotate(timer->Begin());
  }

 private:
  std::string name_;
};
JG_REGISTER_OPERATOR(TimerBegin, TimerBeginOp);

// TimerEnd(t): stops the timer.
class TimerEndOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 0, 0); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(TimerInstance * timer, InputTimer(*this));
    absl::StatusOr<int64_t> elapsed = timer->End();
    if (!elapsed.ok()) return Annotate(elapsed.status());
    // Caffe2 publishes a stat here; jobgraph has no stats registry yet.
    VLOG(1) << "timer " << timer->name() << ": " << *elapsed << " ns";
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TimerEnd, TimerEndOp);

// TimerGet(t -> int64 scalar ns) and TimerGetAndEnd(t -> int64 [1] ns, then
// stops the timer). The shapes differ because Caffe2's do.
template <bool kEnd>
class TimerGetOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(TimerInstance * timer, InputTimer(*this));
    absl::StatusOr<int64_t> elapsed =
        kEnd ? timer->End() : timer->ElapsedNanos();
    if (!elapsed.ok()) return Annotate(elapsed.status());
    static constexpr int64_t kShape[] = {1};
    Tensor* out = Output(0);
    PrepareOutput(
        out, INT64,
        kEnd ? absl::Span<const int64_t>(kShape) : absl::Span<const int64_t>());
    out->mutable_data<int64_t>()[0] = *elapsed;
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TimerGet, TimerGetOp<false>);
JG_REGISTER_OPERATOR(TimerGetAndEnd, TimerGetOp<true>);

}  // namespace
}  // namespace jobgraph

// Counter operators (Caffe2's counter_ops): CreateCounter, ResetCounter,
// CountDown, CountUp, RetrieveCount and CheckCounterDone. The counter blob
// holds a jobgraph::Counter, whose methods are atomic, so concurrent tasks may
// share one counter (an epoch limiter, a reader limit).

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/operator.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

// `init_count`, which Caffe2 requires to be >= 0.
absl::StatusOr<int64_t> InitCount(const OperatorBase& op) {
  return op.GetNonNegativeArg<int64_t>("init_count", 0);
}

// The counter held by input 0.
absl::StatusOr<Counter*> InputCounter(const OperatorBase& op) {
  return op.InputAs<Counter>(0, "counter", "CreateCounter");
}

class CreateCounterOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    JG_ASSIGN_OR_RETURN(init_count_, InitCount(*this));
    return absl::OkStatus();
  }

  // Every run starts the count again. An existing counter is reset in
  // place (atomically) rather than replaced: another thread may be counting
  // on it right now through a pointer it took from the blob, and replacing
  // it would free that counter under it.
  absl::Status Run() override {
    Blob* blob = OutputBlob(0);
    if (blob->IsType<Counter>()) {
      blob->GetMutable<Counter>()->Reset(init_count_);
    } else {
      blob->Reset(std::make_unique<Counter>(init_count_));
    }
    return absl::OkStatus();
  }

 private:
  int64_t init_count_ = 0;
};
JG_REGISTER_OPERATOR(CreateCounter, CreateCounterOp);

class ResetCounterOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(1, 1, 0, 1));
    JG_ASSIGN_OR_RETURN(init_count_, InitCount(*this));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(Counter * counter, InputCounter(*this));
    const int64_t previous = counter->Reset(init_count_);
    if (OutputSize() == 1) SetScalar<int64_t>(Output(0), previous);
    return absl::OkStatus();
  }

 private:
  int64_t init_count_ = 0;
};
JG_REGISTER_OPERATOR(ResetCounter, ResetCounterOp);

// The ops that read or step a counter and output one scalar: Fn(Counter&)
// returns the value, whose type is the output's element type.
template <typename Fn>
class CounterQueryOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(Counter * counter, InputCounter(*this));
    SetScalar(Output(0), Fn()(*counter));
    return absl::OkStatus();
  }
};

struct CountDownFn {
  bool operator()(Counter& c) const { return c.CountDown(); }
};
struct CountUpFn {
  int64_t operator()(Counter& c) const { return c.CountUp(); }
};
struct RetrieveCountFn {
  int64_t operator()(Counter& c) const { return c.Retrieve(); }
};
struct CheckCounterDoneFn {
  bool operator()(Counter& c) const { return c.IsDone(); }
};

JG_REGISTER_OPERATOR(CountDown, CounterQueryOp<CountDownFn>);
JG_REGISTER_OPERATOR(CountUp, CounterQueryOp<CountUpFn>);
JG_REGISTER_OPERATOR(RetrieveCount, CounterQueryOp<RetrieveCountFn>);
JG_REGISTER_OPERATOR(CheckCounterDone, CounterQueryOp<CheckCounterDoneFn>);

}  // namespace
}  // namespace jobgraph

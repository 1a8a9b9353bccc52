#include "engine/test_ops.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "engine/operator.h"

namespace jobgraph {
namespace testing {
namespace {

std::mutex log_mu;
std::vector<std::string>& LogStore() {
  static auto* log = new std::vector<std::string>;
  return *log;
}

class TestLogOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    std::lock_guard<std::mutex> lock(log_mu);
    LogStore().push_back(GetArg<std::string>("tag", ""));
    return absl::OkStatus();
  }
};

class TestSetBoolOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    const bool value = GetArg<bool>("value", true);
    ++runs_;
    *Output(0) = Tensor::Scalar<bool>(
        runs_ >= GetArg<int64_t>("after", 1) ? value : !value);
    return absl::OkStatus();
  }

 private:
  int64_t runs_ = 0;
};

class TestFailOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    return absl::InternalError(GetArg<std::string>("message", "TestFail"));
  }
};

class TestSleepOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(GetArg<int64_t>("ms", 1)));
    return absl::OkStatus();
  }
};

class TestIncrementOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    Blob* out = OutputBlob(0);
    if (!out->IsType<Tensor>()) {
      *out->GetMutable<Tensor>() = Tensor::Scalar<int64_t>(0);
    }
    ++out->GetMutable<Tensor>()->mutable_data<int64_t>()[0];
    return absl::OkStatus();
  }
};

JG_REGISTER_OPERATOR(TestLog, TestLogOp);
JG_REGISTER_OPERATOR(TestSetBool, TestSetBoolOp);
JG_REGISTER_OPERATOR(TestFail, TestFailOp);
JG_REGISTER_OPERATOR(TestSleep, TestSleepOp);
JG_REGISTER_OPERATOR(TestIncrement, TestIncrementOp);

}  // namespace

std::vector<std::string> Log() {
  std::lock_guard<std::mutex> lock(log_mu);
  return LogStore();
}

void ClearLog() {
  std::lock_guard<std::mutex> lock(log_mu);
  LogStore().clear();
}

}  // namespace testing
}  // namespace jobgraph

// executor_bench: what the executor adds on top of the work an op does.
//
// Each figure is printed beside a baseline measured in the same run: a plain
// loop of virtual calls doing the same arithmetic (adding 1 to an int64 in a
// tensor). The machines are noisy, so only the ratios are meaningful.
//
//   op dispatch: a net of 1,000 trivial ops run by Net::Run, per op, against
//                1,000 virtual calls;
//   loop step:   an ExecutionStep with num_iter over a one-op net, per
//                iteration (continuation test + net run + the op), against
//                one virtual call.
//
// The last line is
//   executor_bench: op_dispatch_vs_baseline=<r> step_vs_baseline=<r>
//
// Run: ./tools/bazel run -c opt //tools/bench:executor_bench

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/net.h"
#include "engine/operator.h"
#include "engine/plan_executor.h"
#include "engine/workspace.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

constexpr int kOpsPerNet = 1000;
constexpr int64_t kStepIterations = 100000;

// The trivial op: the same arithmetic as the baseline, on a tensor resolved
// once at construction, as a real op resolves its blobs. Like a real op, it
// takes its elements through mutable_data() on every run: a pointer kept
// across runs would write past the tensor's copy-on-write.
class BenchIncrementOp final : public OperatorBase {
 public:
  BenchIncrementOp(const OperatorDef& def, Workspace* ws)
      : OperatorBase(def, ws), tensor_(Output(0)) {
    if (tensor_->dtype() != INT64 || tensor_->numel() != 1) {
      *tensor_ = Tensor::Scalar<int64_t>(0);
    }
  }
  absl::Status Run() override {
    ++*tensor_->mutable_data<int64_t>();
    return absl::OkStatus();
  }

 private:
  Tensor* const tensor_;
};
JG_REGISTER_OPERATOR(BenchIncrement, BenchIncrementOp);

// The baseline: the same increment behind a virtual call.
struct Work {
  virtual ~Work() = default;
  virtual void Run() = 0;
};
struct Increment final : Work {
  explicit Increment(int64_t* v) : value(v) {}
  void Run() override { ++*value; }
  int64_t* value;
};

NetDef TrivialNet(const std::string& name, int ops) {
  NetDef net;
  net.set_name(name);
  for (int i = 0; i < ops; ++i) {
    OperatorDef* op = net.add_op();
    op->set_type("BenchIncrement");
    op->add_output("counter");
  }
  return net;
}

void BM_OpDispatchBaseline(benchmark::State& state) {
  int64_t value = 0;
  std::vector<std::unique_ptr<Work>> work;
  for (int i = 0; i < kOpsPerNet; ++i) {
    work.push_back(std::make_unique<Increment>(&value));
  }
  for (auto _ : state) {
    for (auto& item : work) {
      Work* w = item.get();
      benchmark::DoNotOptimize(w);
      w->Run();
    }
    benchmark::DoNotOptimize(value);
  }
  state.SetItemsProcessed(state.iterations() * kOpsPerNet);
}

void BM_OpDispatch(benchmark::State& state) {
  Workspace ws(nullptr, "bench");
  auto net = Net::Create(TrivialNet("ops", kOpsPerNet), &ws);
  CHECK(net.ok()) << net.status();
  for (auto _ : state) {
    absl::Status s = (*net)->Run();
    benchmark::DoNotOptimize(s);
  }
  CHECK_EQ(ws.GetTensor("counter").value()->scalar<int64_t>(),
           state.iterations() * kOpsPerNet);
  state.SetItemsProcessed(state.iterations() * kOpsPerNet);
}

void BM_StepBaseline(benchmark::State& state) {
  int64_t value = 0;
  std::unique_ptr<Work> work = std::make_unique<Increment>(&value);
  Work* w = work.get();
  for (auto _ : state) {
    for (int64_t i = 0; i < kStepIterations; ++i) {
      // Hides the object's type, so the call stays a virtual call.
      benchmark::DoNotOptimize(w);
      w->Run();
    }
    benchmark::DoNotOptimize(value);
  }
  state.SetItemsProcessed(state.iterations() * kStepIterations);
}

void BM_Step(benchmark::State& state) {
  Workspace ws(nullptr, "bench");
  PlanDef plan;
  *plan.add_network() = TrivialNet("one", 1);
  ExecutionStep* step = plan.add_execution_step();
  step->set_name("loop");
  step->add_network("one");
  step->set_num_iter(kStepIterations);
  for (auto _ : state) {
    absl::Status s = RunPlan(&ws, plan);
    CHECK(s.ok()) << s;
  }
  state.SetItemsProcessed(state.iterations() * kStepIterations);
}

BENCHMARK(BM_OpDispatchBaseline);
BENCHMARK(BM_OpDispatch);
BENCHMARK(BM_StepBaseline);
BENCHMARK(BM_Step);

// Keeps each benchmark's time per item so main() can print the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Plain text: the output is read in logs and notes, not a terminal.
  RatioReporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      auto items = run.counters.find("items_per_second");
      if (items != run.counters.end() && items->second.value > 0) {
        ns_per_item_[run.benchmark_name()] = 1e9 / items->second.value;
      }
    }
  }
  double NsPerItem(const std::string& name) const {
    auto it = ns_per_item_.find(name);
    return it == ns_per_item_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> ns_per_item_;
};

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  jobgraph::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double op = reporter.NsPerItem("BM_OpDispatch");
  const double op_base = reporter.NsPerItem("BM_OpDispatchBaseline");
  const double step = reporter.NsPerItem("BM_Step");
  const double step_base = reporter.NsPerItem("BM_StepBaseline");
  std::printf("op dispatch: %.2f ns/op, baseline %.2f ns/call\n", op, op_base);
  std::printf("loop step:   %.2f ns/iteration, baseline %.2f ns/call\n", step,
              step_base);
  std::printf(
      "executor_bench: op_dispatch_vs_baseline=%.2f "
      "step_vs_baseline=%.2f\n",
      op_base > 0 ? op / op_base : 0, step_base > 0 ? step / step_base : 0);
  return 0;
}

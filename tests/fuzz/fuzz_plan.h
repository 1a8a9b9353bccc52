// The small fixed plan that plan_position_fuzzer resumes, shared with the
// corpus generator (which stops it at every point to get real positions).
// It has each kind of step a position describes: sequential steps, loops
// (num_iter and a counter's stop blob), a child workspace, and concurrent
// substeps with several instances and their own workspaces.

#ifndef JOBGRAPH_TESTS_FUZZ_FUZZ_PLAN_H_
#define JOBGRAPH_TESTS_FUZZ_FUZZ_PLAN_H_

#include "google/protobuf/text_format.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace fuzz {

inline constexpr char kFuzzPlanText[] = R"pb(
  name: "epoch:trainer_0"
  network {
    name: "init"
    op {
      type: "ConstantFill"
      output: "x"
      arg { name: "shape" ints: 2 }
      arg { name: "value" f: 1 }
    }
    op {
      type: "CreateCounter"
      output: "budget"
      arg { name: "init_count" i: 3 }
    }
  }
  network {
    name: "double"
    op { type: "Add" input: "x" input: "x" output: "x" }
  }
  network {
    name: "count"
    op { type: "CountDown" input: "budget" output: "done" }
  }
  network {
    name: "local"
    op {
      type: "ConstantFill"
      output: "y"
      arg { name: "shape" ints: 1 }
      arg { name: "value" f: 2 }
    }
    op { type: "Add" input: "y" input: "y" output: "y" }
  }
  network {
    name: "copy"
    op { type: "Copy" input: "y" output: "z" }
  }
  execution_step { name: "setup" network: "init" }
  execution_step {
    name: "loop"
    num_iter: 2
    substep { name: "a" network: "double" network: "double" num_iter: 2 }
    substep { name: "b" network: "double" }
  }
  execution_step {
    name: "child"
    create_workspace: true
    substep { name: "inner" network: "local" network: "copy" num_iter: 2 }
  }
  execution_step {
    name: "threads"
    concurrent_substeps: true
    substep { name: "t1" create_workspace: true network: "local" num_iter: 2 }
    substep {
      name: "t2"
      create_workspace: true
      num_concurrent_instances: 2
      network: "local"
      network: "copy"
    }
  }
  execution_step { name: "until" should_stop_blob: "done" network: "count" }
)pb";

inline PlanDef FuzzPlan() {
  PlanDef plan;
  FUZZ_CHECK(
      google::protobuf::TextFormat::ParseFromString(kFuzzPlanText, &plan),
      "the fuzz plan does not parse");
  return plan;
}

}  // namespace fuzz
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_FUZZ_FUZZ_PLAN_H_

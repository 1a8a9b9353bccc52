// Fuzzes resuming a plan from a saved position (PlanPosition, which a
// preemption checkpoint stores in the blob "__plan_position__"): RunPlan of
// the small fixed plan of fuzz_plan.h, in a fresh workspace, continuing from
// the position the input holds. It must succeed or return an error; it
// must never crash or hang. The position's child-workspace blobs
// (local_blob) go through blob deserialization too.
//
// Input: a serialized PlanPosition.
// Invariant: a resume that succeeds, of a position before the last step,
// leaves that step's result in the root workspace.
// Outcome (fuzz::NoteOutcome): accepted when the position parses and the
// resume succeeds; refused otherwise.

#include <cstddef>
#include <cstdint>

#include "engine/plan_executor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/fuzz_plan.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

bool Run(const uint8_t* data, size_t size) {
  static const PlanDef* const plan = new PlanDef(fuzz::FuzzPlan());
  // Its first step alone, which makes the root blobs that a checkpoint of a
  // stopped run holds.
  static const PlanDef* const setup = [] {
    auto* p = new PlanDef(*plan);
    p->mutable_execution_step()->DeleteSubrange(1,
                                                p->execution_step_size() - 1);
    return p;
  }();
  PlanPosition position;
  if (!position.ParseFromArray(data, static_cast<int>(size))) return false;
  Workspace ws(nullptr, "root");
  const absl::Status prepared = RunPlan(&ws, *setup);
  FUZZ_CHECK(prepared.ok(), prepared.ToString());
  const absl::Status resumed = RunPlan(&ws, *plan, {.resume_from = &position});
  if (resumed.ok() && !position.finished() &&
      position.steps_done() < plan->execution_step_size() - 1) {
    FUZZ_CHECK(ws.HasBlob("done"), "a resumed run skipped its last step");
  }
  return resumed.ok();
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(data, size));
  return 0;
}

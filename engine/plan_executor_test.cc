#include "engine/plan_executor.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/operator.h"
#include "engine/test_ops.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::ClearLog;
using ::jobgraph::testing::Log;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

PlanDef ParsePlan(const std::string& text) {
  PlanDef plan;
  CHECK(google::protobuf::TextFormat::ParseFromString(text, &plan)) << text;
  return plan;
}

// A net that logs `tag` and, after running `after` times, sets `stop`.
std::string LogNet(const std::string& name, const std::string& tag,
                   const std::string& stop = "", int after = 1) {
  std::string net = "network { name: '" + name + "' op { type: 'TestLog' " +
                    "arg { name: 'tag' s: '" + tag + "' } }";
  if (!stop.empty()) {
    net += " op { type: 'TestSetBool' output: '" + stop +
           "' arg { name: 'after' i: " + std::to_string(after) + " } }";
  }
  return net + " }";
}

class PlanExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearLog(); }
  Workspace ws_{nullptr, "root"};
};

TEST_F(PlanExecutorTest, EmptyPlanSucceeds) {
  EXPECT_TRUE(RunPlan(&ws_, PlanDef()).ok());
}

TEST_F(PlanExecutorTest, NumIterUnsetRunsOnce) {
  PlanDef plan = ParsePlan(LogNet("a", "a") + LogNet("b", "b") +
                           "execution_step { name: 's' network: 'a' "
                           "network: 'b' }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a", "b"));
}

TEST_F(PlanExecutorTest, NumIterRepeatsNetsInOrder) {
  PlanDef plan = ParsePlan(LogNet("a", "a") + LogNet("b", "b") +
                           "execution_step { name: 's' network: 'a' "
                           "network: 'b' num_iter: 3 }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a", "b", "a", "b", "a", "b"));
}

TEST_F(PlanExecutorTest, NumIterZeroRunsNothing) {
  PlanDef plan = ParsePlan(LogNet("a", "a") +
                           "execution_step { name: 's' network: 'a' "
                           "num_iter: 0 }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre());
}

TEST_F(PlanExecutorTest, NumIterWithSequentialSubsteps) {
  PlanDef plan = ParsePlan(LogNet("a", "a") + LogNet("b", "b") +
                           "execution_step { name: 'outer' num_iter: 2 "
                           "  substep { name: 's1' network: 'a' num_iter: 2 }"
                           "  substep { name: 's2' network: 'b' } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a", "a", "b", "a", "a", "b"));
}

// The stop blob is checked after each net: the net that sets it ends the
// iteration, and the rest of the nets do not run.
TEST_F(PlanExecutorTest, StopCheckedAfterEachNet) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' "
      "  arg { name: 'value' i: 0 } } }" +
      LogNet("a", "a") + LogNet("b", "b", "stop", /*after=*/2) +
      LogNet("c", "c") +
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 's' network: 'a' network: 'b' network: 'c' "
      "  should_stop_blob: 'stop' }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  // Iteration 0: a b(stop=false) c; iteration 1: a b(stop=true), no c.
  EXPECT_THAT(Log(), ElementsAre("a", "b", "c", "a", "b"));
}

// Never checked before the first net: a stop blob that is already true still
// lets the first net run.
TEST_F(PlanExecutorTest, StopNeverCheckedBeforeFirstNet) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' } }" +
      LogNet("a", "a") + LogNet("b", "b") +
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 's' network: 'a' network: 'b' "
      "  should_stop_blob: 'stop' }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a"));
}

TEST_F(PlanExecutorTest, StopCheckedAfterEachSequentialSubstep) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' "
      "  arg { name: 'value' i: 0 } } }" +
      LogNet("a", "a", "stop", /*after=*/1) + LogNet("b", "b") +
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 's' should_stop_blob: 'stop' "
      "  substep { name: 'sa' network: 'a' }"
      "  substep { name: 'sb' network: 'b' } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a"));
}

// Concurrent substeps: checked once, after all threads of the iteration
// joined, so every substep of that iteration runs.
TEST_F(PlanExecutorTest, StopCheckedAfterConcurrentSubstepsJoin) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' "
      "  arg { name: 'value' i: 0 } } }" +
      LogNet("a", "a", "stop", /*after=*/1) +
      "network { name: 'b' op { type: 'TestSleep' arg { name: 'ms' i: 20 } }"
      "  op { type: 'TestLog' arg { name: 'tag' s: 'b' } } }"
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 's' should_stop_blob: 'stop' "
      "  concurrent_substeps: true"
      "  substep { name: 'sa' network: 'a' }"
      "  substep { name: 'sb' network: 'b' } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a", "b"));
}

TEST_F(PlanExecutorTest, OnlyOnceRunsOneIteration) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' "
      "  arg { name: 'value' i: 0 } } }" +
      LogNet("a", "a") +
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 's' network: 'a' should_stop_blob: 'stop' "
      "  only_once: true }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("a"));
}

TEST_F(PlanExecutorTest, InvalidStepsAreRejected) {
  PlanDef both =
      ParsePlan(LogNet("a", "a") +
                "execution_step { name: 's' network: 'a' num_iter: 2 "
                "  should_stop_blob: 'a_stop' }");
  absl::Status s = RunPlan(&ws_, both);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("step 's' sets both num_iter and should_stop_blob"));

  PlanDef once = ParsePlan(LogNet("a", "a") +
                           "execution_step { name: 'o' network: 'a' "
                           "only_once: true }");
  EXPECT_EQ(RunPlan(&ws_, once).code(), absl::StatusCode::kInvalidArgument);

  PlanDef mixed = ParsePlan(LogNet("a", "a") +
                            "execution_step { name: 'm' network: 'a' "
                            "substep { name: 'x' network: 'a' } }");
  EXPECT_EQ(RunPlan(&ws_, mixed).code(), absl::StatusCode::kInvalidArgument);

  PlanDef missing_net =
      ParsePlan("execution_step { name: 'n' network: 'nope' }");
  s = RunPlan(&ws_, missing_net);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("step 'n' names net 'nope'"));
  EXPECT_THAT(Log(), ElementsAre());
}

TEST_F(PlanExecutorTest, StepsThatCouldNeverStopOrWouldShareNetsAreRejected) {
  PlanDef spin = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'stop' "
      "  arg { name: 'value' i: 0 } } }" +
      LogNet("report", "r") +
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 'only_reporters' should_stop_blob: 'stop' "
      "  substep { name: 'rep' network: 'report' run_every_ms: 5 } }");
  absl::Status s = RunPlan(&ws_, spin);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("step 'only_reporters' has a should_stop_blob but no "
                        "nets or substeps to run"));

  PlanDef shared = ParsePlan(LogNet("a", "a") +
                             "execution_step { name: 'p' "
                             "  num_concurrent_instances: 2 "
                             "  substep { name: 'inst' network: 'a' } }");
  s = RunPlan(&ws_, shared);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("substep 'inst', which must set create_workspace"));
  EXPECT_THAT(Log(), ElementsAre());
}

TEST_F(PlanExecutorTest, StopBlobMustExistWhenStepIsBuilt) {
  PlanDef plan = ParsePlan(LogNet("a", "a") +
                           "execution_step { name: 's' network: 'a' "
                           "should_stop_blob: 'nowhere' }");
  absl::Status s = RunPlan(&ws_, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("should_stop_blob 'nowhere' of step 's'"));
  EXPECT_THAT(Log(), ElementsAre());
}

TEST_F(PlanExecutorTest, StopBlobMustBeBoolScalar) {
  PlanDef plan = ParsePlan(
      "network { name: 'a' op { type: 'TestIncrement' output: 'n' } }"
      "execution_step { name: 's' network: 'a' should_stop_blob: 'n' }");
  absl::Status s = RunPlan(&ws_, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("should_stop_blob 'n' must hold a bool"));
}

// A whole subtree without create_workspace is built before any of it runs,
// so a later substep's outputs already exist when an earlier one runs.
TEST_F(PlanExecutorTest, SubtreeIsBuiltBeforeItRuns) {
  PlanDef plan = ParsePlan(
      LogNet("a", "a") +
      "network { name: 'b' op { type: 'TestIncrement' output: 'made_by_b' } }"
      "execution_step { name: 's' "
      "  substep { name: 'sa' network: 'a' }"
      "  substep { name: 'sb' network: 'b' } }");
  // 'a' cannot observe it directly, so check the blob exists after a failing
  // first substep stops the run before 'b' runs.
  plan.mutable_network(0)->mutable_op(0)->set_type("TestFail");
  absl::Status s = RunPlan(&ws_, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  ASSERT_NE(ws_.GetBlob("made_by_b"), nullptr);
  EXPECT_FALSE(ws_.GetBlob("made_by_b")->IsInitialized());
}

TEST_F(PlanExecutorTest, CreateWorkspaceWritesThroughAndDropsNewBlobs) {
  ws_.SetTensor("shared", Tensor::Scalar<int64_t>(10));
  PlanDef plan = ParsePlan(
      "network { name: 'a' op { type: 'TestIncrement' output: 'shared' }"
      "  op { type: 'TestIncrement' output: 'local_only' } }"
      "execution_step { name: 's' network: 'a' create_workspace: true "
      "  num_iter: 2 }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_EQ(ws_.GetTensor("shared").value()->scalar<int64_t>(), 12);
  EXPECT_FALSE(ws_.HasBlob("local_only"));
  EXPECT_THAT(ws_.LocalBlobNames(), ElementsAre("shared"));
  // Running again builds a fresh child: local_only starts over at 0.
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_EQ(ws_.GetTensor("shared").value()->scalar<int64_t>(), 14);
}

TEST_F(PlanExecutorTest, ConcurrentInstancesEachGetAChildWorkspace) {
  PlanDef plan = ParsePlan(
      "network { name: 'a' op { type: 'TestLog' arg { name: 'tag' s: 'i' } }"
      "  op { type: 'TestIncrement' output: 'mine' } }"
      "execution_step { name: 'p' num_concurrent_instances: 4 "
      "  substep { name: 'inst' network: 'a' create_workspace: true } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  EXPECT_THAT(Log(), ElementsAre("i", "i", "i", "i"));
  EXPECT_FALSE(ws_.HasBlob("mine"));
}

// One failing concurrent substep stops an endless sibling at its next
// iteration boundary, and its error is the one returned.
TEST_F(PlanExecutorTest, ConcurrentFailureCancelsSiblingsAndReturnsFirstError) {
  PlanDef plan = ParsePlan(
      "network { name: 'init' op { type: 'TestSetBool' output: 'never' "
      "  arg { name: 'value' i: 0 } } }"
      "network { name: 'fail' op { type: 'TestSleep' arg { name: 'ms' i: 5 } }"
      "  op { type: 'TestFail' arg { name: 'message' s: 'boom' } } }"
      "network { name: 'spin' op { type: 'TestSleep' arg { name: 'ms' i: 1 } }"
      "}"
      "execution_step { name: 'init' network: 'init' }"
      "execution_step { name: 'c' concurrent_substeps: true "
      "  substep { name: 'f' network: 'fail' }"
      "  substep { name: 'loop' network: 'spin' should_stop_blob: 'never' }"
      "}");
  absl::Status s = RunPlan(&ws_, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("boom"));
  EXPECT_THAT(s.message(), HasSubstr("net 'fail'"));
}

TEST_F(PlanExecutorTest, ReporterRunsPeriodicallyAndOnceAfterTheBody) {
  PlanDef plan = ParsePlan(
      LogNet("report", "r") +
      "network { name: 'work' op { type: 'TestSleep' arg { name: 'ms' i: 60 } }"
      "  op { type: 'TestLog' arg { name: 'tag' s: 'w' } } }"
      "execution_step { name: 'body' "
      "  substep { name: 'rep' network: 'report' run_every_ms: 25 }"
      "  substep { name: 'w' network: 'work' } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  std::vector<std::string> log = Log();
  // The body sleeps 60 ms with a 25 ms period: the reporter runs at least
  // once while it runs, and once more, last, after it.
  const auto w = std::find(log.begin(), log.end(), "w");
  ASSERT_NE(w, log.end());
  EXPECT_GE(std::count(log.begin(), w, "r"), 1);
  EXPECT_EQ(log.back(), "r");
  EXPECT_EQ(std::count(log.begin(), log.end(), "w"), 1);
}

TEST_F(PlanExecutorTest, StopRequestEndsBetweenNets) {
  RunControl control;
  control.stop_requested = true;
  PlanDef plan =
      ParsePlan(LogNet("a", "a") + "execution_step { name: 's' network: 'a' }");
  absl::Status s = RunPlan(&ws_, plan, &control);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("before net 'a'"));
  EXPECT_THAT(Log(), ElementsAre());
}

TEST_F(PlanExecutorTest, NetsAreSharedWithinOneWorkspace) {
  // Both steps name net 'a'; the TestSetBool op keeps its run count across
  // them because the instance is shared.
  PlanDef plan = ParsePlan(
      "network { name: 'a' op { type: 'TestSetBool' output: 'flag' "
      "  arg { name: 'after' i: 2 } } }"
      "execution_step { name: 's1' network: 'a' }"
      "execution_step { name: 's2' substep { name: 'x' network: 'a' } }");
  ASSERT_TRUE(RunPlan(&ws_, plan).ok());
  // Top-level steps are built one at a time in the same workspace, and the
  // second reuses the first's instance, so the second run sees after=2.
  EXPECT_TRUE(ws_.GetTensor("flag").value()->scalar<bool>());
}

TEST_F(PlanExecutorTest, DuplicateNetNamesAreRejected) {
  PlanDef plan = ParsePlan(LogNet("a", "a") + LogNet("a", "b"));
  absl::Status s = RunPlan(&ws_, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("defines net 'a' twice"));
}

// An opaque blob type with no serializer, for the cannot-save case.
struct Opaque {};

// MakeOpaque(-> out): stores an Opaque in `out`.
class MakeOpaqueOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    OutputBlob(0)->Reset(std::make_unique<Opaque>());
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TestMakeOpaque, MakeOpaqueOp);

// A create_workspace step of three nets (log a, b, c); `extra` goes into
// the first net's ops.
PlanDef ThreeNetsInChildWorkspace(const std::string& extra = "") {
  return ParsePlan(
      "network { name: 'a' op { type: 'TestLog' arg { name: 'tag' s: 'a' } } "
      "op { type: 'TestIncrement' output: 'n' } " +
      extra + " } " + LogNet("b", "b") + LogNet("c", "c") +
      "execution_step { name: 'child' create_workspace: true "
      "substep { name: 'loop' network: 'a' network: 'b' network: 'c' "
      "num_iter: 2 } }");
}

TEST_F(PlanExecutorTest, StoppedRunContinuesFromItsPosition) {
  PlanDef plan = ThreeNetsInChildWorkspace();
  RunControl control;
  control.stop_at_check.store(4);  // before net b of iteration 1
  PlanPosition position;
  absl::Status stopped =
      RunPlan(&ws_, plan, {.control = &control, .stopped_at = &position});
  EXPECT_TRUE(IsStopRequest(stopped)) << stopped;
  EXPECT_THAT(Log(), ElementsAre("a", "b", "c", "a"));
  EXPECT_EQ(position.steps_done(), 0);
  EXPECT_EQ(position.step().name(), "child");
  ASSERT_EQ(position.step().substep_size(), 1);
  EXPECT_EQ(position.step().substep(0).iteration(), 1);
  EXPECT_EQ(position.step().substep(0).nets_done(), 1);
  // The child workspace's counter went with the position.
  ASSERT_EQ(position.step().local_blob_size(), 1);
  EXPECT_EQ(position.step().local_blob(0).key(), "n#%0");
  EXPECT_TRUE(position.cannot_save().empty());

  ClearLog();
  ASSERT_TRUE(RunPlan(&ws_, plan, {.resume_from = &position}).ok());
  EXPECT_THAT(Log(), ElementsAre("b", "c"));
}

TEST_F(PlanExecutorTest, PositionsThatDoNotFitThePlanAreRefused) {
  PlanDef plan = ThreeNetsInChildWorkspace();
  RunControl control;
  control.stop_at_check.store(1);
  PlanPosition position;
  ASSERT_TRUE(IsStopRequest(
      RunPlan(&ws_, plan, {.control = &control, .stopped_at = &position})));
  PlanPosition renamed = position;
  renamed.mutable_step()->set_name("other");
  absl::Status s = RunPlan(&ws_, plan, {.resume_from = &renamed});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("does not fit step 'child'"));
  PlanPosition negative = position;
  negative.mutable_step()->mutable_substep(0)->set_nets_done(-1);
  EXPECT_EQ(RunPlan(&ws_, plan, {.resume_from = &negative}).code(),
            absl::StatusCode::kFailedPrecondition);
  PlanPosition other_plan = position;
  other_plan.set_plan("elsewhere");
  EXPECT_EQ(RunPlan(&ws_, plan, {.resume_from = &other_plan}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PlanExecutorTest, AStopWhoseStateCannotBeSavedSaysWhy) {
  PlanDef plan = ThreeNetsInChildWorkspace(
      "op { type: 'TestMakeOpaque' output: 'opaque' }");
  RunControl control;
  control.stop_at_check.store(1);  // after net a made the opaque blob
  PlanPosition position;
  absl::Status stopped =
      RunPlan(&ws_, plan, {.control = &control, .stopped_at = &position});
  EXPECT_TRUE(IsStopRequest(stopped)) << stopped;
  EXPECT_THAT(position.cannot_save(), HasSubstr("'opaque'"));
}

}  // namespace
}  // namespace jobgraph

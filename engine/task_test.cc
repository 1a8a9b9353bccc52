#include "engine/task.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Text(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(m, &text);
  return text;
}

// Builds the same small group; used to check names do not depend on what was
// built before.
TaskGroupDef BuildGroup() {
  TaskGroup group("epoch");
  Task& task = group.NewTask(Node("trainer_0"));
  NetBuilder& net = task.net();
  BlobRef a = net.Const<int64_t>("", {1});
  BlobRef b = net.Const<int64_t>("", {2});
  net.Add(a, b);
  net.Loop(2, [&](NetBuilder& body) { body.Add(a, b, a); });
  task.init_net().Const<int64_t>("init_only", {0});
  return group.Build().value();
}

TEST(NetBuilder, BuildingTwiceGivesIdenticalProtos) {
  TaskGroupDef first = BuildGroup();
  TaskGroupDef unrelated = BuildGroup();  // consumes no global counter
  TaskGroupDef second = BuildGroup();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(first, second))
      << Text(first) << "\nvs\n"
      << Text(second);
}

TEST(NetBuilder, AutoNamesFollowCaffe2Rules) {
  TaskGroup group("init");
  Task& task = group.NewTask(Node("trainer_1"));
  NetBuilder& net = task.net();
  BlobRef first = net.Const<int64_t>("", {100});
  BlobRef second = net.Const<int64_t>("", {5});
  BlobRef named = net.Const<int64_t>("total", {7});
  EXPECT_EQ(first.name(), "init/trainer_1/task/GivenTensorInt64Fill:0");
  EXPECT_EQ(second.name(), "init/trainer_1/task/GivenTensorInt64Fill_2:0");
  EXPECT_EQ(named.name(), "total");
  EXPECT_EQ(first.node(), "trainer_1");
  net.NewNet();
  BlobRef next_net = net.Const<int64_t>("", {1});
  EXPECT_EQ(next_net.name(), "init/trainer_1/task_1/GivenTensorInt64Fill:0");
}

TEST(NetBuilder, OnlyNetsBecomeOneStepMixedChildrenBecomeSubsteps) {
  TaskGroup group("g");
  Task& task = group.NewTask(Node("n"));
  task.net().Const<int64_t>("x", {1});
  task.net().NewNet();
  task.net().Const<int64_t>("y", {1});
  TaskDef flat = task.Build().value();
  ASSERT_EQ(flat.plan().execution_step_size(), 1);
  const ExecutionStep& step = flat.plan().execution_step(0);
  EXPECT_EQ(step.name(), "g/n/task");
  EXPECT_THAT(step.network(), ElementsAre("g/n/task", "g/n/task_1"));
  EXPECT_EQ(step.substep_size(), 0);

  task.net().Loop(3, [](NetBuilder& body) { body.Const<int64_t>("z", {1}); });
  TaskDef mixed = task.Build().value();
  const ExecutionStep& outer = mixed.plan().execution_step(0);
  ASSERT_EQ(outer.substep_size(), 3);
  EXPECT_EQ(outer.substep(2).name(), "g/n/task/loop");
  EXPECT_EQ(outer.substep(2).num_iter(), 3);
}

TEST(NetBuilder, StopIfUsesAStopBlobResetAtTheStart) {
  TaskGroup group("g");
  Task& task = group.NewTask(Node("n"));
  task.net().Loop([](NetBuilder& body) {
    body.StopIf(body.ConstScalar<bool>("flag", true));
  });
  TaskDef def = task.Build().value();
  ASSERT_EQ(def.plan().execution_step(0).substep_size(), 1);
  const ExecutionStep& loop = def.plan().execution_step(0).substep(0);
  EXPECT_EQ(loop.should_stop_blob(), "g/n/task/loop/stop_blob");
  EXPECT_FALSE(loop.has_num_iter());
  ASSERT_GE(loop.network_size(), 2);
  EXPECT_EQ(loop.network(0), "g/n/task/loop/stop_init");
}

TEST(NetBuilder, LoopWithoutCountOrStopIsAnError) {
  TaskGroup group("g");
  Task& task = group.NewTask(Node("n"));
  task.net().Loop([](NetBuilder& body) { body.Const<int64_t>("z", {1}); });
  absl::StatusOr<TaskDef> def = task.Build();
  EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(def.status().message(), HasSubstr("never calls StopIf"));
}

TEST(Task, FullNamesAreUniqueWithinTheGroup) {
  TaskGroup group;
  Task& a = group.NewTask(Node("n"));
  Task& b = group.NewTask(Node("n"));
  Task& c = group.NewTask(Node("m"));
  Task& d = group.NewTask(Node("n"), {.name = "pipe"});
  EXPECT_EQ(a.name(), "n/task");
  EXPECT_EQ(b.name(), "n/task:1");
  EXPECT_EQ(c.name(), "m/task");
  EXPECT_EQ(d.name(), "n/pipe");
  EXPECT_THAT(group.used_nodes(), ElementsAre("n", "m"));
}

TEST(Task, StepIsWrappedInCaffe2Order) {
  TaskGroup group("g", PRIVATE);
  Task& task = group.NewTask(Node("n"), {.num_instances = 3});
  task.net().Const<int64_t>("body", {1});
  task.init_net().Const<int64_t>("ti", {1});
  task.exit_net().Const<int64_t>("te", {1});
  task.instance_init_net().Const<int64_t>("ii", {1});
  task.instance_exit_net().Const<int64_t>("ie", {1});
  TaskDef def = task.Build().value();
  const ExecutionStep& outer = def.plan().execution_step(0);
  EXPECT_EQ(outer.name(), "g/n/task");
  EXPECT_TRUE(outer.create_workspace());  // PRIVATE
  ASSERT_EQ(outer.substep_size(), 3);
  EXPECT_EQ(outer.substep(0).name(), "g/n/task:init");
  EXPECT_EQ(outer.substep(2).name(), "g/n/task:exit");
  const ExecutionStep& parallel = outer.substep(1);
  EXPECT_EQ(parallel.name(), "g/n/task:parallel");
  EXPECT_EQ(parallel.num_concurrent_instances(), 3);
  ASSERT_EQ(parallel.substep_size(), 1);
  const ExecutionStep& instance = parallel.substep(0);
  EXPECT_EQ(instance.name(), "g/n/task:instance");
  EXPECT_TRUE(instance.create_workspace());
  ASSERT_EQ(instance.substep_size(), 3);
  EXPECT_EQ(instance.substep(0).name(), "g/n/task:instance:init");
  EXPECT_EQ(instance.substep(1).name(), "g/n/task");
  EXPECT_EQ(instance.substep(2).name(), "g/n/task:instance:exit");
}

TEST(TaskGroup, WorkspaceTypesFollowCaffe2Rules) {
  TaskGroup untyped;
  Task& first = untyped.NewTask(Node("n"));
  EXPECT_EQ(first.workspace_type(), PRIVATE);
  EXPECT_EQ(untyped.workspace_type(), PRIVATE);

  TaskGroup global("init", GLOBAL);
  EXPECT_EQ(global.NewTask(Node("n")).workspace_type(), GLOBAL);

  TaskGroup takes_first;
  takes_first.NewTask(Node("n"), {.workspace_type = GLOBAL});
  EXPECT_EQ(takes_first.workspace_type(), GLOBAL);
  EXPECT_EQ(takes_first.NewTask(Node("n")).workspace_type(), GLOBAL);

  TaskGroup conflict("mixed", GLOBAL);
  conflict.NewTask(Node("n"), {.workspace_type = PRIVATE});
  absl::StatusOr<TaskGroupDef> def = conflict.Build();
  EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(def.status().message(),
              HasSubstr("is PRIVATE but its group 'mixed' is GLOBAL"));
}

TEST(TaskGroup, DebugStringIsTextProto) {
  TaskGroup group("g");
  group.NewTask(Node("n")).net().Const<int64_t>("x", {4});
  TaskGroupDef parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(group.DebugString(),
                                                            &parsed));
  EXPECT_EQ(parsed.task(0).plan().network(0).op(0).type(),
            "GivenTensorInt64Fill");
}

}  // namespace
}  // namespace jobgraph

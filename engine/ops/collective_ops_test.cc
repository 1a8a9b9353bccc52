// Collective operators under LocalSession: every node of a group in one
// process (tests/mpi_test.cc runs the same ops across MPI ranks).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/net_builder.h"
#include "engine/operator.h"
#include "engine/plan_executor.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(CollectiveOps, AllreduceSumsInNodeOrderOnEveryNode) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 in node
  // order gives 0 (the 1 is lost), any order adding -1e8 first gives 1.
  const std::vector<float> values = {1e8f, 1.0f, -1e8f};
  for (int i = 0; i < 3; ++i) {
    Task& task = group.NewTask(Node(absl::StrCat("n", i)));
    task.net().Const(Tensor::FromVector<float>({values[i], float(i)}), "x");
    task.net().Op("Allreduce", {BlobRef("x")}, {BlobRef("s")});
  }
  ASSERT_TRUE(session.Run(group).ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Tensor> s = session.FetchBlob(absl::StrCat("n", i), "s");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_THAT(Floats(*s), ElementsAre(0.0f, 3.0f)) << i;
  }
}

TEST(CollectiveOps, BroadcastAndBarrier) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  for (int i = 0; i < 3; ++i) {
    Task& task = group.NewTask(Node(absl::StrCat("n", i)));
    task.net().ConstScalar<int64_t>("c", 10 * i);
    task.net().Op("Barrier", {}, {});
    task.net().Op("Broadcast", {BlobRef("c")}, {BlobRef("c")},
                  {MakeArg("root", std::string("n2"))});
    task.net().Op("Broadcast", {BlobRef("c")}, {BlobRef("first")});
  }
  ASSERT_TRUE(session.Run(group).ok());
  for (int i = 0; i < 3; ++i) {
    const std::string node = absl::StrCat("n", i);
    EXPECT_EQ(session.FetchBlob(node, "c")->scalar<int64_t>(), 20);
    EXPECT_EQ(session.FetchBlob(node, "first")->scalar<int64_t>(), 20);
  }
}

TEST(CollectiveOps, ShapesMustAgree) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  for (int i = 0; i < 2; ++i) {
    Task& task = group.NewTask(Node(absl::StrCat("n", i)));
    task.net().Const(Tensor(FLOAT, {i + 1}), "x");
    task.net().Op("Allreduce", {BlobRef("x")}, {BlobRef("s")});
  }
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("every node must give the same dtype "
                                     "and shape"));
}

TEST(CollectiveOps, NodesOutOfStepAreAnError) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  Task& a = group.NewTask(Node("n0"));
  a.net().Op("Barrier", {}, {});
  Task& b = group.NewTask(Node("n1"));
  b.net().ConstScalar<float>("x", 1);
  b.net().Op("Allreduce", {BlobRef("x")}, {BlobRef("x")});
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("collectives out of step"));
}

TEST(CollectiveOps, AFailingNodeReleasesTheOthers) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  Task& a = group.NewTask(Node("n0"));
  // Fails before reaching the barrier the other node waits in.
  a.net().Op("Allreduce", {BlobRef("missing")}, {BlobRef("y")});
  Task& b = group.NewTask(Node("n1"));
  b.net().Op("Barrier", {}, {});
  absl::Status s = session.Run(group);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("node 'n0'"));
}

TEST(CollectiveOps, AGroupWithCollectivesIsNotStoppedInTheMiddle) {
  LocalSession session;
  TaskGroup group("g", GLOBAL);
  for (int i = 0; i < 2; ++i) {
    Task& task = group.NewTask(Node(absl::StrCat("n", i)));
    task.net().ConstScalar<float>("x", 1);
    task.net().Op("Allreduce", {BlobRef("x")}, {BlobRef("x")});
    task.exit_net().ConstScalar<float>("after", 1);
  }
  RunControl stop;
  stop.stop_requested.store(true);
  ASSERT_TRUE(session.Run(group, {.stop = &stop}).ok());
  EXPECT_EQ(session.FetchBlob("n1", "x")->scalar<float>(), 2.0f);
  EXPECT_TRUE(session.FetchBlob("n1", "after").ok());
}

TEST(CollectiveOps, OutsideASessionRunIsAnError) {
  Workspace ws(nullptr, "n0");
  OperatorDef def;
  def.set_type("Barrier");
  absl::StatusOr<std::unique_ptr<OperatorBase>> op =
      OperatorRegistry::Global().Create(def, &ws);
  ASSERT_TRUE(op.ok()) << op.status();
  absl::Status s = (*op)->Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("runs only inside a session's Run"));
}

}  // namespace
}  // namespace jobgraph

#include "engine/session.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/counter.h"
#include "engine/net_builder.h"
#include "engine/test_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

TEST(LocalSession, NodesHaveSeparateRootWorkspaces) {
  TaskGroup group("init", GLOBAL);
  for (const char* node : {"trainer_0", "trainer_1"}) {
    Task& task = group.NewTask(Node(node));
    task.net().Op("TestIncrement", {}, {BlobRef("count")});
  }
  LocalSession session;
  ASSERT_TRUE(session.Run(group).ok());
  ASSERT_TRUE(session.Run(group).ok());
  EXPECT_EQ(session.FetchBlob("trainer_0", "count")->scalar<int64_t>(), 2);
  EXPECT_EQ(session.FetchBlob("trainer_1", "count")->scalar<int64_t>(), 2);
  EXPECT_THAT(session.nodes(), ElementsAre("trainer_0", "trainer_1"));
}

TEST(LocalSession, PrivateTasksPublishOnlyTheirOutputs) {
  TaskGroup group("epoch", PRIVATE);
  Task& task = group.NewTask(Node("n"));
  task.net().Op("TestIncrement", {}, {BlobRef("published")});
  task.net().Op("TestIncrement", {}, {BlobRef("scratch")});
  TaskOutput out = task.AddOutput(BlobRef("published"));
  LocalSession session;
  ASSERT_TRUE(session.Run(group).ok());
  ASSERT_TRUE(session.Run(group).ok());
  EXPECT_EQ(session.Fetch(out)->scalar<int64_t>(), 2);
  EXPECT_THAT(session.NodeWorkspace("n")->LocalBlobNames(),
              ElementsAre("published"));
}

TEST(LocalSession, TasksOfANodeRunConcurrently) {
  TaskGroup group("g", GLOBAL);
  // Two tasks that each wait for the other's log entry would deadlock if run
  // one after the other; instead check both ran and the plan is concurrent.
  for (const char* tag : {"a", "b"}) {
    Task& task = group.NewTask(Node("n"), {.name = tag});
    task.net().Op("TestLog", {}, std::vector<BlobRef>{},
                  {MakeArg("tag", std::string(tag))});
  }
  TaskGroupDef def = group.Build().value();
  std::vector<NodePlan> plans = PlanByNode(def).value();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_TRUE(plans[0].plan.execution_step(0).concurrent_substeps());
  EXPECT_EQ(plans[0].plan.execution_step(0).name(), "n:body");
  testing::ClearLog();
  LocalSession session;
  ASSERT_TRUE(session.Run(def).ok());
  EXPECT_THAT(testing::Log(), UnorderedElementsAre("a", "b"));
}

TEST(LocalSession, FailingNodeStopsTheOthersAndItsErrorIsReturned) {
  TaskGroup group("g", GLOBAL);
  group.NewTask(Node("bad"))
      .net()
      .Op("TestFail", {}, std::vector<BlobRef>{},
          {MakeArg("message", "disk on fire")});
  Task& spinner = group.NewTask(Node("good"));
  spinner.net().Loop(100000, [](NetBuilder& body) {
    body.Op("TestSleep", {}, std::vector<BlobRef>{}, {MakeArg("ms", 1)});
  });
  LocalSession session;
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("node 'bad'"));
  EXPECT_THAT(s.message(), HasSubstr("disk on fire"));
}

TEST(LocalSession, SameGroupRunsOnAnotherSession) {
  TaskGroup group("g", GLOBAL);
  group.NewTask(Node("n")).net().Op("TestIncrement", {}, {BlobRef("c")});
  TaskGroupDef def = group.Build().value();
  LocalSession one;
  LocalSession two;
  ASSERT_TRUE(one.Run(def).ok());
  ASSERT_TRUE(one.Run(def).ok());
  ASSERT_TRUE(two.Run(def).ok());
  EXPECT_EQ(one.FetchBlob("n", "c")->scalar<int64_t>(), 2);
  EXPECT_EQ(two.FetchBlob("n", "c")->scalar<int64_t>(), 1);
}

TEST(LocalSession, FetchErrorsNameNodeAndBlob) {
  LocalSession session;
  auto no_node = session.FetchBlob("ghost", "x");
  EXPECT_EQ(no_node.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_node.status().message(), HasSubstr("node 'ghost'"));
  session.NodeWorkspace("n");
  auto no_blob = session.FetchBlob("n", "x");
  EXPECT_EQ(no_blob.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_blob.status().message(), HasSubstr("blob 'x'"));
}

TEST(LocalSession, RequestStopCancelsRuns) {
  TaskGroup group("g", GLOBAL);
  group.NewTask(Node("n")).net().Op("TestIncrement", {}, {BlobRef("c")});
  LocalSession session;
  session.RequestStop();
  EXPECT_EQ(session.Run(group).code(), absl::StatusCode::kCancelled);
}

TEST(LocalSession, EmptyGroupIsANoOp) {
  LocalSession session;
  EXPECT_TRUE(session.Run(TaskGroup("empty")).ok());
}

TEST(LocalSession, SnapshotBlobsIsFrozenAgainstLaterRuns) {
  LocalSession session;
  TaskGroup init("init", GLOBAL);
  NetBuilder& net = init.NewTask(Node("n")).net();
  net.Const<int64_t>("x", {1, 2, 3});
  net.CreateCounter(5, BlobRef("c"));
  ASSERT_TRUE(session.Run(init).ok());
  absl::StatusOr<std::vector<BlobSnapshot>> snapshot =
      session.SnapshotBlobs("n", {"x", "c"});
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->size(), 2u);
  // The tensor is shared, not copied.
  const Tensor* x = *session.NodeWorkspace("n")->GetTensor("x");
  EXPECT_EQ((*snapshot)[0].blob->Get<Tensor>().raw_data(), x->raw_data());

  TaskGroup write("write", GLOBAL);
  NetBuilder& w = write.NewTask(Node("n")).net();
  w.Add(BlobRef("x"), BlobRef("x"), BlobRef("x"));
  w.CountDown(BlobRef("c"));
  ASSERT_TRUE(session.Run(write).ok());
  EXPECT_EQ((*snapshot)[0].name, "x");
  EXPECT_EQ((*snapshot)[0].blob->Get<Tensor>().DebugString(),
            "int64[3] {1, 2, 3}");
  EXPECT_EQ(session.FetchBlob("n", "x")->DebugString(), "int64[3] {2, 4, 6}");
  // The counter was copied through its serializer: still at 5.
  EXPECT_EQ((*snapshot)[1].blob->Get<Counter>().Retrieve(), 5);
  EXPECT_EQ(session.NodeWorkspace("n")->GetBlob("c")->Get<Counter>().Retrieve(),
            4);

  EXPECT_EQ(session.SnapshotBlobs("n", {"nope"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.SnapshotBlobs("m", {"x"}).status().code(),
            absl::StatusCode::kNotFound);
}

// One rank: the one piece is this rank's own, returned as it is.
TEST(LocalSession, AllToAllReturnsTheOnePiece) {
  LocalSession session;
  const std::string big(3 << 20, 'x');
  absl::StatusOr<std::vector<std::string>> got = session.AllToAll({big});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_TRUE((*got)[0] == big);
  got = session.AllToAll({""});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, ElementsAre(""));
}

TEST(LocalSession, AllToAllNeedsExactlyOnePiece) {
  LocalSession session;
  for (size_t count : {0, 2, 5}) {
    absl::StatusOr<std::vector<std::string>> got =
        session.AllToAll(std::vector<std::string>(count, "p"));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << count;
    EXPECT_THAT(got.status().message(), HasSubstr(absl::StrCat("got ", count)));
  }
}

}  // namespace
}  // namespace jobgraph

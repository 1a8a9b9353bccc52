// NetBuilder's control flow run for real: Loop, StopIf and Stop through a
// LocalSession with the core operators.

#include "engine/net_builder.h"

#include "engine/session.h"
#include "engine/task.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

// Runs one GLOBAL task built by `build` and returns the int64 blob `count`.
int64_t RunAndCount(const std::function<void(NetBuilder&)>& build) {
  TaskGroup group("g", GLOBAL);
  NetBuilder& net = group.NewTask(Node("n")).net();
  net.Const<int64_t>("count", {0});
  build(net);
  LocalSession session;
  absl::Status s = session.Run(group);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<Tensor> count = session.FetchBlob("n", "count");
  EXPECT_TRUE(count.ok()) << count.status();
  return count.ok() ? count->data<int64_t>()[0] : -1;
}

TEST(NetBuilderRun, CountedLoopRunsItsBodyExactlyThatOften) {
  EXPECT_EQ(
      RunAndCount([](NetBuilder& net) {
        BlobRef one = net.Const<int64_t>("one", {1});
        net.Loop(3, [&](NetBuilder& body) { body.Add("count", one, "count"); });
      }),
      3);
}

TEST(NetBuilderRun, CountedLoopWithAStopIfThatNeverFiresRunsToItsCount) {
  EXPECT_EQ(RunAndCount([](NetBuilder& net) {
              BlobRef one = net.Const<int64_t>("one", {1});
              BlobRef never = net.ConstScalar<bool>("never", false);
              net.Loop(3, [&](NetBuilder& body) {
                body.Add("count", one, "count");
                body.StopIf(never);
              });
            }),
            3);
}

TEST(NetBuilderRun, StopIfEndsACountedLoopEarly) {
  // Stops once count reaches 2: the check after the add sees it.
  EXPECT_EQ(RunAndCount([](NetBuilder& net) {
              BlobRef one = net.Const<int64_t>("one", {1});
              BlobRef two = net.Const<int64_t>("two", {2});
              net.Loop(10, [&](NetBuilder& body) {
                body.Add("count", one, "count");
                body.StopIf(body.GE("count", two));
              });
            }),
            2);
}

TEST(NetBuilderRun, StopIfEndsAnUncountedLoop) {
  EXPECT_EQ(RunAndCount([](NetBuilder& net) {
              BlobRef one = net.Const<int64_t>("one", {1});
              BlobRef five = net.Const<int64_t>("five", {5});
              net.Loop([&](NetBuilder& body) {
                body.Add("count", one, "count");
                body.StopIf(body.GE("count", five));
              });
            }),
            5);
}

TEST(NetBuilderRun, StopEndsTheLoopAfterTheOpenNet) {
  // The add before Stop() runs once; the add after it never does.
  EXPECT_EQ(RunAndCount([](NetBuilder& net) {
              BlobRef one = net.Const<int64_t>("one", {1});
              BlobRef hundred = net.Const<int64_t>("hundred", {100});
              net.Loop(10, [&](NetBuilder& body) {
                body.Add("count", one, "count");
                body.Stop();
                body.Add("count", hundred, "count");
              });
            }),
            1);
}

}  // namespace
}  // namespace jobgraph

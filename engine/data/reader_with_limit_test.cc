// ReaderWithLimit at the engine level: Caffe2's checkpoint_test pipeline
// (EXPECTED_TOTALS = 103, 115, 136, 145) run epoch by epoch on a
// LocalSession, the edge cases of the limit, and the exact net order.

#include "engine/data/reader_with_limit.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/data_test_util.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/record.h"
#include "engine/data/tree_cursor.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::FetchBool;
using ::jobgraph::data_test::FetchInt;
using ::testing::ElementsAre;

constexpr char kNode[] = "trainer_0";

// The checkpoint_test pipeline: an init group that makes val = [0, rows), the
// reader's cursor and total = [100]; an epoch group whose pipe adds each
// batch into total, at most `limit` batches per epoch.
struct Pipeline {
  TaskGroup init{"init", GLOBAL};
  TaskGroup epoch{"epoch", PRIVATE};
  BlobRef total;
  BlobRef data_finished;
  Reader limited;
};

std::unique_ptr<Pipeline> BuildPipeline(int64_t rows,
                                        std::optional<int64_t> limit) {
  auto p = std::make_unique<Pipeline>();
  Task& init = p->init.NewTask(Node(kNode));
  Record rec = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(rows)}});
  Dataset dataset(rec, "dataset:0");
  Reader reader = dataset.NewReader(init.net());
  p->total = init.net().Const<int64_t>("total", {100});
  ReaderWithLimit limited(reader, limit);
  const BlobRef total = p->total;
  Pipe(p->epoch, Node(kNode), limited,
       [total](NetBuilder& net, const Record& row) {
         net.Add(total, row.Field("val"), total);
       });
  p->data_finished = limited.data_finished();
  p->limited = limited;
  return p;
}

struct EpochResult {
  int64_t total;
  bool data_finished;
  int64_t cursor;
};

// Runs the epoch group once and reads total, data_finished and the cursor.
EpochResult RunEpoch(LocalSession& session, const Pipeline& p) {
  absl::Status run = session.Run(p.epoch);
  EXPECT_TRUE(run.ok()) << run;
  EpochResult r{};
  absl::StatusOr<int64_t> total = FetchInt(session, kNode, p.total.name());
  EXPECT_TRUE(total.ok()) << total.status();
  r.total = total.value_or(-1);
  absl::StatusOr<bool> finished =
      FetchBool(session, kNode, p.data_finished.name());
  EXPECT_TRUE(finished.ok()) << finished.status();
  r.data_finished = finished.value_or(false);
  const Blob* cursor =
      session.NodeWorkspace(kNode)->GetBlob("dataset:0_cursor");
  r.cursor = cursor != nullptr && cursor->IsType<TreeCursor>()
                 ? cursor->Get<TreeCursor>().offset()
                 : -1;
  return r;
}

TEST(ReaderWithLimitTest, ExpectedTotals) {
  auto p = BuildPipeline(10, 3);
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  const int64_t totals[] = {103, 115, 136, 145};
  const bool finished[] = {false, false, false, true};
  const int64_t cursors[] = {3, 6, 9, 10};
  for (int e = 0; e < 4; ++e) {
    SCOPED_TRACE(e + 1);
    EpochResult r = RunEpoch(session, *p);
    EXPECT_EQ(r.total, totals[e]);
    EXPECT_EQ(r.data_finished, finished[e]);
    EXPECT_EQ(r.cursor, cursors[e]);
  }
  // A fifth epoch (a job resumed after the last one) reads nothing more.
  EpochResult r = RunEpoch(session, *p);
  EXPECT_EQ(r.total, 145);
  EXPECT_TRUE(r.data_finished);
}

TEST(ReaderWithLimitTest, RootWorkspaceHoldsExactlyThePipelineState) {
  auto p = BuildPipeline(10, 3);
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  Workspace* root = session.NodeWorkspace(kNode);
  EXPECT_THAT(root->LocalBlobNames(),
              ElementsAre("dataset:0_cursor", "total", "val"));
  RunEpoch(session, *p);
  // The private epoch task leaves only its output behind; the counter,
  // status and batch blobs vanished with its workspace.
  EXPECT_THAT(root->LocalBlobNames(),
              ElementsAre("dataset:0/limit/data_finished", "dataset:0_cursor",
                          "total", "val"));
  EXPECT_EQ(p->data_finished.name(), "dataset:0/limit/data_finished");
}

TEST(ReaderWithLimitTest, DataSizeAMultipleOfTheLimitCostsAnEmptyEpoch) {
  auto p = BuildPipeline(9, 3);
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  const int64_t totals[] = {103, 115, 136, 136};
  const bool finished[] = {false, false, false, true};
  for (int e = 0; e < 4; ++e) {
    SCOPED_TRACE(e + 1);
    EpochResult r = RunEpoch(session, *p);
    EXPECT_EQ(r.total, totals[e]);
    EXPECT_EQ(r.data_finished, finished[e]);
    EXPECT_EQ(r.cursor, 9 < 3 * (e + 1) ? 9 : 3 * (e + 1));
  }
}

TEST(ReaderWithLimitTest, LimitZeroReadsNothing) {
  auto p = BuildPipeline(10, 0);
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  for (int e = 0; e < 3; ++e) {
    EpochResult r = RunEpoch(session, *p);
    EXPECT_EQ(r.total, 100);
    EXPECT_FALSE(r.data_finished);
    EXPECT_EQ(r.cursor, 0);
  }
}

TEST(ReaderWithLimitTest, LimitOneReadsOneRowPerEpoch) {
  auto p = BuildPipeline(10, 1);
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  int64_t expected = 100;
  for (int e = 0; e < 10; ++e) {
    SCOPED_TRACE(e + 1);
    expected += e;
    EpochResult r = RunEpoch(session, *p);
    EXPECT_EQ(r.total, expected);
    EXPECT_FALSE(r.data_finished);
    EXPECT_EQ(r.cursor, e + 1);
  }
  EpochResult r = RunEpoch(session, *p);
  EXPECT_EQ(r.total, 145);
  EXPECT_TRUE(r.data_finished);
}

TEST(ReaderWithLimitTest, NoLimitReadsEverythingInOneEpoch) {
  for (std::optional<int64_t> limit :
       {std::optional<int64_t>(), std::optional<int64_t>(-1)}) {
    auto p = BuildPipeline(10, limit);
    LocalSession session;
    ASSERT_TRUE(session.Run(p->init).ok());
    EpochResult r = RunEpoch(session, *p);
    EXPECT_EQ(r.total, 145);
    EXPECT_TRUE(r.data_finished);
  }
}

TEST(ReaderWithLimitTest, BatchesAboveOneCountAgainstTheLimitPerBatch) {
  // Batch 4 over 10 rows, two batches per epoch: [0..3] [4..7], then [8, 9]
  // and the empty batch (a short batch is not the end).
  TaskGroup init("init", GLOBAL);
  Task& init_task = init.NewTask(Node(kNode));
  Record rec =
      ConstRecord(init_task.net(), {{"val", Tensor::Iota<int64_t>(10)}});
  Reader reader = Dataset(rec, "dataset:0").NewReader(init_task.net(), 4);
  BlobRef sum = init_task.net().Const<int64_t>("sum", {0});
  BlobRef count = init_task.net().Const<int64_t>("count", {0});
  ReaderWithLimit limited(reader, 2);
  TaskGroup epoch("epoch", PRIVATE);
  Pipe(epoch, Node(kNode), limited, [&](NetBuilder& net, const Record& row) {
    data_test::AccumulateRows(net, row.Field("val"), sum, count);
  });
  LocalSession session;
  ASSERT_TRUE(session.Run(init).ok());
  const int64_t sums[] = {28, 45};
  const int64_t counts[] = {8, 10};
  const bool finished[] = {false, true};
  for (int e = 0; e < 2; ++e) {
    SCOPED_TRACE(e + 1);
    ASSERT_TRUE(session.Run(epoch).ok());
    EXPECT_EQ(*FetchInt(session, kNode, "sum"), sums[e]);
    EXPECT_EQ(*FetchInt(session, kNode, "count"), counts[e]);
    EXPECT_EQ(*FetchBool(session, kNode, limited.data_finished().name()),
              finished[e]);
  }
}

TEST(ReaderWithLimitTest, ResetRewindsAndClearsDataFinished) {
  auto p = BuildPipeline(4, 10);
  TaskGroup rewind("rewind", GLOBAL);
  p->limited.Reset(rewind.NewTask(Node(kNode)).net());
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  EXPECT_EQ(RunEpoch(session, *p).total, 106);
  ASSERT_TRUE(session.Run(rewind).ok());
  EXPECT_FALSE(*FetchBool(session, kNode, p->data_finished.name()));
  EpochResult r = RunEpoch(session, *p);
  EXPECT_EQ(r.total, 112);
  EXPECT_TRUE(r.data_finished);
}

// The nets of the pipe task, in Caffe2's order; the stop check between them
// is what makes the totals above come out.
TEST(ReaderWithLimitTest, NetOrderAndNames) {
  auto p = BuildPipeline(10, 3);
  absl::StatusOr<TaskGroupDef> group = p->epoch.Build();
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->task_size(), 1);
  const TaskDef& task = group->task(0);
  EXPECT_EQ(task.name(), "trainer_0/pipe");
  EXPECT_EQ(task.workspace_type(), PRIVATE);
  EXPECT_THAT(task.output(), ElementsAre("dataset:0/limit/data_finished"));

  std::map<std::string, const NetDef*> nets;
  for (const NetDef& net : task.plan().network()) nets[net.name()] = &net;
  auto op_types = [&](const std::string& net) {
    std::vector<std::string> types;
    for (const OperatorDef& op : nets.at(net)->op()) {
      types.push_back(op.type() + "(" +
                      (op.input_size() > 0 ? op.input(0) : "") + "->" +
                      (op.output_size() > 0 ? op.output(0) : "") + ")");
    }
    return types;
  };
  // [task init, [instance init, body]].
  const ExecutionStep& outer = task.plan().execution_step(0);
  ASSERT_EQ(outer.substep_size(), 2);
  const ExecutionStep& init = outer.substep(0);
  ASSERT_EQ(init.network_size(), 1);
  EXPECT_THAT(op_types(init.network(0)),
              ElementsAre("ConstantFill(->dataset:0/limit/data_finished)",
                          "CreateCounter(->dataset:0/limit/counter)"));
  const ExecutionStep& instance = outer.substep(1);
  ASSERT_EQ(instance.substep_size(), 2);
  EXPECT_THAT(op_types(instance.substep(0).network(0)),
              ElementsAre("ConstantFill(->dataset:0/limit/status)"));
  // The task body holds one child step, the reading loop.
  const ExecutionStep& task_body = instance.substep(1);
  ASSERT_EQ(task_body.substep_size(), 1);
  const ExecutionStep& body = task_body.substep(0);
  EXPECT_EQ(body.should_stop_blob(), "dataset:0/limit/status");
  EXPECT_FALSE(body.only_once());
  ASSERT_EQ(body.network_size(), 4);
  EXPECT_THAT(op_types(body.network(0)),
              ElementsAre("CountDown(dataset:0/limit/counter->"
                          "dataset:0/limit/status)"));
  EXPECT_THAT(op_types(body.network(1)),
              ElementsAre("ReadNextBatch(dataset:0_cursor->dataset:0/read/val)",
                          "IsEmpty(dataset:0/read/val->dataset:0/read/empty)"));
  EXPECT_THAT(op_types(body.network(2)),
              ElementsAre("Copy(dataset:0/read/empty->dataset:0/limit/status)",
                          "AtomicOr(dataset:0/limit/data_finished->"
                          "dataset:0/limit/data_finished)"));
  EXPECT_THAT(op_types(body.network(3)), ElementsAre("Add(total->total)"));
}

TEST(ReaderWithLimitTest, NamesAreDeterministic) {
  auto a = BuildPipeline(10, 3);
  auto b = BuildPipeline(10, 3);
  EXPECT_EQ(a->epoch.DebugString(), b->epoch.DebugString());
  EXPECT_EQ(a->init.DebugString(), b->init.DebugString());
  Record rec;
  rec.AddField("val", BlobRef("val"));
  TaskGroup g;
  NetBuilder& net = g.NewTask(Node(kNode)).net();
  ReaderWithLimit named(Dataset(rec, "d").NewReader(net), 1, "my_limit");
  EXPECT_EQ(named.data_finished().name(), "my_limit/data_finished");
  EXPECT_EQ(named.counter().name(), "my_limit/counter");
  EXPECT_EQ(named.num_iter(), 1);
  EXPECT_EQ(ReaderWithLimit(named, -5).num_iter(), std::nullopt);
}

}  // namespace
}  // namespace jobgraph

namespace jobgraph {
namespace {

// Two limits over one reader each get their own blobs: before they were
// told apart, both created "<reader>/limit/counter" and raced on it.
TEST(ReaderWithLimitNames, TwoLimitsOverOneReaderHaveTheirOwnBlobs) {
  TaskGroup init("init", GLOBAL);
  TaskGroup epoch("epoch", PRIVATE);
  Task& task = init.NewTask(Node(kNode));
  Record rec = ConstRecord(task.net(), {{"val", Tensor::Iota<int64_t>(10)}});
  Reader reader = Dataset(rec, "dataset:0").NewReader(task.net());
  const BlobRef total_a = task.net().Const<int64_t>("total_a", {0});
  const BlobRef total_b = task.net().Const<int64_t>("total_b", {0});
  ReaderWithLimit three(reader, 3);
  ReaderWithLimit two(reader, 2);
  EXPECT_EQ(three.counter().name(), "dataset:0/limit/counter");
  EXPECT_EQ(two.counter().name(), "dataset:0/limit:1/counter");
  EXPECT_EQ(two.data_finished().name(), "dataset:0/limit:1/data_finished");
  // A name given explicitly is used as it is.
  EXPECT_EQ(ReaderWithLimit(reader, 1, "mine").counter().name(),
            "mine/counter");
  for (const auto& [limit, total] :
       {std::pair<ReaderWithLimit, BlobRef>{three, total_a},
        std::pair<ReaderWithLimit, BlobRef>{two, total_b}}) {
    const BlobRef sum = total;
    Pipe(epoch, Node(kNode), limit, [sum](NetBuilder& net, const Record& row) {
      net.Add(sum, row.Field("val"), sum);
    });
  }
  LocalSession session;
  ASSERT_TRUE(session.Run(init).ok());
  ASSERT_TRUE(session.Run(epoch).ok());
  // Five rows in all (which pipe read which depends on scheduling): 0..4.
  EXPECT_EQ(FetchInt(session, kNode, "total_a").value() +
                FetchInt(session, kNode, "total_b").value(),
            0 + 1 + 2 + 3 + 4);
}

}  // namespace
}  // namespace jobgraph

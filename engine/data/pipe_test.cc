// Pipe with concurrent runtime instances: several threads share one reader
// (and its limit) without reading a record twice, skipping one, or reading
// more batches than the limit allows.

#include "engine/data/pipe.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/data_test_util.h"
#include "engine/data/dataset.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::CollectedInts;
using ::jobgraph::data_test::FetchBool;
using ::jobgraph::data_test::FetchInt;
using ::testing::ElementsAre;

constexpr char kNode[] = "trainer_0";
constexpr int64_t kRows = 10000;

// val = [0, rows) read by `threads` instances, each batch's values added to
// "sum" and its rows to "count" (under a lock: they are shared) and recorded
// in the list `tag`.
struct ThreadedPipeline {
  TaskGroup init{"init", GLOBAL};
  TaskGroup epoch{"epoch", PRIVATE};
  BlobRef data_finished;
};

std::unique_ptr<ThreadedPipeline> Build(int threads, int64_t batch_size,
                                        std::optional<int64_t> limit,
                                        const std::string& tag) {
  auto p = std::make_unique<ThreadedPipeline>();
  Task& init = p->init.NewTask(Node(kNode));
  Record rec = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(kRows)}});
  Reader reader = Dataset(rec, "dataset:0").NewReader(init.net(), batch_size);
  BlobRef sum = init.net().Const<int64_t>("sum", {0});
  BlobRef count = init.net().Const<int64_t>("count", {0});
  ReaderWithLimit limited(reader, limit);
  Pipe(
      p->epoch, Node(kNode), limited,
      [=](NetBuilder& net, const Record& batch) {
        data_test::AccumulateRows(net, batch.Field("val"), sum, count);
        data_test::CollectRows(net, batch.Field("val"), tag);
      },
      threads);
  p->data_finished = limited.data_finished();
  return p;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(PipeTest, FourThreadsReadEveryRecordExactlyOnce) {
  auto p = Build(4, 1, std::nullopt, "once");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(*FetchInt(session, kNode, "sum"), kRows * (kRows - 1) / 2);
  EXPECT_EQ(*FetchInt(session, kNode, "count"), kRows);
  EXPECT_EQ(Sorted(CollectedInts("once")), Iota(kRows));
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
}

TEST(PipeTest, FourThreadsWithBatchesOfSeven) {
  auto p = Build(4, 7, std::nullopt, "batches");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(*FetchInt(session, kNode, "sum"), kRows * (kRows - 1) / 2);
  EXPECT_EQ(*FetchInt(session, kNode, "count"), kRows);
  EXPECT_EQ(Sorted(CollectedInts("batches")), Iota(kRows));
}

// The limit is shared: each epoch reads exactly 2500 batches across the four
// threads, and the fifth epoch's empty read sets data_finished.
TEST(PipeTest, FourThreadsShareTheLimit) {
  auto p = Build(4, 1, 2500, "limited");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  for (int e = 1; e <= 4; ++e) {
    SCOPED_TRACE(e);
    ASSERT_TRUE(session.Run(p->epoch).ok());
    EXPECT_EQ(*FetchInt(session, kNode, "count"), 2500 * e);
    EXPECT_FALSE(*FetchBool(session, kNode, p->data_finished.name()));
  }
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(*FetchInt(session, kNode, "count"), kRows);
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
  EXPECT_EQ(*FetchInt(session, kNode, "sum"), kRows * (kRows - 1) / 2);
  EXPECT_EQ(Sorted(CollectedInts("limited")), Iota(kRows));
}

// Four threads write "sum" and "count" (a root blob each, under a lock):
// both take new write generations (Tensor::generation), which incremental
// checkpoints rely on; the dataset they only read keeps its own.
TEST(PipeTest, ThreadsWritingRootBlobsMoveTheirGenerations) {
  auto p = Build(4, 1, 2500, "generations");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  Workspace* root = session.NodeWorkspace(kNode);
  auto generation = [&](const char* name) {
    return root->GetBlob(name)->Get<Tensor>().generation();
  };
  for (int e = 1; e <= 2; ++e) {
    SCOPED_TRACE(e);
    const uint64_t val = generation("val");
    const uint64_t sum = generation("sum");
    const uint64_t count = generation("count");
    ASSERT_TRUE(session.Run(p->epoch).ok());
    EXPECT_EQ(generation("val"), val);
    EXPECT_NE(generation("sum"), sum);
    EXPECT_NE(generation("count"), count);
    EXPECT_EQ(*FetchInt(session, kNode, "count"), 2500 * e);
  }
}

TEST(PipeTest, ASmallLimitIsNeverExceeded) {
  auto p = Build(4, 3, 7, "small");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  for (int e = 1; e <= 3; ++e) {
    ASSERT_TRUE(session.Run(p->epoch).ok());
    EXPECT_EQ(*FetchInt(session, kNode, "count"), 21 * e);
  }
  EXPECT_EQ(Sorted(CollectedInts("small")), Iota(63));
}

TEST(PipeTest, TaskShape) {
  auto p = Build(3, 1, 5, "shape");
  absl::StatusOr<TaskGroupDef> group = p->epoch.Build();
  ASSERT_TRUE(group.ok()) << group.status();
  const TaskDef& task = group->task(0);
  EXPECT_EQ(task.name(), "trainer_0/pipe");
  EXPECT_EQ(task.workspace_type(), PRIVATE);
  EXPECT_THAT(task.output(), ElementsAre("dataset:0/limit/data_finished"));
  // [task init, parallel x3 [instance init, body]].
  const ExecutionStep& outer = task.plan().execution_step(0);
  EXPECT_TRUE(outer.create_workspace());
  ASSERT_EQ(outer.substep_size(), 2);
  const ExecutionStep& parallel = outer.substep(1);
  EXPECT_EQ(parallel.num_concurrent_instances(), 3);
  ASSERT_EQ(parallel.substep_size(), 1);
  EXPECT_TRUE(parallel.substep(0).create_workspace());
}

TEST(PipeTest, ANamedPipeInAGlobalGroup) {
  TaskGroup group("g", GLOBAL);
  TaskOptions init_options;
  init_options.name = "init";
  Task& init = group.NewTask(Node(kNode), init_options);
  Record rec = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(3)}});
  Reader reader = Dataset(rec, "d").NewReader(init.net());
  TaskGroup drain("drain", GLOBAL);
  Task& task = Pipe(drain, Node(kNode), reader, nullptr, 1, "drain");
  EXPECT_EQ(task.name(), "trainer_0/drain");
  EXPECT_EQ(task.workspace_type(), GLOBAL);
  LocalSession session;
  ASSERT_TRUE(session.Run(group).ok());
  ASSERT_TRUE(session.Run(drain).ok());
  // Drained: the last read was empty, and that is all that stopped it.
  EXPECT_TRUE(*FetchBool(session, kNode, "d/read/empty"));
  EXPECT_EQ(
      session.NodeWorkspace(kNode)->GetTensor("d/read/val").value()->numel(),
      0);
}

}  // namespace
}  // namespace jobgraph

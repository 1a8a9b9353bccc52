// The shuffling reader: its order is a fixed function of (seed, epoch), the
// same on every run and platform (pinned below), a new order each epoch, and
// its epoch-end rules.

#include "engine/data/shuffle.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/data/data_test_util.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::CollectedInts;
using ::jobgraph::data_test::FetchBool;
using ::testing::ElementsAre;

constexpr char kNode[] = "trainer_0";

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// These values are the contract: a checkpoint written by one build must
// resume in the same order on another. Changing them breaks resumes.
TEST(ShufflePermutationTest, PinnedValues) {
  EXPECT_THAT(ShufflePermutation(42, 0, 10),
              ElementsAre(2, 0, 4, 7, 8, 3, 5, 1, 9, 6));
  EXPECT_THAT(ShufflePermutation(42, 1, 10),
              ElementsAre(2, 8, 7, 3, 6, 4, 0, 9, 5, 1));
  EXPECT_THAT(ShufflePermutation(42, 2, 10),
              ElementsAre(9, 2, 1, 6, 3, 7, 0, 5, 4, 8));
  EXPECT_EQ(EpochSeed(42, 0), 6332618229526065668ULL);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> draws;
  for (int i = 0; i < 6; ++i) draws.push_back(BoundedRandom(rng, 10));
  EXPECT_THAT(draws, ElementsAre(5, 0, 8, 6, 1, 8));
}

TEST(ShufflePermutationTest, IsAPermutationForEverySize) {
  for (int64_t n : {0, 1, 2, 3, 17, 1000}) {
    EXPECT_EQ(Sorted(ShufflePermutation(7, 3, n)), Iota(n)) << n;
  }
}

TEST(ShufflePermutationTest, DependsOnSeedAndEpochOnly) {
  EXPECT_EQ(ShufflePermutation(1, 5, 100), ShufflePermutation(1, 5, 100));
  EXPECT_NE(ShufflePermutation(1, 5, 100), ShufflePermutation(1, 6, 100));
  EXPECT_NE(ShufflePermutation(1, 5, 100), ShufflePermutation(2, 5, 100));
}

TEST(ShufflePermutationTest, BoundedRandomStaysInRange) {
  std::mt19937_64 rng(1);
  for (uint64_t bound : {1ULL, 2ULL, 3ULL, 1000ULL, (1ULL << 63) + 1}) {
    for (int i = 0; i < 100; ++i) EXPECT_LT(BoundedRandom(rng, bound), bound);
  }
}

// val = [0, rows) read by a shuffled reader (seed 42) through a pipe that
// records each batch under `tag`, `limit` batches per epoch.
struct ShufflePipeline {
  TaskGroup init{"init", GLOBAL};
  TaskGroup epoch{"epoch", PRIVATE};
  TaskGroup reset{"reset", GLOBAL};
  BlobRef data_finished;
};

std::unique_ptr<ShufflePipeline> Build(int64_t rows, int64_t batch_size,
                                       std::optional<int64_t> limit,
                                       const std::string& tag) {
  auto p = std::make_unique<ShufflePipeline>();
  Task& init = p->init.NewTask(Node(kNode));
  Record rec = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(rows)}});
  Reader reader =
      Dataset(rec, "dataset:0").NewShuffledReader(init.net(), 42, batch_size);
  ReaderWithLimit limited(reader, limit);
  Pipe(p->epoch, Node(kNode), limited,
       [&](NetBuilder& net, const Record& batch) {
         data_test::CollectRows(net, batch.Field("val"), tag);
       });
  limited.Reset(p->reset.NewTask(Node(kNode)).net());
  p->data_finished = limited.data_finished();
  return p;
}

ShuffleCursor::State CursorState(LocalSession& session) {
  return session.NodeWorkspace(kNode)
      ->GetBlob("dataset:0_shuffle_cursor")
      ->Get<ShuffleCursor>()
      .state();
}

TEST(ShuffledReaderTest, OneEpochIsTheEpochsPermutation) {
  auto p = Build(10, 3, std::nullopt, "one");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_THAT(CollectedInts("one"), ElementsAre(2, 0, 4, 7, 8, 3, 5, 1, 9, 6));
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
  ShuffleCursor::State s = CursorState(session);
  EXPECT_EQ(s.epoch, 0);
  EXPECT_EQ(s.position, 10);
  EXPECT_TRUE(s.exhausted);
}

TEST(ShuffledReaderTest, IdenticalAcrossRunsAndNewEachEpoch) {
  std::vector<std::vector<int64_t>> runs;
  for (const std::string tag : {"run_a", "run_b"}) {
    auto p = Build(1000, 16, std::nullopt, tag);
    LocalSession session;
    ASSERT_TRUE(session.Run(p->init).ok());
    ASSERT_TRUE(session.Run(p->epoch).ok());  // epoch 0
    ASSERT_TRUE(session.Run(p->epoch).ok());  // epoch 1, after the empty read
    runs.push_back(CollectedInts(tag));
    EXPECT_EQ(CursorState(session).epoch, 1);
  }
  ASSERT_EQ(runs[0].size(), 2000u);
  EXPECT_EQ(runs[0], runs[1]);
  std::vector<int64_t> first(runs[0].begin(), runs[0].begin() + 1000);
  std::vector<int64_t> second(runs[0].begin() + 1000, runs[0].end());
  EXPECT_EQ(first, ShufflePermutation(42, 0, 1000));
  EXPECT_EQ(second, ShufflePermutation(42, 1, 1000));
  EXPECT_NE(first, second);
  EXPECT_EQ(Sorted(first), Iota(1000));
  EXPECT_EQ(Sorted(second), Iota(1000));
}

// With a limit, an epoch of the data spans several task runs. It ends with
// an empty read (data_finished); only the task run after that starts the
// next order.
TEST(ShuffledReaderTest,
     EpochEndsWithAnEmptyReadThenTheNextRunStartsANewOrder) {
  auto p = Build(10, 1, 5, "limited");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  const std::vector<int64_t> order0 = ShufflePermutation(42, 0, 10);
  const std::vector<int64_t> order1 = ShufflePermutation(42, 1, 10);

  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(CollectedInts("limited"),
            std::vector<int64_t>(order0.begin(), order0.begin() + 5));
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(CollectedInts("limited"), order0);
  // The last row was consumed, but no empty batch seen yet.
  EXPECT_FALSE(*FetchBool(session, kNode, p->data_finished.name()));
  EXPECT_FALSE(CursorState(session).exhausted);

  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_EQ(CollectedInts("limited").size(), 10u);
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
  EXPECT_TRUE(CursorState(session).exhausted);

  ASSERT_TRUE(session.Run(p->epoch).ok());
  std::vector<int64_t> all = CollectedInts("limited");
  EXPECT_EQ(std::vector<int64_t>(all.begin() + 10, all.end()),
            std::vector<int64_t>(order1.begin(), order1.begin() + 5));
  EXPECT_FALSE(*FetchBool(session, kNode, p->data_finished.name()));
  EXPECT_EQ(CursorState(session).epoch, 1);
  EXPECT_EQ(CursorState(session).position, 5);
}

TEST(ShuffledReaderTest, ResetStartsTheNextEpochAtOnce) {
  auto p = Build(10, 4, 1, "reset");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  ASSERT_TRUE(session.Run(p->epoch).ok());
  ASSERT_TRUE(session.Run(p->reset).ok());
  ShuffleCursor::State s = CursorState(session);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.position, 0);
  ASSERT_TRUE(session.Run(p->epoch).ok());
  const std::vector<int64_t> order0 = ShufflePermutation(42, 0, 10);
  const std::vector<int64_t> order1 = ShufflePermutation(42, 1, 10);
  std::vector<int64_t> expected(order0.begin(), order0.begin() + 4);
  expected.insert(expected.end(), order1.begin(), order1.begin() + 4);
  EXPECT_EQ(CollectedInts("reset"), expected);
}

TEST(ShuffleCursorTest, DataOfAnotherSizeMidEpochIsAnError) {
  ShuffleCursor cursor({"val"}, {});
  std::vector<int64_t> rows;
  ASSERT_TRUE(cursor.NextBatch(2, 10, &rows).ok());
  absl::Status s = cursor.NextBatch(2, 11, &rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("started over 10 rows"));
  // A new epoch may see a new size.
  EXPECT_TRUE(cursor.StartNextEpoch(/*only_if_exhausted=*/false));
  EXPECT_TRUE(cursor.NextBatch(2, 11, &rows).ok());
  EXPECT_FALSE(cursor.StartNextEpoch(/*only_if_exhausted=*/true));
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/tier/tier_log.h"

#include <initializer_list>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::vector<std::string> kNodes = {"a", "b"};

// An entry of epoch `epoch` committed at `micros`.
CommittedEpoch Entry(int64_t epoch, int64_t micros) {
  CommittedEpoch entry;
  entry.set_epoch(epoch);
  entry.add_node("a");
  entry.add_node("b");
  entry.set_total_bytes(100 + epoch);
  entry.set_committed_unix_micros(micros);
  return entry;
}

CommitLogRead Log(std::initializer_list<CommittedEpoch> entries) {
  CommitLogRead read;
  read.log.set_format_version(1);
  read.log.set_db_type("leveldb");
  for (const CommittedEpoch& entry : entries) *read.log.add_epoch() = entry;
  return read;
}

std::vector<int64_t> Epochs(const TieredLog& merged) {
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : merged.log.log.epoch()) {
    epochs.push_back(e.epoch());
  }
  return epochs;
}

TEST(MergeTierLogsTest, LocalEpochsContinueTheSharedHistory) {
  // Flushed 2 (same commit in both), then 3 and 4 only locally.
  const TieredLog merged =
      MergeTierLogs({"/local", Log({Entry(2, 20), Entry(3, 30), Entry(4, 40)})},
                    {"/shared", Log({Entry(1, 10), Entry(2, 20)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(merged.copies.at(1), ElementsAre("/shared"));
  EXPECT_THAT(merged.copies.at(2), ElementsAre("/local", "/shared"));
  EXPECT_THAT(merged.copies.at(3), ElementsAre("/local"));
  EXPECT_THAT(merged.copies.at(4), ElementsAre("/local"));
  EXPECT_EQ(merged.log.log.db_type(), "leveldb");
}

TEST(MergeTierLogsTest, StaleLocalEpochsAreIgnored) {
  // This host committed 3 and 4 locally; another run went on from shared 2
  // and flushed its own 3 (another commit time).
  const TieredLog merged =
      MergeTierLogs({"/local", Log({Entry(2, 20), Entry(3, 30), Entry(4, 40)})},
                    {"/shared", Log({Entry(2, 20), Entry(3, 31)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(2, 3));
  EXPECT_EQ(merged.log.log.epoch(1).committed_unix_micros(), 31);
  // Epoch 2 is the same commit in both: the local copy is still good.
  EXPECT_THAT(merged.copies.at(2), ElementsAre("/local", "/shared"));
  EXPECT_THAT(merged.copies.at(3), ElementsAre("/shared"));
  EXPECT_THAT(merged.ignored_local, ElementsAre(3, 4));
}

TEST(MergeTierLogsTest, LocalWithoutTheSharedNewestIsIgnored) {
  // The local tier no longer holds the shared log's newest epoch: nothing
  // says its epochs continue that history.
  const TieredLog merged =
      MergeTierLogs({"/local", Log({Entry(5, 50), Entry(6, 60)})},
                    {"/shared", Log({Entry(3, 30)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(3));
  EXPECT_THAT(merged.ignored_local, ElementsAre(5, 6));
}

TEST(MergeTierLogsTest, UnflushedEpochsBelowTheSharedNewestCount) {
  // shared_every=2: 2 and 4 were flushed, 3 only committed locally.
  const TieredLog merged = MergeTierLogs(
      {"/local", Log({Entry(2, 20), Entry(3, 30), Entry(4, 40)})},
      {"/shared", Log({Entry(0, 1), Entry(2, 20), Entry(4, 40)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(0, 2, 3, 4));
  EXPECT_THAT(merged.copies.at(3), ElementsAre("/local"));
  EXPECT_THAT(merged.ignored_local, IsEmpty());
}

TEST(MergeTierLogsTest, AnotherCommitOfAnEpochIsNeverTakenFromTheLocalTier) {
  const TieredLog merged =
      MergeTierLogs({"/local", Log({Entry(1, 10), Entry(2, 20)})},
                    {"/shared", Log({Entry(1, 11), Entry(2, 20)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_EQ(merged.log.log.epoch(0).committed_unix_micros(), 11);
  EXPECT_THAT(merged.copies.at(1), ElementsAre("/shared"));
  EXPECT_THAT(merged.ignored_local, ElementsAre(1));
}

TEST(MergeTierLogsTest, NothingSharedYetTakesTheLocalTier) {
  TieredLog merged = MergeTierLogs({"/local", Log({Entry(0, 1), Entry(1, 2)})},
                                   {"/shared", Log({})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(0, 1));
  EXPECT_THAT(merged.copies.at(1), ElementsAre("/local"));
  merged = MergeTierLogs({"/local", Log({Entry(0, 1)})},
                         {"/shared", std::nullopt}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(0));
}

TEST(MergeTierLogsTest, NoLocalTierIsTheSharedLog) {
  const TieredLog merged = MergeTierLogs(
      {"/local", std::nullopt}, {"/shared", Log({Entry(7, 70)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(7));
  EXPECT_THAT(merged.copies.at(7), ElementsAre("/shared"));
}

TEST(MergeTierLogsTest, OtherJobsEntriesAreLeftOut) {
  CommittedEpoch other = Entry(9, 90);
  other.clear_node();
  other.add_node("z");
  const TieredLog merged =
      MergeTierLogs({"/local", Log({other})},
                    {"/shared", Log({Entry(1, 10), other})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1));
}

TEST(MergeTierLogsTest, TheLocalMarkWins) {
  // The mark after the last epoch reached the local log only.
  CommittedEpoch marked = Entry(4, 40);
  marked.mutable_preemption()->set_group(JOB_GROUP_DOWNLOAD);
  const TieredLog merged = MergeTierLogs(
      {"/local", Log({marked})}, {"/shared", Log({Entry(4, 40)})}, kNodes);
  ASSERT_THAT(Epochs(merged), ElementsAre(4));
  EXPECT_TRUE(merged.log.log.epoch(0).has_preemption());
  EXPECT_THAT(merged.copies.at(4), ElementsAre("/local", "/shared"));
}

TEST(SameCommitTest, ComparesEpochTimeBytesAndNodes) {
  EXPECT_TRUE(SameCommit(Entry(1, 10), Entry(1, 10)));
  EXPECT_FALSE(SameCommit(Entry(1, 10), Entry(1, 11)));
  CommittedEpoch fewer = Entry(1, 10);
  fewer.mutable_node()->RemoveLast();
  EXPECT_FALSE(SameCommit(Entry(1, 10), fewer));
  EXPECT_THAT(
      Epochs(MergeTierLogs({"/l", std::nullopt}, {"/s", std::nullopt}, kNodes)),
      IsEmpty());
}

TEST(MergeTierLogsTest, OneHostsPartOfAnEpochIsNoCopy) {
  // A host's tier of a job on several hosts holds node a of epoch 3 only:
  // a run in one process neither reads it nor takes it out.
  CommittedEpoch partial = Entry(3, 30);
  partial.add_held_node("a");
  const TieredLog merged =
      MergeTierLogs({"/local", Log({Entry(2, 20), partial})},
                    {"/shared", Log({Entry(1, 10), Entry(2, 20)})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_THAT(merged.copies.at(2), ElementsAre("/local", "/shared"));
  EXPECT_THAT(merged.ignored_local, IsEmpty());
}

}  // namespace
}  // namespace jobgraph

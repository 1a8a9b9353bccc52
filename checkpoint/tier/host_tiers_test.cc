#include "checkpoint/tier/host_tiers.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// Node x runs on host hx; host hx holds its own node and, as the partner of
// the previous host, that host's node.
const std::vector<std::string> kNodes = {"a", "b", "c", "d"};
const std::vector<std::string> kHosts = {"h1", "h2", "h3", "h4"};

// The nodes host `h` (0-based index in kHosts) holds.
std::vector<std::string> HeldBy(int h) {
  return {kNodes[h], kNodes[(h + 3) % 4]};
}

// An entry of epoch `epoch` committed at `micros`, listing every node of
// the job and holding `held` (none: every node).
CommittedEpoch Entry(int64_t epoch, int64_t micros,
                     const std::vector<std::string>& held = {}) {
  CommittedEpoch entry;
  entry.set_epoch(epoch);
  for (const std::string& node : kNodes) entry.add_node(node);
  entry.set_total_bytes(100 + epoch);
  entry.set_committed_unix_micros(micros);
  for (const std::string& node : held) entry.add_held_node(node);
  return entry;
}

// Host `h`'s entry of `epoch` committed at `micros`.
CommittedEpoch HostEntry(int h, int64_t epoch, int64_t micros) {
  return Entry(epoch, micros, HeldBy(h));
}

CommitLogRead Log(std::initializer_list<CommittedEpoch> entries) {
  CommitLogRead read;
  read.log.set_format_version(1);
  read.log.set_db_type("leveldb");
  for (const CommittedEpoch& entry : entries) *read.log.add_epoch() = entry;
  return read;
}

CommitLogRead LogOf(const std::vector<CommittedEpoch>& entries) {
  CommitLogRead read = Log({});
  for (const CommittedEpoch& entry : entries) *read.log.add_epoch() = entry;
  return read;
}

// Host `h`'s log with its entries of `epochs`, epoch e committed at 10 * e.
HostLogRead HostLog(int h, std::initializer_list<int64_t> epochs) {
  std::vector<CommittedEpoch> entries;
  for (int64_t epoch : epochs) {
    entries.push_back(HostEntry(h, epoch, 10 * epoch));
  }
  return {kHosts[h], LogOf(entries)};
}

TierLogRead Shared(std::initializer_list<CommittedEpoch> entries) {
  return {"/shared", Log(entries)};
}

std::vector<int64_t> Epochs(const HostTieredLog& merged) {
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : merged.log.log.epoch()) {
    epochs.push_back(e.epoch());
  }
  return epochs;
}

TEST(MakeHostMapTest, HostsInTheOrderOfTheirLowestRank) {
  const HostMap map = MakeHostMap({"h1", "h1", "h2", "h3", "h2"});
  EXPECT_EQ(map.num_hosts(), 3);
  EXPECT_THAT(map.hosts, ElementsAre("h1", "h2", "h3"));
  EXPECT_THAT(map.host_of_rank, ElementsAre(0, 0, 1, 2, 1));
  EXPECT_THAT(map.leader, ElementsAre(0, 2, 3));
  EXPECT_TRUE(map.IsLeader(0));
  EXPECT_FALSE(map.IsLeader(1));
  EXPECT_TRUE(map.IsLeader(2));
  EXPECT_TRUE(map.IsLeader(3));
  EXPECT_FALSE(map.IsLeader(4));
  EXPECT_EQ(map.PartnerOf(0), 1);
  EXPECT_EQ(map.PartnerOf(1), 2);
  EXPECT_EQ(map.PartnerOf(2), 0);
  EXPECT_EQ(map.PartnerSourceOf(0), 2);
  EXPECT_EQ(map.PartnerSourceOf(1), 0);
  EXPECT_EQ(map.PartnerSourceOf(2), 1);
}

TEST(MakeHostMapTest, OneHostHasNoPartner) {
  const HostMap map = MakeHostMap({"h1", "h1"});
  EXPECT_THAT(map.hosts, ElementsAre("h1"));
  EXPECT_THAT(map.host_of_rank, ElementsAre(0, 0));
  EXPECT_THAT(map.leader, ElementsAre(0));
  EXPECT_TRUE(map.IsLeader(0));
  EXPECT_FALSE(map.IsLeader(1));
  EXPECT_EQ(map.PartnerOf(0), -1);
  EXPECT_EQ(map.PartnerSourceOf(0), -1);
}

TEST(MakeHostMapTest, TwoHostsArePartnersOfEachOther) {
  const HostMap map = MakeHostMap({"x", "y"});
  EXPECT_EQ(map.PartnerOf(0), 1);
  EXPECT_EQ(map.PartnerOf(1), 0);
  EXPECT_EQ(map.PartnerSourceOf(0), 1);
  EXPECT_EQ(map.PartnerSourceOf(1), 0);
}

TEST(MergeHostLogsTest, LocalEpochsOfEveryHostAreCandidates) {
  // Flushed 1 (the same commit on every host), then 2 and 3 only locally.
  const std::vector<HostLogRead> hosts = {
      HostLog(0, {1, 2, 3}), HostLog(1, {1, 2, 3}), HostLog(2, {1, 2, 3}),
      HostLog(3, {1, 2, 3})};
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2, 3));
  EXPECT_EQ(merged.log.log.db_type(), "leveldb");
  EXPECT_EQ(merged.log.log.format_version(), 1);
  for (const CommittedEpoch& entry : merged.log.log.epoch()) {
    EXPECT_THAT(entry.held_node(), IsEmpty()) << entry.epoch();
    EXPECT_EQ(entry.committed_unix_micros(), 10 * entry.epoch());
    EXPECT_THAT(entry.node(), ElementsAre("a", "b", "c", "d"));
  }
  EXPECT_THAT(merged.holders.at(3),
              ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                          Pair("b", ElementsAre("h2", "h3")),
                          Pair("c", ElementsAre("h3", "h4")),
                          Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_EQ(merged.holders.at(2), merged.holders.at(3));
  // The shared epoch's holders are the hosts only.
  EXPECT_EQ(merged.holders.at(1), merged.holders.at(3));
  EXPECT_THAT(merged.in_shared, ElementsAre(1));
  EXPECT_TRUE(merged.InShared(1));
  EXPECT_FALSE(merged.InShared(2));
  EXPECT_FALSE(merged.InShared(3));
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_EQ(merged.newest_listed, 3);
}

TEST(MergeHostLogsTest, ALostHostsDatabasesAreHeldByItsPartner) {
  // h2 is gone: its node b is still on h3, and h1's a on h1.
  const std::vector<HostLogRead> three = {
      HostLog(0, {1, 2, 3}), HostLog(2, {1, 2, 3}), HostLog(3, {1, 2, 3})};
  std::vector<HostLogRead> unreadable = {HostLog(0, {1, 2, 3}), HostLog(1, {}),
                                         HostLog(2, {1, 2, 3}),
                                         HostLog(3, {1, 2, 3})};
  unreadable[1].read = std::nullopt;
  for (const auto& hosts : {three, unreadable}) {
    const HostTieredLog merged =
        MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
    EXPECT_THAT(Epochs(merged), ElementsAre(1, 2, 3));
    for (int64_t epoch : {1, 2, 3}) {
      EXPECT_THAT(merged.holders.at(epoch),
                  ElementsAre(Pair("a", ElementsAre("h1")),
                              Pair("b", ElementsAre("h3")),
                              Pair("c", ElementsAre("h3", "h4")),
                              Pair("d", ElementsAre("h1", "h4"))))
          << epoch;
    }
    EXPECT_THAT(merged.in_shared, ElementsAre(1));
    EXPECT_THAT(merged.ignored, IsEmpty());
    EXPECT_EQ(merged.newest_listed, 3);
  }
}

TEST(MergeHostLogsTest, TwoAdjacentLostHostsLeaveLocalEpochsIncomplete) {
  // h2 and h3 are gone: node b was on h2 and its partner h3 only.
  const std::vector<HostLogRead> hosts = {HostLog(0, {1, 2, 3}),
                                          HostLog(3, {1, 2, 3})};
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  // The shared directory holds 1: still a candidate.
  EXPECT_THAT(Epochs(merged), ElementsAre(1));
  EXPECT_THAT(
      merged.holders.at(1),
      ElementsAre(Pair("a", ElementsAre("h1")), Pair("c", ElementsAre("h4")),
                  Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_THAT(merged.holders, ElementsAre(Pair(1, _)));
  EXPECT_THAT(merged.in_shared, ElementsAre(1));
  // Not stale: incomplete while h2 and h3 are away.
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_THAT(merged.incomplete, ElementsAre(Pair(2, ElementsAre("b")),
                                             Pair(3, ElementsAre("b"))));
  // 3 is listed, though incomplete.
  EXPECT_EQ(merged.newest_listed, 3);
}

TEST(MergeHostLogsTest, AStaleHostsLocalEpochsAreIgnored) {
  // 1 and 2 were flushed. h3 missed the run that committed 2 and went on
  // to 3: its log does not hold the shared newest epoch, so only its copy
  // of 1 counts. The others committed 3 later.
  std::vector<HostLogRead> hosts = {HostLog(0, {1, 2, 3}),
                                    HostLog(1, {1, 2, 3}), HostLog(2, {1}),
                                    HostLog(3, {1, 2, 3})};
  *hosts[2].read->log.add_epoch() = HostEntry(2, 3, 29);
  *hosts[2].read->log.add_epoch() = HostEntry(2, 4, 39);
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10), Entry(2, 20)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2, 3));
  EXPECT_EQ(merged.log.log.epoch(2).committed_unix_micros(), 30);
  EXPECT_THAT(merged.holders.at(1),
              ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                          Pair("b", ElementsAre("h2", "h3")),
                          Pair("c", ElementsAre("h3", "h4")),
                          Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_THAT(
      merged.holders.at(2),
      ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                  Pair("b", ElementsAre("h2")), Pair("c", ElementsAre("h4")),
                  Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_EQ(merged.holders.at(3), merged.holders.at(2));
  EXPECT_THAT(merged.in_shared, ElementsAre(1, 2));
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h3", ElementsAre(3, 4))));
  // h3's 4 does not count.
  EXPECT_EQ(merged.newest_listed, 3);
}

TEST(MergeHostLogsTest, AnotherCommitOfASharedEpochIsIgnored) {
  // h3 holds 1 as the shared commit, 2 as another one: it is stale, and
  // neither its 2 nor its 3 counts.
  std::vector<HostLogRead> hosts = {HostLog(0, {1, 2, 3}),
                                    HostLog(1, {1, 2, 3}), HostLog(2, {1}),
                                    HostLog(3, {1, 2, 3})};
  *hosts[2].read->log.add_epoch() = HostEntry(2, 2, 21);
  *hosts[2].read->log.add_epoch() = HostEntry(2, 3, 31);
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10), Entry(2, 20)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2, 3));
  EXPECT_EQ(merged.log.log.epoch(1).committed_unix_micros(), 20);
  EXPECT_EQ(merged.log.log.epoch(2).committed_unix_micros(), 30);
  EXPECT_THAT(merged.holders.at(1).at("c"), ElementsAre("h3", "h4"));
  EXPECT_THAT(merged.holders.at(2).at("c"), ElementsAre("h4"));
  EXPECT_THAT(merged.holders.at(2).at("b"), ElementsAre("h2"));
  EXPECT_THAT(merged.holders.at(3).at("c"), ElementsAre("h4"));
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h3", ElementsAre(2, 3))));
}

TEST(MergeHostLogsTest, TheNewestCommitOfALocalEpochWins) {
  // Every host continues the shared history; h3 holds an older commit of
  // 2 than the others.
  std::vector<HostLogRead> hosts = {HostLog(0, {1}), HostLog(1, {1}),
                                    HostLog(2, {1}), HostLog(3, {1})};
  for (int h : {0, 1, 3}) *hosts[h].read->log.add_epoch() = HostEntry(h, 2, 21);
  *hosts[2].read->log.add_epoch() = HostEntry(2, 2, 20);
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_EQ(merged.log.log.epoch(1).committed_unix_micros(), 21);
  EXPECT_THAT(
      merged.holders.at(2),
      ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                  Pair("b", ElementsAre("h2")), Pair("c", ElementsAre("h4")),
                  Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_THAT(merged.in_shared, ElementsAre(1));
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h3", ElementsAre(2))));
  EXPECT_EQ(merged.newest_listed, 2);
}

TEST(MergeHostLogsTest, TheNewestCommitWinsWhateverTheHostOrder) {
  // The newer commit is on the later host: still the epoch's.
  std::vector<HostLogRead> hosts = {HostLog(0, {1}), HostLog(1, {1})};
  *hosts[0].read->log.add_epoch() = Entry(2, 20);
  *hosts[1].read->log.add_epoch() = Entry(2, 22);
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_EQ(merged.log.log.epoch(1).committed_unix_micros(), 22);
  EXPECT_THAT(
      merged.holders.at(2),
      ElementsAre(Pair("a", ElementsAre("h2")), Pair("b", ElementsAre("h2")),
                  Pair("c", ElementsAre("h2")), Pair("d", ElementsAre("h2"))));
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h1", ElementsAre(2))));
}

TEST(MergeHostLogsTest, AnEntryWithoutHeldNodesHoldsEveryNode) {
  // Only h1 is left, and its entry of 2 holds every node.
  std::vector<HostLogRead> hosts = {HostLog(0, {1})};
  *hosts[0].read->log.add_epoch() = Entry(2, 20);
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_THAT(merged.holders.at(1), ElementsAre(Pair("a", ElementsAre("h1")),
                                                Pair("d", ElementsAre("h1"))));
  EXPECT_THAT(
      merged.holders.at(2),
      ElementsAre(Pair("a", ElementsAre("h1")), Pair("b", ElementsAre("h1")),
                  Pair("c", ElementsAre("h1")), Pair("d", ElementsAre("h1"))));
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_EQ(merged.newest_listed, 2);
}

TEST(MergeHostLogsTest, NoSharedLogTakesEveryHostsEpochs) {
  std::vector<HostLogRead> hosts = {{"h1", std::nullopt},
                                    HostLog(1, {0, 1}),
                                    HostLog(2, {0, 1}),
                                    HostLog(3, {0, 1})};
  hosts[1].read->log.set_db_type("rocksdb");
  hosts[1].read->log.set_format_version(3);
  hosts[2].read->log.set_format_version(4);
  const HostTieredLog merged =
      MergeHostLogs(hosts, {"/shared", std::nullopt}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(0, 1));
  // The first log read.
  EXPECT_EQ(merged.log.log.db_type(), "rocksdb");
  EXPECT_EQ(merged.log.log.format_version(), 3);
  EXPECT_TRUE(merged.log.damage.ok());
  EXPECT_THAT(merged.holders.at(1),
              ElementsAre(Pair("a", ElementsAre("h2")),
                          Pair("b", ElementsAre("h2", "h3")),
                          Pair("c", ElementsAre("h3", "h4")),
                          Pair("d", ElementsAre("h4"))));
  EXPECT_THAT(merged.in_shared, IsEmpty());
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_EQ(merged.newest_listed, 1);
}

TEST(MergeHostLogsTest, ASharedLogWithoutTheJobsEpochsTakesEveryHostsEpochs) {
  const std::vector<HostLogRead> hosts = {HostLog(0, {5}), HostLog(2, {5})};
  const HostTieredLog merged = MergeHostLogs(hosts, Shared({}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(5));
  EXPECT_THAT(
      merged.holders.at(5),
      ElementsAre(Pair("a", ElementsAre("h1")), Pair("b", ElementsAre("h3")),
                  Pair("c", ElementsAre("h3")), Pair("d", ElementsAre("h1"))));
  EXPECT_THAT(merged.in_shared, IsEmpty());
  EXPECT_EQ(merged.newest_listed, 5);
}

TEST(MergeHostLogsTest, OtherJobsEntriesAreLeftOut) {
  CommittedEpoch other = Entry(9, 90);
  other.clear_node();
  other.add_node("z");
  other.clear_held_node();
  other.add_held_node("z");
  std::vector<HostLogRead> hosts = {HostLog(0, {1, 2}), HostLog(1, {1, 2}),
                                    HostLog(2, {1, 2}), HostLog(3, {1, 2})};
  for (HostLogRead& host : hosts) *host.read->log.add_epoch() = other;
  // Another job's entry of 2 (another commit than the hosts') in the shared
  // log: it neither makes 2 shared nor the hosts stale.
  CommittedEpoch other2 = other;
  other2.set_epoch(2);
  // Another job's node in a held_node list is no holder.
  hosts[0].read->log.mutable_epoch(1)->add_held_node("z");
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10), other2, other}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_THAT(merged.holders.at(2),
              ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                          Pair("b", ElementsAre("h2", "h3")),
                          Pair("c", ElementsAre("h3", "h4")),
                          Pair("d", ElementsAre("h1", "h4"))));
  EXPECT_THAT(merged.in_shared, ElementsAre(1));
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_EQ(merged.newest_listed, 2);
}

TEST(MergeHostLogsTest, NewestListedCountsAnIncompleteEpoch) {
  // Only h1 committed 2 before the job stopped: a and d are held, b and c
  // are not.
  const std::vector<HostLogRead> hosts = {HostLog(0, {1, 2}), HostLog(1, {1}),
                                          HostLog(2, {1}), HostLog(3, {1})};
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1));
  EXPECT_THAT(merged.holders, ElementsAre(Pair(1, _)));
  EXPECT_THAT(merged.ignored, IsEmpty());
  EXPECT_THAT(merged.incomplete, ElementsAre(Pair(2, ElementsAre("b", "c"))));
  EXPECT_EQ(merged.newest_listed, 2);
}

TEST(MergeHostLogsTest, NewestListedComesFromTheSharedLogAlone) {
  const std::vector<HostLogRead> hosts = {{"h1", std::nullopt},
                                          {"h2", std::nullopt}};
  HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10), Entry(4, 40)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 4));
  EXPECT_THAT(merged.in_shared, ElementsAre(1, 4));
  // No host holds them.
  EXPECT_THAT(merged.holders.at(4), IsEmpty());
  EXPECT_EQ(merged.newest_listed, 4);

  merged = MergeHostLogs(hosts, {"/shared", std::nullopt}, kNodes);
  EXPECT_THAT(Epochs(merged), IsEmpty());
  EXPECT_THAT(merged.holders, IsEmpty());
  EXPECT_EQ(merged.newest_listed, std::nullopt);
}

TEST(MergeHostLogsTest, StaleHostsIgnoredEpochsAreNotNewestListed) {
  // h1 never held the shared newest epoch 3 and lists 4.
  std::vector<HostLogRead> hosts = {HostLog(0, {1, 4}), HostLog(1, {1, 3})};
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10), Entry(3, 30)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 3));
  EXPECT_THAT(
      merged.holders.at(1),
      ElementsAre(Pair("a", ElementsAre("h1", "h2")),
                  Pair("b", ElementsAre("h2")), Pair("d", ElementsAre("h1"))));
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h1", ElementsAre(4))));
  EXPECT_EQ(merged.newest_listed, 3);
}

TEST(MergeHostLogsTest, AHostsMarkWins) {
  // The mark after the last epoch is in h2's log (and not yet flushed):
  // epoch 2 of the shared log and local epoch 3 carry it.
  CommittedEpoch marked2 = HostEntry(1, 2, 20);
  marked2.mutable_preemption()->set_group(JOB_GROUP_DOWNLOAD);
  CommittedEpoch marked3 = HostEntry(1, 3, 30);
  marked3.mutable_preemption()->set_group(JOB_GROUP_DOWNLOAD);
  const HostTieredLog merged =
      MergeHostLogs({HostLog(0, {2, 3}),
                     {kHosts[1], Log({marked2, marked3})},
                     HostLog(2, {2, 3}),
                     HostLog(3, {2, 3})},
                    Shared({Entry(2, 20)}), kNodes);
  ASSERT_THAT(Epochs(merged), ElementsAre(2, 3));
  EXPECT_EQ(merged.log.log.epoch(0).preemption().group(), JOB_GROUP_DOWNLOAD);
  EXPECT_EQ(merged.log.log.epoch(1).preemption().group(), JOB_GROUP_DOWNLOAD);
  EXPECT_THAT(merged.log.log.epoch(1).held_node(), IsEmpty());
}

// Run A on every host commits epochs 1-3 (shared log: epoch 1). Run B,
// without host h4, resumes from epoch 1, commits epoch 2 on h1-h3 and dies
// before its flush. h4 still lists A's epochs 2 and 3 and holds the shared
// newest epoch 1: A's epoch 3 must not follow B's epoch 2 (found by review).
TEST(MergeHostLogsTest, AnAbandonedHistoryDoesNotFollowANewerCommit) {
  std::vector<HostLogRead> hosts;
  for (int h = 0; h < 3; ++h) {
    hosts.push_back(
        {kHosts[h], Log({HostEntry(h, 1, 10), HostEntry(h, 2, 500)})});
  }
  // h4 holds every node of A's epoch 3, which would make it complete.
  hosts.push_back({kHosts[3], Log({HostEntry(3, 1, 10), HostEntry(3, 2, 20),
                                   Entry(3, 30)})});
  const HostTieredLog merged =
      MergeHostLogs(hosts, Shared({Entry(1, 10)}), kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(1, 2));
  EXPECT_EQ(merged.log.log.epoch(1).committed_unix_micros(), 500);
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h4", ElementsAre(2, 3))));
  EXPECT_THAT(merged.incomplete, IsEmpty());
}

// A run from scratch without h2 commits its epoch 0 on h1 and h3 (which
// hold every node between them) and dies before its flush, which had
// emptied the shared log: h2's epochs of the run before are older.
TEST(MergeHostLogsTest, ARunFromScratchSupersedesOlderEpochs) {
  const HostTieredLog merged = MergeHostLogs(
      {{kHosts[0], Log({Entry(0, 900)})},
       {kHosts[1], Log({Entry(0, 10), Entry(1, 20), Entry(2, 30)})},
       {kHosts[2], Log({Entry(0, 900)})}},
      {"/shared", Log({})}, kNodes);
  EXPECT_THAT(Epochs(merged), ElementsAre(0));
  EXPECT_EQ(merged.log.log.epoch(0).committed_unix_micros(), 900);
  EXPECT_THAT(merged.ignored, ElementsAre(Pair("h2", ElementsAre(0, 1, 2))));
}

}  // namespace
}  // namespace jobgraph

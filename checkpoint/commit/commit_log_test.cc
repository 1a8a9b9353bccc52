#include "checkpoint/commit/commit_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void Commit(const std::string& dir, int64_t epoch,
            std::vector<std::string> nodes) {
  EpochCommit commit;
  commit.epoch = epoch;
  commit.nodes = std::move(nodes);
  commit.total_bytes = 10 * epoch;
  absl::Status status = CommitEpoch(dir, "leveldb", commit);
  ASSERT_TRUE(status.ok()) << status;
}

// "epoch:node,node" for every entry, in log order.
std::vector<std::string> Entries(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  CHECK(log.ok()) << log.status();
  std::vector<std::string> entries;
  for (const CommittedEpoch& e : log->epoch()) {
    entries.push_back(
        absl::StrCat(e.epoch(), ":", absl::StrJoin(e.node(), ",")));
  }
  return entries;
}

// Commits `epoch` of node "a" referring to `referenced`.
void CommitReferring(const std::string& dir, int64_t epoch,
                     std::vector<int64_t> referenced) {
  EpochCommit commit;
  commit.epoch = epoch;
  commit.nodes = {"a"};
  commit.total_bytes = 100;
  commit.referenced_bytes = referenced.empty() ? 0 : 60;
  commit.referenced_epochs = std::move(referenced);
  absl::Status status = CommitEpoch(dir, "leveldb", commit);
  ASSERT_TRUE(status.ok()) << status;
}

// "epoch[referenced]" for every entry, in log order.
std::string References(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  CHECK(log.ok()) << log.status();
  std::vector<std::string> entries;
  for (const CommittedEpoch& e : log->epoch()) {
    entries.push_back(absl::StrCat(
        e.epoch(), "[", absl::StrJoin(e.referenced_epoch(), ","), "]"));
  }
  return absl::StrJoin(entries, " ");
}

std::string LogPath(const TempDir& dir) {
  return dir.Join(std::string(kCommitLogFileName));
}

TEST(CommitLogTest, AResumedJobDropsItsLaterEpochsAndNoOneElses) {
  TempDir dir;
  for (int e = 0; e <= 2; ++e) Commit(dir.path(), e, {"a0", "a1"});
  for (int e = 0; e <= 3; ++e) Commit(dir.path(), e, {"b"});
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a0,a1", "0:b", "1:a0,a1",
                                               "1:b", "2:a0,a1", "2:b", "3:b"));
  // Job a resumed from epoch 0 and saves epoch 1 again.
  Commit(dir.path(), 1, {"a0", "a1"});
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:a0,a1", "0:b", "1:b", "1:a0,a1", "2:b", "3:b"));

  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok()) << log.status();
  const CommittedEpoch* b1 = FindCommittedEpoch(*log, 1, {"b"});
  ASSERT_NE(b1, nullptr);
  EXPECT_THAT(b1->node(), ElementsAre("b"));
  EXPECT_EQ(FindCommittedEpoch(*log, 2, {"a0", "a1"}), nullptr);
  EXPECT_EQ(CommittedEpochList(*log, {"a1"}), "0, 1");
  EXPECT_EQ(CommittedEpochList(*log, {"b"}), "0, 1, 2, 3");
  EXPECT_EQ(CommittedEpochList(*log, {"c"}), "none");
}

TEST(CommitLogTest, RetentionDropsOnlyTheJobsOwnEntries) {
  TempDir dir;
  for (int e = 0; e <= 3; ++e) {
    Commit(dir.path(), e, {"a"});
    Commit(dir.path(), e, {"b"});
  }
  absl::StatusOr<std::vector<int64_t>> dropped =
      ApplyRetention(dir.path(), {.keep_last = 1}, {"a"}, /*background=*/false);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_THAT(*dropped, ElementsAre(0, 1, 2));
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:b", "1:b", "2:b", "3:a", "3:b"));
}

// The Checkpointer's commit retires old epochs in its own write
// (EpochCommit::also): one write lists the new epoch and drops the retired
// ones, so the previous copy is the log before the commit, and no crash
// can leave the log listing more than keep_last of the job's epochs.
TEST(CommitLogTest, ACommitRetiresEpochsInItsOwnWrite) {
  TempDir dir;
  for (int e = 0; e <= 2; ++e) {
    Commit(dir.path(), e, {"a"});
    Commit(dir.path(), e, {"b"});
  }
  const std::string before = ReadFileToString(LogPath(dir)).value();
  std::vector<CommittedEpoch> retired;
  EpochCommit commit;
  commit.epoch = 3;
  commit.nodes = {"a"};
  commit.also = [&](CommitLog& log) {
    retired = RetireEpochs(log, {.keep_last = 2}, {"a"});
  };
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", commit).ok());
  ASSERT_EQ(retired.size(), 2u);
  EXPECT_EQ(retired[0].epoch(), 0);
  EXPECT_EQ(retired[1].epoch(), 1);
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:b", "1:b", "2:a", "2:b", "3:a"));
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), before);
  // Nothing to retire: the log keeps its entries as they were.
  commit.epoch = 4;
  commit.also = [&](CommitLog& log) {
    retired = RetireEpochs(log, {.keep_last = 5}, {"a"});
  };
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", commit).ok());
  EXPECT_TRUE(retired.empty());
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:b", "1:b", "2:a", "2:b", "3:a", "4:a"));
}

TEST(CommitLogTest, TakeEntriesKeepsTheOrderOfBoth) {
  CommitLog log;
  for (int e : {0, 1, 2, 3, 4, 5}) log.add_epoch()->set_epoch(e);
  std::vector<CommittedEpoch> taken = TakeEntries(
      log, [](const CommittedEpoch& e) { return e.epoch() % 2 == 1; });
  std::vector<int64_t> left, out;
  for (const CommittedEpoch& e : log.epoch()) left.push_back(e.epoch());
  for (const CommittedEpoch& e : taken) out.push_back(e.epoch());
  EXPECT_THAT(left, ElementsAre(0, 2, 4));
  EXPECT_THAT(out, ElementsAre(1, 3, 5));
  EXPECT_TRUE(
      TakeEntries(log, [](const CommittedEpoch&) { return false; }).empty());
  EXPECT_EQ(log.epoch_size(), 3);
}

Preemption MidEpoch() {
  Preemption p;
  p.set_group(JOB_GROUP_EPOCH);
  p.set_signal("SIGTERM");
  return p;
}

TEST(CommitLogTest, RetentionKeepsTheNewestOrdinaryEpochBehindAPreemption) {
  TempDir dir;
  for (int e = 0; e <= 2; ++e) Commit(dir.path(), e, {"a"});
  EpochCommit preempted;
  preempted.epoch = 3;
  preempted.nodes = {"a"};
  preempted.preemption = MidEpoch();
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", preempted).ok());
  absl::StatusOr<std::vector<int64_t>> dropped =
      ApplyRetention(dir.path(), {.keep_last = 1}, {"a"}, /*background=*/false);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  // Epoch 2 stays: the fallback if epoch 3 cannot be continued.
  EXPECT_THAT(*dropped, ElementsAre(0, 1));
  EXPECT_THAT(Entries(dir.path()), ElementsAre("2:a", "3:a"));
}

TEST(CommitLogTest, ForgetEpochTakesOutOnlyThatEpochOfTheJob) {
  TempDir dir;
  for (int e = 0; e <= 2; ++e) {
    Commit(dir.path(), e, {"a"});
    Commit(dir.path(), e, {"b"});
  }
  // The newest epoch left of the job comes back.
  EXPECT_EQ(ForgetEpoch(dir.path(), 1, {"a"}).value(), 2);
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:a", "0:b", "1:b", "2:a", "2:b"));
  // Nothing to forget is fine.
  EXPECT_EQ(ForgetEpoch(dir.path(), 7, {"a"}).value(), 2);
  EXPECT_EQ(Entries(dir.path()).size(), 5u);
  EXPECT_EQ(ForgetEpoch(dir.path(), 2, {"b"}).value(), 1);
  EXPECT_EQ(ForgetEpoch(dir.path(), 0, {"c"}).value(), -1);
}

// A log is version 2 exactly while an entry lists referenced epochs, so a
// job without incremental saves stays readable by version-1 readers.
TEST(CommitLogTest, ReferencesMakeTheLogVersionTwoWhileListed) {
  TempDir dir;
  CommitReferring(dir.path(), 0, {});
  EXPECT_EQ(ReadCommitLog(dir.path())->format_version(), 1);
  CommitReferring(dir.path(), 1, {0});
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->format_version(), 2);
  EXPECT_EQ(log->epoch(1).referenced_bytes(), 60);
  EXPECT_EQ(References(dir.path()), "0[] 1[0]");
  // A resume from 0 re-saves 1 in full.
  CommitReferring(dir.path(), 1, {});
  EXPECT_EQ(ReadCommitLog(dir.path())->format_version(), 1);
}

// Forgetting an epoch (before its databases are replaced) also unlists
// every entry that reads from it, directly or through another, and
// nothing else: other jobs' entries stay.
TEST(CommitLogTest, ForgetEpochTakesOutWhatReadsFromIt) {
  TempDir dir;
  CommitReferring(dir.path(), 0, {});
  CommitReferring(dir.path(), 1, {0});
  CommitReferring(dir.path(), 2, {1});
  CommitReferring(dir.path(), 3, {});
  CommitReferring(dir.path(), 4, {3});
  Commit(dir.path(), 5, {"b"});
  EXPECT_EQ(ForgetEpoch(dir.path(), 0, {"a"}).value(), 4);
  EXPECT_EQ(References(dir.path()), "3[] 4[3] 5[]");
  EXPECT_THAT(Entries(dir.path()), ElementsAre("3:a", "4:a", "5:b"));
}

// Retention keeps what a kept epoch reads from (transitively), and what the
// caller pins (a save in flight refers to it), and drops the rest.
TEST(CommitLogTest, RetentionKeepsTheEpochsKeptEpochsReadFrom) {
  TempDir dir;
  CommitReferring(dir.path(), 0, {});
  CommitReferring(dir.path(), 1, {0});
  CommitReferring(dir.path(), 2, {});
  CommitReferring(dir.path(), 3, {1});
  CommitReferring(dir.path(), 4, {2, 3});
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  CommitLog copy = *log;
  std::vector<int64_t> retired;
  for (const CommittedEpoch& e : RetireEpochs(copy, {.keep_last = 1}, {"a"})) {
    retired.push_back(e.epoch());
  }
  // 4 reads from 2 and 3, 3 from 1, 1 from 0: nothing goes.
  EXPECT_THAT(retired, ::testing::IsEmpty());
  CommitReferring(dir.path(), 5, {});
  CommitReferring(dir.path(), 6, {5});
  log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  copy = *log;
  retired.clear();
  for (const CommittedEpoch& e : RetireEpochs(copy, {.keep_last = 1}, {"a"})) {
    retired.push_back(e.epoch());
  }
  EXPECT_THAT(retired, ElementsAre(0, 1, 2, 3, 4));
  copy = *log;
  retired.clear();
  for (const CommittedEpoch& e :
       RetireEpochs(copy, {.keep_last = 1}, {"a"}, /*pinned=*/{3})) {
    retired.push_back(e.epoch());
  }
  EXPECT_THAT(retired, ElementsAre(2, 4));
}

TEST(CommitLogTest, OnlyAnOrdinaryEpochCanBeMarkedAsTheLast) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  EpochCommit preempted;
  preempted.epoch = 1;
  preempted.nodes = {"a"};
  preempted.preemption = MidEpoch();
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", preempted).ok());
  Preemption last;
  last.set_group(JOB_GROUP_DOWNLOAD);
  absl::Status marked = MarkEpochLoopFinished(dir.path(), 1, {"a"}, last);
  EXPECT_EQ(marked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(marked.message(), HasSubstr("middle of its epoch group"));
  EXPECT_EQ(MarkEpochLoopFinished(dir.path(), 5, {"a"}, last).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(MarkEpochLoopFinished(dir.path(), 0, {"a"}, last).ok());
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->epoch(0).preemption().group(), JOB_GROUP_DOWNLOAD);
  EXPECT_EQ(log->epoch(1).preemption().group(), JOB_GROUP_EPOCH);
}

// Two processes commit into one directory at once, each its own job; the
// directory lock keeps every entry of both. Without it, each read-modify-
// write would overwrite the other's entries.
TEST(CommitLogTest, ConcurrentCommitsFromTwoProcessesLoseNothing) {
  TempDir dir;
  constexpr int kEpochs = 25;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (const char* node : {"p", "q"}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      char byte;
      if (::read(go[0], &byte, 1) != 1) ::_exit(3);
      for (int e = 0; e < kEpochs; ++e) {
        EpochCommit commit;
        commit.epoch = e;
        commit.nodes = {node};
        if (!CommitEpoch(dir.path(), "leveldb", commit).ok()) ::_exit(2);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ASSERT_EQ(::write(go[1], "xx", 2), 2);  // both start together
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ::close(go[0]);
  ::close(go[1]);
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->epoch_size(), 2 * kEpochs);
  for (int e = 0; e < kEpochs; ++e) {
    EXPECT_NE(FindCommittedEpoch(*log, e, {"p"}), nullptr) << e;
    EXPECT_NE(FindCommittedEpoch(*log, e, {"q"}), nullptr) << e;
  }
}

TEST(CommitLogTest, ADamagedLogFallsBackToItsPreviousCopy) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  // One flipped bit in the last byte (inside the last entry).
  std::string bytes = ReadFileToString(LogPath(dir)).value();
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir), bytes).ok());

  absl::StatusOr<CommitLog> strict = ReadCommitLog(dir.path());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(strict.status().message(),
              HasSubstr(absl::StrCat("commit log ", LogPath(dir),
                                     " is damaged: CRC-32C ")));

  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->damage, strict.status());
  EXPECT_EQ(CommittedEpochList(read->log), "0");

  // The next commit rewrites the log from the copy, and keeps the damaged
  // bytes out of the copy.
  Commit(dir.path(), 1, {"a"});
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
  read = ReadCommitLogWithFallback(dir.path());
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->damage.ok()) << read->damage;
}

TEST(CommitLogTest, ACommitKeepsThePreviousLogAsItsCopy) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  const std::string first = ReadFileToString(LogPath(dir)).value();
  Commit(dir.path(), 1, {"a"});
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), first);
  const std::string second = ReadFileToString(LogPath(dir)).value();
  Commit(dir.path(), 2, {"a"});
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), second);
  EXPECT_THAT(ListDir(dir.path()).value(),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"));
}

// Where the file system gives no hard links, the previous copy is written
// out instead.
TEST(CommitLogTest, ThePreviousCopyIsWrittenWhereLinksAreRefused) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  const std::string first = ReadFileToString(LogPath(dir)).value();
  // The commit's first write-side call is the link(2) of the previous copy.
  io_faults::Arm(1, EPERM);
  Commit(dir.path(), 1, {"a"});
  io_faults::Disarm();
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), first);
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
  EXPECT_THAT(ListDir(dir.path()).value(),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"));
  // Any other failure of the link fails the commit and keeps the log.
  io_faults::Arm(1, EIO);
  EpochCommit commit;
  commit.epoch = 2;
  commit.nodes = {"a"};
  absl::Status failed = CommitEpoch(dir.path(), "leveldb", commit);
  io_faults::Disarm();
  // EIO is UNKNOWN in absl::ErrnoToStatus's mapping.
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnknown) << failed;
  EXPECT_THAT(failed.message(),
              HasSubstr(absl::StrCat("link ", LogPath(dir), " to ",
                                     LogPath(dir), ".prev.tmp-")));
  EXPECT_THAT(failed.message(), HasSubstr(": Input/output error"));
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
}

// After commits that append an entry (whose bytes grow the log's without
// encoding it again) and commits that change it otherwise, the file always
// holds exactly protobuf's encoding of the log it lists, for entries whose
// length takes one, two and three bytes to encode.
TEST(CommitLogTest, AnAppendedEntryGivesTheBytesOfTheWholeLog) {
  TempDir dir;
  auto expect_canonical = [&](const std::string& after) {
    const CommitLog log = ReadCommitLog(dir.path()).value();
    EXPECT_EQ(ReadFileToString(LogPath(dir)).value(),
              FrameChecksummed(log.SerializeAsString()))
        << after;
  };
  // Job "a"'s entries, with `n` more nodes.
  auto nodes = [](const std::string& prefix, int n) {
    std::vector<std::string> names = {"a"};
    for (int i = 0; i < n; ++i) names.push_back(absl::StrCat(prefix, i));
    return names;
  };
  Commit(dir.path(), 0, {"a"});
  expect_canonical("the first commit");
  Commit(dir.path(), 1, {"a"});
  expect_canonical("an append");
  Commit(dir.path(), 2, nodes("wide_", 40));  // an entry over 127 bytes
  expect_canonical("a two-byte length");
  Commit(dir.path(), 3, nodes("very_wide_node_", 2000));  // over 16 KiB
  expect_canonical("a three-byte length");
  Commit(dir.path(), 7, {"b"});
  Commit(dir.path(), 4, {"a"});  // before another job's later epoch
  expect_canonical("an entry sorted before the last");
  Commit(dir.path(), 1, {"a"});  // a resumed run drops its later epochs
  expect_canonical("a commit that drops entries");
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a", "7:b"));
  EpochCommit commit;
  commit.epoch = 8;
  commit.nodes = {"a"};
  commit.also = [](CommitLog& log) {
    TakeEntries(log, [](const CommittedEpoch& e) { return e.epoch() == 0; });
  };
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", commit).ok());
  expect_canonical("a commit that retires an epoch");
  Commit(dir.path(), 9, {"a"});
  Commit(dir.path(), 10, {"a"});
  expect_canonical("appends again");
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("1:a", "7:b", "8:a", "9:a", "10:a"));
  // The database type changes the log's head: encoded whole.
  EpochCommit other_type;
  other_type.epoch = 11;
  other_type.nodes = {"a"};
  ASSERT_TRUE(CommitEpoch(dir.path(), "memory", other_type).ok());
  expect_canonical("another database type");
  EXPECT_EQ(ReadCommitLog(dir.path()).value().db_type(), "memory");
  // A log out of order (written by hand): the next commit sorts it.
  CommitLog unsorted = ReadCommitLog(dir.path()).value();
  unsorted.mutable_epoch()->SwapElements(0, 1);
  ASSERT_TRUE(WriteCommitLog(dir.path(), unsorted, /*is_commit=*/false).ok());
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("7:b", "1:a", "8:a", "9:a", "10:a", "11:a"));
  EpochCommit after_unsorted;
  after_unsorted.epoch = 12;
  after_unsorted.nodes = {"a"};
  ASSERT_TRUE(CommitEpoch(dir.path(), "memory", after_unsorted).ok());
  expect_canonical("a log out of order");
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("1:a", "7:b", "8:a", "9:a", "10:a", "11:a", "12:a"));
}

// Whether another open file description can take the directory's lock now.
bool DirLockIsFree(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  CHECK_GE(fd, 0) << dir;
  const bool taken = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  const int error = errno;
  ::close(fd);
  CHECK(taken || error == EWOULDBLOCK) << std::strerror(error);
  return taken;
}

TEST(CommitLogTest, APreparedUpdateHoldsTheLockAndWritesAtFinish) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  const std::string first = ReadFileToString(LogPath(dir)).value();
  absl::StatusOr<CommitLogUpdate> update = CommitLogUpdate::Begin(dir.path());
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_FALSE(DirLockIsFree(dir.path()));
  ASSERT_TRUE(update->Prepare().ok());
  ASSERT_TRUE(update->Prepare().ok());  // once is enough; again is nothing
  // Prepared: the log untouched, its previous copy in place, and the new
  // log's file made.
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), first);
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), first);
  std::vector<std::string> names = ListDir(dir.path()).value();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[2].rfind("MANIFEST.jobgraph.tmp-", 0), 0u) << names[2];
  EpochCommit commit;
  commit.epoch = 1;
  commit.nodes = {"a"};
  ASSERT_TRUE(CommitEpoch(*std::move(update), "leveldb", commit).ok());
  EXPECT_TRUE(DirLockIsFree(dir.path()));
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), first);
  EXPECT_THAT(ListDir(dir.path()).value(),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"));
}

TEST(CommitLogTest, AnAbandonedUpdateChangesNoEntryAndLeavesNoFile) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  const std::string second = ReadFileToString(LogPath(dir)).value();
  {
    absl::StatusOr<CommitLogUpdate> update = CommitLogUpdate::Begin(dir.path());
    ASSERT_TRUE(update.ok()) << update.status();
    ASSERT_TRUE(update->Prepare().ok());
    // Moved: the update that holds the lock keeps it.
    CommitLogUpdate moved = *std::move(update);
    EXPECT_FALSE(DirLockIsFree(dir.path()));
  }
  EXPECT_TRUE(DirLockIsFree(dir.path()));
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), second);
  // The previous copy is now a second name of the log in place.
  EXPECT_EQ(ReadFileToString(LogPath(dir) + ".prev").value(), second);
  EXPECT_THAT(ListDir(dir.path()).value(),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"));
  // An edit that fails or changes nothing after Prepare: the same.
  for (bool fail : {true, false}) {
    absl::StatusOr<CommitLogUpdate> update = CommitLogUpdate::Begin(dir.path());
    ASSERT_TRUE(update.ok()) << update.status();
    ASSERT_TRUE(update->Prepare().ok());
    absl::Status finished = std::move(*update).Finish(
        /*is_commit=*/true, [&](CommitLog& log) -> absl::StatusOr<bool> {
          if (fail) return absl::FailedPreconditionError("no");
          return false;
        });
    EXPECT_EQ(finished,
              fail ? absl::FailedPreconditionError("no") : absl::OkStatus());
    EXPECT_TRUE(DirLockIsFree(dir.path()));
    EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), second);
    EXPECT_THAT(ListDir(dir.path()).value(),
                ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"));
  }
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
}

TEST(CommitLogTest, AnUpdateOfADirectoryWithoutALogWritesTheFirst) {
  TempDir dir;
  absl::StatusOr<CommitLogUpdate> update = CommitLogUpdate::Begin(dir.path());
  ASSERT_TRUE(update.ok()) << update.status();
  ASSERT_TRUE(update->Prepare().ok());  // no log: no previous copy to keep
  EpochCommit commit;
  commit.epoch = 3;
  commit.nodes = {"a"};
  ASSERT_TRUE(CommitEpoch(*std::move(update), "leveldb", commit).ok());
  EXPECT_THAT(Entries(dir.path()), ElementsAre("3:a"));
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("MANIFEST.jobgraph"));
  // A directory that does not exist: NotFound naming it, nothing created.
  const std::string missing = dir.Join("missing");
  absl::StatusOr<CommitLogUpdate> none = CommitLogUpdate::Begin(missing);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr(missing));
  EXPECT_FALSE(PathExists(missing).value());
}

TEST(CommitLogTest, ALogWrittenByAnotherWriterIsReadAgain) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  // Another process adds its job's entry between two commits of this one.
  CommitLog log = ReadCommitLog(dir.path()).value();
  CommittedEpoch* other = log.add_epoch();
  other->set_epoch(1);
  other->add_node("b");
  ASSERT_TRUE(WriteCommitLog(dir.path(), log, /*is_commit=*/false).ok());
  Commit(dir.path(), 2, {"a"});
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a", "1:b", "2:a"));
  // And one that writes the same log again changes nothing.
  log = ReadCommitLog(dir.path()).value();
  ASSERT_TRUE(WriteCommitLog(dir.path(), log, /*is_commit=*/false).ok());
  Commit(dir.path(), 3, {"a"});
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:a", "1:a", "1:b", "2:a", "3:a"));
}

TEST(CommitLogTest, ADeletedLogIsDamageWhenItsCopyRemains) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  ASSERT_TRUE(RemoveRecursively(LogPath(dir)).ok());
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->damage.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read->damage.message(),
            absl::StrCat("commit log ", LogPath(dir),
                         " is missing, but its previous copy ", LogPath(dir),
                         ".prev exists; the log was deleted"));
  // Not mistaken for a new directory.
  ASSERT_TRUE(CreateCommitLogIfMissing(dir.path(), "leveldb").ok());
  EXPECT_FALSE(PathExists(LogPath(dir)).value());
}

TEST(CommitLogTest, BothCopiesDamagedIsTheLogsOwnError) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir), "x").ok());
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir) + ".prev", "y").ok());
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir.path());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr(LogPath(dir) + " is damaged"));
  // A commit refuses to write over what it cannot read.
  EpochCommit commit;
  commit.epoch = 2;
  commit.nodes = {"a"};
  EXPECT_EQ(CommitEpoch(dir.path(), "leveldb", commit).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), "x");
}

TEST(CommitLogTest, ADeletedLogBesideADamagedCopyRefusesACommit) {
  TempDir dir;
  Commit(dir.path(), 0, {"a"});
  Commit(dir.path(), 1, {"a"});
  ASSERT_TRUE(RemoveRecursively(LogPath(dir)).ok());
  const std::string previous = LogPath(dir) + ".prev";
  ASSERT_TRUE(WriteFileAtomically(previous, "y").ok());
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir.path());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(),
              HasSubstr(absl::StrCat("commit log ", LogPath(dir),
                                     " is missing and its previous copy ",
                                     previous, " cannot be read (")));
  EXPECT_THAT(read.status().message(),
              HasSubstr(absl::StrCat("`ckpt recover ", dir.path(), "`")));
  // Before, this read as a directory without a log, and a commit started
  // a new log that listed epoch 2 alone: epochs 0 and 1 were forgotten.
  EpochCommit commit;
  commit.epoch = 2;
  commit.nodes = {"a"};
  EXPECT_EQ(CommitEpoch(dir.path(), "leveldb", commit).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_FALSE(PathExists(LogPath(dir)).value());
  EXPECT_EQ(ReadFileToString(previous).value(), "y");
  ASSERT_TRUE(CreateCommitLogIfMissing(dir.path(), "leveldb").ok());
  EXPECT_FALSE(PathExists(LogPath(dir)).value());
}

TEST(CommitLogTest, ABareLogOfAnOlderVersionStillLoads) {
  TempDir dir;
  CommitLog log;
  log.set_format_version(1);
  log.set_db_type("leveldb");
  CommittedEpoch* e = log.add_epoch();
  e->set_epoch(7);
  e->add_node("a");
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir), log.SerializeAsString()).ok());
  absl::StatusOr<CommitLog> read = ReadCommitLog(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(CommittedEpochList(*read), "7");
  // The next write frames it.
  Commit(dir.path(), 8, {"a"});
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value().substr(0, 8), "JGCKSUM\n");
  EXPECT_THAT(Entries(dir.path()), ElementsAre("7:a", "8:a"));
}

// Logs written before Preemption.group existed named the group in field 1
// as a string: readers see the enum, and the next commit, which appends its
// entry to those bytes, reads back the same. Entries written now name it in
// both fields, for readers that know only field 1.
TEST(CommitLogTest, AGroupNamedInAnOlderLogReadsAsItsEnum) {
  TempDir dir;
  CommitLog log;
  log.set_format_version(1);
  log.set_db_type("leveldb");
  for (const auto& [epoch, name] : std::vector<std::pair<int, std::string>>{
           {0, "init"}, {1, "epoch"}, {2, "download"}, {3, "bogus"}}) {
    CommittedEpoch* e = log.add_epoch();
    e->set_epoch(epoch);
    e->add_node("a");
    e->mutable_preemption()->set_group_name(name);
    e->mutable_preemption()->set_signal("SIGTERM");
  }
  ASSERT_TRUE(WriteCommitLog(dir.path(), log, /*is_commit=*/false).ok());
  for (int pass = 0; pass < 2; ++pass) {
    absl::StatusOr<CommitLog> read = ReadCommitLog(dir.path());
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_GE(read->epoch_size(), 4);
    const JobGroup expected[] = {JOB_GROUP_INIT, JOB_GROUP_EPOCH,
                                 JOB_GROUP_DOWNLOAD, JOB_GROUP_UNSPECIFIED};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(read->epoch(i).preemption().group(), expected[i]) << i;
      EXPECT_EQ(read->epoch(i).preemption().signal(), "SIGTERM") << i;
    }
    EXPECT_EQ(read->epoch(3).preemption().group_name(), "bogus");
    Commit(dir.path(), 4, {"a"});
  }
  EXPECT_THAT(Entries(dir.path()),
              ElementsAre("0:a", "1:a", "2:a", "3:a", "4:a"));
  // A new entry: both fields.
  EpochCommit commit;
  commit.epoch = 5;
  commit.nodes = {"a"};
  commit.preemption.emplace();
  commit.preemption->set_group(JOB_GROUP_EPOCH);
  ASSERT_TRUE(CommitEpoch(dir.path(), "leveldb", commit).ok());
  CommitLog bare;
  ASSERT_TRUE(bare.ParseFromString(
      UnframeChecksummed(ReadFileToString(LogPath(dir)).value(), "log")
          .value()
          .payload));
  ASSERT_EQ(bare.epoch_size(), 6);
  EXPECT_EQ(bare.epoch(5).preemption().group(), JOB_GROUP_EPOCH);
  EXPECT_EQ(bare.epoch(5).preemption().group_name(), "epoch");
  EXPECT_EQ(bare.epoch(1).preemption().group_name(), "epoch");
}

// An entry whose group_name disagrees with its group (another writer's
// name, found by commit_log_append_fuzzer): the next commit rewrites the
// log with the name fixed rather than appending to bytes that disagree
// with what it holds.
TEST(CommitLogTest, ACommitAfterAStaleGroupNameRewritesTheLog) {
  TempDir dir;
  CommitLog log;
  log.set_format_version(1);
  log.set_db_type("leveldb");
  CommittedEpoch* e = log.add_epoch();
  e->set_epoch(0);
  e->add_node("a");
  e->mutable_preemption()->set_group(JOB_GROUP_EPOCH);
  e->mutable_preemption()->set_group_name("download");
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir),
                                  FrameChecksummed(log.SerializeAsString()))
                  .ok());
  Commit(dir.path(), 1, {"a"});
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a", "1:a"));
  CommitLog bare;
  ASSERT_TRUE(bare.ParseFromString(
      UnframeChecksummed(ReadFileToString(LogPath(dir)).value(), "log")
          .value()
          .payload));
  ASSERT_EQ(bare.epoch_size(), 2);
  EXPECT_EQ(bare.epoch(0).preemption().group(), JOB_GROUP_EPOCH);
  EXPECT_EQ(bare.epoch(0).preemption().group_name(), "epoch");
}

// A write names each entry's group in group_name, replacing the name the
// entry held, and changes nothing else: readers take the group, not the name
// (checkpoint/FORMAT.md, section 2). The first entry is the one
// commit_log_fuzzer wrote back (corpus/commit_log_fuzzer/
// stale_group_name_write_back): in the old bare format, named "mpr_0" beside
// a group no version defines, which it expected to read back unchanged.
TEST(CommitLogTest, AWriteBackNamesEachGroupAndKeepsTheRest) {
  // The varint 20718965793 of the fuzzer's input, as the int32 a parser
  // keeps of it; not a JobGroup, so its name is empty.
  const JobGroup unknown_group = static_cast<JobGroup>(-755870687);
  TempDir dir;
  CommitLog log;
  log.set_format_version(1);
  log.set_db_type("leveldb");
  CommittedEpoch* unknown = log.add_epoch();
  unknown->set_epoch(46);
  unknown->add_node("trainer_0");
  unknown->set_total_bytes(691);
  unknown->set_committed_unix_micros(1795512201270855);
  unknown->set_save_micros(1000);
  unknown->mutable_preemption()->set_group(unknown_group);
  unknown->mutable_preemption()->set_preempted_unix_micros(691);
  unknown->mutable_preemption()->set_group_name("mpr_0");
  CommittedEpoch* stale = log.add_epoch();
  stale->set_epoch(47);
  stale->add_node("trainer_0");
  stale->mutable_preemption()->set_group(JOB_GROUP_EPOCH);
  stale->mutable_preemption()->set_signal("SIGTERM");
  stale->mutable_preemption()->set_group_name("download");
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir), log.SerializeAsString()).ok());
  absl::StatusOr<CommitLog> read = ReadCommitLog(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), log.SerializeAsString());

  CommitLog expected = log;
  expected.mutable_epoch(0)->mutable_preemption()->set_group_name("");
  expected.mutable_epoch(1)->mutable_preemption()->set_group_name("epoch");
  const std::string expected_bytes =
      FrameChecksummed(expected.SerializeAsString());
  ASSERT_TRUE(WriteCommitLog(dir.path(), *read, /*is_commit=*/false).ok());
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), expected_bytes);
  absl::StatusOr<CommitLog> again = ReadCommitLog(dir.path());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->epoch_size(), 2);
  EXPECT_EQ(again->epoch(0).preemption().group(), unknown_group);
  EXPECT_EQ(again->epoch(0).preemption().group_name(), "");
  EXPECT_EQ(again->epoch(0).preemption().preempted_unix_micros(), 691);
  EXPECT_EQ(again->epoch(0).committed_unix_micros(), 1795512201270855);
  EXPECT_EQ(again->epoch(1).preemption().group(), JOB_GROUP_EPOCH);
  EXPECT_EQ(again->epoch(1).preemption().group_name(), "epoch");
  EXPECT_EQ(again->epoch(1).preemption().signal(), "SIGTERM");
  EXPECT_EQ(again->SerializeAsString(), expected.SerializeAsString());
  // Once named, a write back keeps the log byte for byte.
  ASSERT_TRUE(WriteCommitLog(dir.path(), *again, /*is_commit=*/false).ok());
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), expected_bytes);
}

TEST(CommitLogTest, CreateIfMissingNeverReplacesALog) {
  TempDir dir;
  ASSERT_TRUE(CreateCommitLogIfMissing(dir.path(), "leveldb").ok());
  EXPECT_THAT(Entries(dir.path()), ElementsAre());
  Commit(dir.path(), 0, {"a"});
  ASSERT_TRUE(CreateCommitLogIfMissing(dir.path(), "leveldb").ok());
  EXPECT_THAT(Entries(dir.path()), ElementsAre("0:a"));
  ASSERT_TRUE(WriteFileAtomically(LogPath(dir), "damaged").ok());
  ASSERT_TRUE(CreateCommitLogIfMissing(dir.path(), "leveldb").ok());
  EXPECT_EQ(ReadFileToString(LogPath(dir)).value(), "damaged");
}

}  // namespace
}  // namespace jobgraph

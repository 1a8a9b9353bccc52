// The local tier (CheckpointOptions::local_directory): every save commits
// there first, a background flush copies epochs to the shared directory, and
// a resume reads the nearest copy that verifies and continues the shared
// history. Caffe2's checkpoint_test pipeline: totals 103, 115, 136, 145
// after epochs 1..4.

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::NewTempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSubsetOf;

constexpr int64_t kTotals[] = {100, 103, 115, 136, 145};
const std::vector<std::string> kNodes = {"trainer_0"};

std::vector<int64_t> ListedEpochs(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  CHECK(log.ok()) << log.status();
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : log->epoch()) epochs.push_back(e.epoch());
  return epochs;
}

const CommittedEpoch& Entry(const CommitLog& log, int64_t epoch) {
  const CommittedEpoch* entry = FindCommittedEpoch(log, epoch, kNodes);
  CHECK(entry != nullptr) << "epoch " << epoch;
  return *entry;
}

class TierTest : public ::testing::Test {
 protected:
  TierTest()
      : shared_(NewTempDir("shared")), local_(NewTempDir("local") + "/%h") {
    testing::BuildCaffe2Pipeline(job_, 0);
  }

  CheckpointOptions Options() const {
    return {.directory = shared_, .local_directory = local_};
  }
  std::string Local() const {
    std::string local = local_;
    local.replace(local.size() - 2, 2, HostNameForTest());
    return local;
  }
  static std::string HostNameForTest() {
    char name[256] = {};
    CHECK_EQ(::gethostname(name, sizeof(name) - 1), 0);
    return name;
  }

  // A full run (epochs 0..4) with `options`.
  void RunAll(const CheckpointOptions& options) {
    LocalSession session;
    Checkpointer checkpointer(options);
    JobRunner runner(job_, &checkpointer);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, 4);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
    EXPECT_EQ(runner.stats().save_failures, 0);
  }

  // Starts from `resume` and restores it: the epoch and where it was read.
  struct Resumed {
    int64_t epoch = -1;
    std::string read_from;
    int64_t total = 0;
  };
  Resumed Resume(const CheckpointOptions& options, const ResumeFrom& resume) {
    LocalSession session;
    Checkpointer checkpointer(options);
    absl::StatusOr<std::optional<int64_t>> start =
        checkpointer.Start(session, kNodes, resume);
    CHECK(start.ok()) << start.status();
    CHECK(start->has_value());
    absl::StatusOr<CheckpointStats> restored =
        checkpointer.Restore(session, **start);
    CHECK(restored.ok()) << restored.status();
    return {**start, restored->read_from, testing::Caffe2Total(session)};
  }

  Job job_;
  const std::string shared_;
  const std::string local_;
};

TEST_F(TierTest, EverySaveCommitsLocallyAndIsFlushed) {
  RunAll(Options());
  // A flush that falls behind copies the newest epoch, so which of 1..3
  // reach the shared directory depends on the machine's speed; epoch 0 (the
  // first flush) and 4 (the end of the run waits for it) always do, as the
  // same commit as in the local tier.
  const std::vector<int64_t> shared = ListedEpochs(shared_);
  EXPECT_THAT(shared, Contains(0));
  EXPECT_THAT(shared, Contains(4));
  EXPECT_THAT(shared, IsSubsetOf({0, 1, 2, 3, 4}));
  const std::vector<int64_t> local = ListedEpochs(Local());
  EXPECT_THAT(local, Contains(3));
  EXPECT_THAT(local, Contains(4));
  // keep_local=2, plus what a flush in progress pinned at a commit.
  EXPECT_THAT(local, IsSubsetOf({1, 2, 3, 4}));
  const CommitLog shared_log = *ReadCommitLog(shared_);
  const CommitLog local_log = *ReadCommitLog(Local());
  for (int64_t epoch : local) {
    if (FindCommittedEpoch(shared_log, epoch, kNodes) == nullptr) continue;
    EXPECT_EQ(Entry(shared_log, epoch).committed_unix_micros(),
              Entry(local_log, epoch).committed_unix_micros())
        << "epoch " << epoch;
    EXPECT_EQ(Entry(shared_log, epoch).total_bytes(), 291);
    EXPECT_TRUE(VerifyCommittedEpoch(shared_, "leveldb", kNodes, epoch).ok());
  }
  // Nothing of the local tier is left unlisted.
  for (int64_t epoch = 0; epoch <= 4; ++epoch) {
    const bool listed =
        std::find(local.begin(), local.end(), epoch) != local.end();
    EXPECT_EQ(*PathExists(CheckpointDbPath(Local(), "trainer_0", epoch)),
              listed)
        << "epoch " << epoch;
  }
}

TEST_F(TierTest, ResumeReadsTheLocalTierFirst) {
  RunAll(Options());
  for (int64_t epoch : {3, 4}) {
    Resumed resumed = Resume(Options(), ResumeFrom::Epoch(epoch));
    EXPECT_EQ(resumed.read_from, Local());
    EXPECT_EQ(resumed.total, kTotals[epoch]);
  }
  Resumed latest = Resume(Options(), ResumeFrom::Latest());
  EXPECT_EQ(latest.epoch, 4);
  EXPECT_EQ(latest.read_from, Local());
  // An epoch only the shared directory keeps comes from there.
  Resumed old = Resume(Options(), ResumeFrom::Epoch(0));
  EXPECT_EQ(old.read_from, shared_);
  EXPECT_EQ(old.total, 100);
  // A JobRunner's stats (and so --metrics_out) say where and how much.
  for (const auto& [epoch, tier] : std::vector<std::pair<int64_t, std::string>>{
           {3, "local"}, {0, "shared"}}) {
    LocalSession session;
    Checkpointer checkpointer(Options());
    JobRunner runner(job_, &checkpointer,
                     {.resume_from = ResumeFrom::Epoch(epoch)});
    ASSERT_TRUE(runner.Train(session).ok());
    EXPECT_EQ(runner.stats().resumed_tier, tier) << "epoch " << epoch;
    EXPECT_EQ(runner.stats().resumed_bytes, 291);
    ASSERT_FALSE(runner.stats().epochs.empty());
    EXPECT_EQ(runner.stats().epochs[0].resumed_tier, tier);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
  }
}

TEST_F(TierTest, ALostLocalTierFallsBackToTheSharedDirectory) {
  RunAll(Options());
  ASSERT_TRUE(RemoveRecursively(Local()).ok());
  Resumed latest = Resume(Options(), ResumeFrom::Latest());
  EXPECT_EQ(latest.epoch, 4);
  EXPECT_EQ(latest.read_from, shared_);
  EXPECT_EQ(latest.total, 145);
}

TEST_F(TierTest, ADamagedLocalCopyIsSkippedForTheSharedOne) {
  RunAll(Options());
  // Flip one byte in the middle of each table of the local epoch 4.
  const std::string db = CheckpointDbPath(Local(), "trainer_0", 4);
  int damaged = 0;
  const std::vector<std::string> names = *ListDir(db);
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, ".ldb")) continue;
    const std::string path = JoinPath(db, name);
    std::string bytes = *ReadFileToString(path);
    bytes[bytes.size() / 2] ^= 0x40;
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  Resumed latest = Resume(Options(), ResumeFrom::Latest());
  EXPECT_EQ(latest.epoch, 4);
  EXPECT_EQ(latest.read_from, shared_);
  EXPECT_EQ(latest.total, 145);
}

TEST_F(TierTest, AStaleLocalTierIsIgnored) {
  RunAll(Options());
  // The job moves to another host (another local tier), resumes from epoch 2
  // and commits new epochs 3 and 4, which it flushes.
  CheckpointOptions elsewhere = Options();
  elsewhere.local_directory = NewTempDir("other_host");
  {
    LocalSession session;
    Checkpointer checkpointer(elsewhere);
    JobRunner runner(job_, &checkpointer,
                     {.resume_from = ResumeFrom::Epoch(0)});
    ASSERT_TRUE(runner.Train(session).ok());
  }
  // Back on the first host: its epochs 3 and 4 are another history now.
  ASSERT_THAT(ListedEpochs(Local()), ElementsAre(3, 4));
  Resumed latest = Resume(Options(), ResumeFrom::Latest());
  EXPECT_EQ(latest.epoch, 4);
  EXPECT_EQ(latest.read_from, shared_);
  EXPECT_EQ(latest.total, 145);
  // They left the local tier, databases and all: no later run can take
  // them for the job's history.
  EXPECT_THAT(ListedEpochs(Local()), ElementsAre());
  EXPECT_FALSE(*PathExists(CheckpointDbPath(Local(), "trainer_0", 3)));
  EXPECT_FALSE(*PathExists(CheckpointDbPath(Local(), "trainer_0", 4)));
}

TEST_F(TierTest, SharedEveryFlushesEveryKthEpochAndTheLast) {
  CheckpointOptions options = Options();
  options.shared_every = 3;
  RunAll(options);
  // 0 and 3 in the background (a flush that falls behind skips to the
  // newest), 4 at the end of the run.
  const std::vector<int64_t> shared = ListedEpochs(shared_);
  EXPECT_THAT(shared, Contains(4));
  EXPECT_THAT(shared, IsSubsetOf({0, 3, 4}));
  // The local tier keeps 3 and 4; the shared directory may not have 3, but
  // the local tier continues its history: 3 is there to resume from.
  Resumed three = Resume(options, ResumeFrom::Epoch(3));
  EXPECT_EQ(three.read_from, Local());
  EXPECT_EQ(three.total, 136);
}

TEST_F(TierTest, AsyncSavesFlushToo) {
  CheckpointOptions options = Options();
  options.async = true;
  RunAll(options);
  EXPECT_THAT(ListedEpochs(shared_), Contains(4));
  Resumed latest = Resume(Options(), ResumeFrom::Latest());
  EXPECT_EQ(latest.epoch, 4);
  EXPECT_EQ(latest.read_from, Local());
}

TEST_F(TierTest, LoadBlobsReadsTheNearestCopy) {
  RunAll(Options());
  // Epoch 0 only the shared directory keeps; 4 both tiers.
  for (int64_t epoch : {0, 4}) {
    LocalSession session;
    Checkpointer checkpointer(Options());
    JobRunner runner(job_, &checkpointer);
    absl::StatusOr<bool> loaded =
        runner.LoadBlobsFromCheckpoints({"total"}, epoch, session);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_TRUE(*loaded) << "epoch " << epoch;
    EXPECT_EQ(testing::Caffe2Total(session), kTotals[epoch]);
  }
}

TEST_F(TierTest, ARewoundRunsFirstCommitIsFlushedBeforeItsSaveReturns) {
  RunAll(Options());
  const int64_t old_commit =
      Entry(*ReadCommitLog(shared_), 4).committed_unix_micros();
  // Resumed from epoch 3, a run commits a new epoch 4 locally. Were its
  // flush left to the background, a crash before it would leave the shared
  // log ending with the abandoned epoch 4, which a resume would take for
  // the history. So the new commit is in the shared directory when the
  // save returns, even with shared_every=100.
  CheckpointOptions options = Options();
  options.shared_every = 100;
  LocalSession session;
  Checkpointer checkpointer(options);
  ASSERT_TRUE(checkpointer.Start(session, kNodes, ResumeFrom::Epoch(3)).ok());
  ASSERT_TRUE(checkpointer.Restore(session, 3).ok());
  ASSERT_TRUE(checkpointer.SaveEpoch(session, 4).ok());
  const int64_t new_commit =
      Entry(*ReadCommitLog(Local()), 4).committed_unix_micros();
  EXPECT_NE(new_commit, old_commit);
  EXPECT_EQ(Entry(*ReadCommitLog(shared_), 4).committed_unix_micros(),
            new_commit);
  // The next commits are flushed as shared_every says: not at all here.
  ASSERT_TRUE(checkpointer.SaveEpoch(session, 5).ok());
  EXPECT_EQ(ListedEpochs(shared_).back(), 4);
  EXPECT_TRUE(checkpointer.FlushToShared().ok());
  EXPECT_EQ(ListedEpochs(shared_).back(), 5);
}

TEST_F(TierTest, AnotherRunOnTheSharedDirectoryIsRefused) {
  LocalSession first_session;
  Checkpointer first(Options());
  ASSERT_TRUE(first.Start(first_session, kNodes, ResumeFrom::Latest()).ok());
  // Another host (another local tier) runs the same job on the same shared
  // directory: its flushes would overwrite the first run's epochs.
  CheckpointOptions elsewhere = Options();
  elsewhere.local_directory = NewTempDir("other_host");
  LocalSession second_session;
  Checkpointer second(elsewhere);
  absl::StatusOr<std::optional<int64_t>> start =
      second.Start(second_session, kNodes, ResumeFrom::Latest());
  EXPECT_EQ(start.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(start.status().message(), HasSubstr(shared_));
  first.End();
  EXPECT_TRUE(second.Start(second_session, kNodes, ResumeFrom::Latest()).ok());
}

TEST_F(TierTest, BadTierOptionsAreRefused) {
  struct Case {
    CheckpointOptions options;
    std::string message;
  };
  CheckpointOptions same = Options();
  same.local_directory = shared_ + "/";
  CheckpointOptions every = Options();
  every.shared_every = 0;
  CheckpointOptions keep = Options();
  keep.keep_local = 0;
  CheckpointOptions incremental = Options();
  incremental.incremental = true;
  CheckpointOptions placeholder = Options();
  placeholder.local_directory = "/tmp/x-%r";
  for (const Case& c : std::vector<Case>{
           {same, "is the shared directory itself"},
           {every, "shared_every is 0"},
           {keep, "keep_local is 0"},
           {incremental, "with incremental saves"},
           {placeholder, "only %h (the host name) and %% (a percent sign)"}}) {
    LocalSession session;
    Checkpointer checkpointer(c.options);
    absl::StatusOr<std::optional<int64_t>> start =
        checkpointer.Start(session, kNodes, ResumeFrom::Latest());
    EXPECT_EQ(start.status().code(), absl::StatusCode::kInvalidArgument)
        << c.message;
    EXPECT_THAT(start.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace jobgraph

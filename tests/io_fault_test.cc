// Injected I/O faults (checkpoint/util/io_faults.h): every write-side I/O call
// of one epoch's save and commit, in a two-node job, fails in turn with ENOSPC
// or EIO. Each time the failed save is reported and counted, the job goes
// on, every committed epoch still verifies, nothing temporary is left behind,
// and a `latest` resume ends with the exact result.

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "engine/session.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kNodes = 2;
// Faults are injected into the save (and commit) of this epoch.
constexpr int64_t kFaultyEpoch = 2;

struct Outcome {
  absl::StatusOr<int64_t> epochs;
  JobRunStats stats;
  std::vector<int64_t> totals;
  int64_t faulty_save_calls = 0;  // I/O calls counted during the faulty save
};

// One run of the two-node pipeline; with fail_at > 0, the fail_at-th I/O
// call of epoch kFaultyEpoch's save fails with `error`.
Outcome RunPipeline(const std::string& dir, ResumeFrom resume, int64_t fail_at,
                    int error) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  LocalSession session;
  MultiNodeCheckpointManager checkpoints({.directory = dir});
  Outcome run;
  JobRunnerOptions options;
  options.resume_from = resume;
  // Epoch k's stats arrive after its save: arm after epoch k-1's.
  options.on_epoch_end = [&](const EpochStats& epoch) {
    if (fail_at > 0 && epoch.epoch == kFaultyEpoch - 1) {
      io_faults::Arm(fail_at, error);
    }
    if (fail_at > 0 && epoch.epoch == kFaultyEpoch) {
      run.faulty_save_calls = io_faults::Calls();
      io_faults::Disarm();
    }
  };
  JobRunner runner(job, &checkpoints, options);
  run.epochs = runner.Train(session);
  io_faults::Disarm();
  run.stats = runner.stats();
  if (run.epochs.ok()) {
    for (int id = 0; id < kNodes; ++id) {
      run.totals.push_back(testing::Caffe2Total(session, id));
    }
  }
  return run;
}

class IoFaultTest : public ::testing::TestWithParam<int> {};

TEST_P(IoFaultTest, EveryFailingCallOfASaveFailsItCleanly) {
  const int error = GetParam();
  int64_t cases = 0;
  for (int64_t n = 1;; ++n) {
    SCOPED_TRACE(
        absl::StrCat("I/O call ", n, " fails with ", std::strerror(error)));
    const std::string dir = testing::NewTempDir(absl::StrCat("fault_", n));
    Outcome run = RunPipeline(dir, ResumeFrom::Scratch(), n, error);
    ASSERT_TRUE(run.epochs.ok()) << run.epochs.status();
    if (run.faulty_save_calls < n) break;  // the save made fewer calls
    ++cases;
    // The job went on to the exact end; the one failed save was reported.
    EXPECT_EQ(*run.epochs, 4);
    EXPECT_THAT(run.totals, ElementsAre(145, 145));
    ASSERT_EQ(run.stats.save_failures, 1);
    EXPECT_THAT(run.stats.save_errors[0],
                HasSubstr(absl::StrCat("unable to write checkpoint for epoch ",
                                       kFaultyEpoch)));
    EXPECT_THAT(run.stats.save_errors[0], HasSubstr(std::strerror(error)));

    // Every other epoch is committed and verifies; the failed one is not,
    // except when the failing call was the fsync of the directory after the
    // commit log's rename: the log then already lists the epoch (its
    // databases are complete and durable), but the commit may not survive a
    // crash, so the save is still reported as failed. The same message
    // comes from the fsync that precedes it (after the previous copy is
    // written), where the epoch is not listed; a Save op's own fsync of the
    // directory has "node '...'" in front.
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<std::string> nodes;
    for (int id = 0; id < kNodes; ++id) {
      nodes.push_back(absl::StrCat("trainer_", id));
    }
    const bool listed =
        FindCommittedEpoch(*log, kFaultyEpoch, nodes) != nullptr;
    if (listed) {
      EXPECT_EQ(
          run.stats.save_errors[0],
          absl::StrCat("unable to write checkpoint for epoch ", kFaultyEpoch,
                       ": fsync ", dir, ": ", std::strerror(error)));
    }
    EXPECT_EQ(CommittedEpochList(*log),
              listed ? "0, 1, 2, 3, 4" : "0, 1, 3, 4");
    for (const CommittedEpoch& entry : log->epoch()) {
      absl::Status verified =
          VerifyCommittedEpoch(dir, "leveldb", nodes, entry.epoch());
      EXPECT_TRUE(verified.ok()) << entry.epoch() << ": " << verified;
    }
    // Nothing temporary survives once the later saves succeeded.
    const std::vector<std::string> names = ListDir(dir).value();
    for (const std::string& name : names) {
      EXPECT_FALSE(absl::StrContains(name, ".tmp-")) << name;
    }

    Outcome resumed = RunPipeline(dir, ResumeFrom::Latest(), 0, 0);
    ASSERT_TRUE(resumed.epochs.ok()) << resumed.epochs.status();
    EXPECT_EQ(resumed.stats.resumed_from, std::optional<int64_t>(4));
    EXPECT_THAT(resumed.totals, ElementsAre(145, 145));
    ASSERT_TRUE(RemoveRecursively(dir).ok());
  }
  LOG(INFO) << "walked " << cases << " failing I/O calls ("
            << std::strerror(error) << ")";
  // A two-node save and commit makes dozens of write-side calls.
  EXPECT_GE(cases, 20);
}

INSTANTIATE_TEST_SUITE_P(Errors, IoFaultTest, ::testing::Values(ENOSPC, EIO),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == ENOSPC ? "ENOSPC" : "EIO";
                         });

}  // namespace
}  // namespace jobgraph

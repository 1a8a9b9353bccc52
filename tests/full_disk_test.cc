// A real full disk: the checkpoint directory is a small tmpfs mounted for the
// test (root only; skipped with the reason otherwise). After epoch 1 is
// saved, a filler file takes every free byte; epoch 2's save then fails with
// ENOSPC, the job goes on, the older checkpoints stay intact, and once the
// filler is removed the next epochs save and commit. A latest resume ends
// with the exact result.

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

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

// Writes zeros into `path` until the file system is full.
void FillDisk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  PCHECK(fd >= 0) << path;
  const std::string block(4096, '\0');
  while (true) {
    const ssize_t n = ::write(fd, block.data(), block.size());
    if (n < 0) {
      CHECK_EQ(errno, ENOSPC) << std::strerror(errno);
      break;
    }
  }
  ::close(fd);
}

class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to mount a tmpfs (CI runs as root)";
    }
    mount_point_ = testing::NewTempDir("full_disk");
    if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, "size=4m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs at " << mount_point_ << ": "
                   << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) PCHECK(::umount(mount_point_.c_str()) == 0);
  }

  std::string mount_point_;
  bool mounted_ = false;
};

struct Outcome {
  absl::StatusOr<int64_t> epochs;
  JobRunStats stats;
  std::vector<int64_t> totals;
};

Outcome RunPipeline(const std::string& dir, ResumeFrom resume,
                    const std::string& filler) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  LocalSession session;
  MultiNodeCheckpointManager checkpoints({.directory = dir});
  JobRunnerOptions options;
  options.resume_from = resume;
  if (!filler.empty()) {
    options.on_epoch_end = [&](const EpochStats& epoch) {
      if (epoch.epoch == 1) FillDisk(filler);
      if (epoch.epoch == 2) CHECK(RemoveRecursively(filler).ok());
    };
  }
  JobRunner runner(job, &checkpoints, options);
  Outcome outcome{runner.Train(session), {}, {}};
  outcome.stats = runner.stats();
  if (outcome.epochs.ok()) {
    for (int id = 0; id < kNodes; ++id) {
      outcome.totals.push_back(testing::Caffe2Total(session, id));
    }
  }
  return outcome;
}

TEST_F(FullDiskTest, ASaveOnAFullDiskFailsCleanlyAndTheNextOneCommits) {
  const std::string dir = JoinPath(mount_point_, "ckpt");
  const std::string filler = JoinPath(mount_point_, "filler");
  Outcome run = RunPipeline(dir, ResumeFrom::Scratch(), filler);
  ASSERT_TRUE(run.epochs.ok()) << run.epochs.status();
  EXPECT_EQ(*run.epochs, 4);
  EXPECT_THAT(run.totals, ElementsAre(145, 145));
  ASSERT_EQ(run.stats.save_failures, 1);
  LOG(INFO) << "the save on the full disk failed with: "
            << run.stats.save_errors[0];
  EXPECT_THAT(run.stats.save_errors[0],
              HasSubstr("unable to write checkpoint for epoch 2: "));
  EXPECT_THAT(run.stats.save_errors[0], HasSubstr("No space left on device"));

  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(CommittedEpochList(*log), "0, 1, 3, 4");
  std::vector<std::string> nodes;
  for (int id = 0; id < kNodes; ++id) {
    nodes.push_back(absl::StrCat("trainer_", id));
  }
  for (const CommittedEpoch& entry : log->epoch()) {
    absl::Status verified =
        VerifyCommittedEpoch(dir, "leveldb", nodes, entry.epoch());
    EXPECT_TRUE(verified.ok()) << entry.epoch() << ": " << verified;
  }
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    EXPECT_FALSE(absl::StrContains(name, ".tmp-")) << name;
  }

  Outcome resumed = RunPipeline(dir, ResumeFrom::Latest(), "");
  ASSERT_TRUE(resumed.epochs.ok()) << resumed.epochs.status();
  EXPECT_EQ(resumed.stats.resumed_from, std::optional<int64_t>(4));
  EXPECT_THAT(resumed.totals, ElementsAre(145, 145));
}

}  // namespace
}  // namespace jobgraph

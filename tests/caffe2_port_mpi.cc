// The Caffe2 checkpoint_test port (checkpoint_test.cc's RunWith), on
// MpiSession: tests/mpi_test.cc runs this binary under `mpirun -np N`, where
// every rank runs every test (SPMD) and a failure on any rank fails the run.
// The job has four nodes, so each rank hosts one or more of them.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "engine/mpi/mpi_session.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

constexpr int kNodes = 4;
constexpr int64_t kExpectedTotals[] = {103, 115, 136, 145};

std::unique_ptr<MpiSession> NewSession(const Job& job) {
  absl::StatusOr<std::unique_ptr<MpiSession>> session =
      MpiSession::Create(job.nodes());
  CHECK(session.ok()) << session.status();
  return *std::move(session);
}

// The directory rank 0 makes, shared with every rank.
std::string SharedTempDir(const Session& session, const std::string& name) {
  std::string dir;
  if (session.rank() == 0) dir = testing::NewTempDir(name);
  absl::StatusOr<std::string> shared = session.Broadcast(dir, 0);
  CHECK(shared.ok()) << shared.status();
  return *shared;
}

TEST(Caffe2PortOnMpi, MultiNodeCheckpointManagerRunResumeAndLoad) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  std::unique_ptr<MpiSession> session = NewSession(job);
  const std::string dir = SharedTempDir(*session, "caffe2_mpi");
  {
    MultiNodeCheckpointManager manager({.directory = dir});
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(*session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, 4);
    for (int id = 0; id < kNodes; ++id) {
      EXPECT_EQ(testing::Caffe2Total(*session, id), 145) << id;
    }
    ASSERT_EQ(runner.stats().epochs.size(), 5u);
    // Every rank reports the bytes of every node: 291 per node.
    for (const EpochStats& e : runner.stats().epochs) {
      EXPECT_TRUE(e.saved) << "epoch " << e.epoch;
      EXPECT_EQ(e.save_bytes, 291 * kNodes) << "epoch " << e.epoch;
    }
  }
  std::unique_ptr<Checkpointer> manager;
  for (int64_t resume = 1; resume <= 4; ++resume) {
    // A fresh session and manager for every run, as Caffe2's run_with.
    session = NewSession(job);
    manager = std::make_unique<MultiNodeCheckpointManager>(
        CheckpointOptions{.directory = dir});
    JobRunner runner(job, manager.get(),
                     {.resume_from = ResumeFrom::Epoch(resume)});
    absl::StatusOr<int64_t> epochs = runner.Train(*session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, resume < 4 ? 4 : 5) << "resumed from " << resume;
    for (int id = 0; id < kNodes; ++id) {
      EXPECT_EQ(testing::Caffe2Total(*session, id), 145)
          << "resumed from " << resume;
    }
    EXPECT_EQ(runner.stats().resumed_from, resume);
  }
  // Each epoch's checkpoint holds that epoch's state, on every node.
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    absl::StatusOr<CheckpointStats> load = manager->Restore(*session, epoch);
    ASSERT_TRUE(load.ok()) << load.status();
    EXPECT_EQ(load->bytes, 291 * kNodes);
    for (int id = 0; id < kNodes; ++id) {
      EXPECT_EQ(testing::Caffe2Total(*session, id), kExpectedTotals[epoch - 1])
          << "epoch " << epoch << " node " << id;
    }
  }
}

TEST(Caffe2PortOnMpi, ResumeLatestFromEmptyDirectoryStartsFromScratch) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  std::unique_ptr<MpiSession> session = NewSession(job);
  MultiNodeCheckpointManager manager(
      {.directory = SharedTempDir(*session, "caffe2_mpi_empty")});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Latest()});
  absl::StatusOr<int64_t> epochs = runner.Train(*session);
  ASSERT_TRUE(epochs.ok()) << epochs.status();
  EXPECT_EQ(*epochs, 4);
  EXPECT_FALSE(runner.stats().resumed_from.has_value());
}

TEST(Caffe2PortOnMpi, ResumeErrorsAreTheSameOnEveryRank) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  std::unique_ptr<MpiSession> session = NewSession(job);
  const std::string dir = SharedTempDir(*session, "caffe2_mpi_missing");
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(3)});
  absl::StatusOr<int64_t> epochs = runner.Train(*session);
  ASSERT_FALSE(epochs.ok());
  // Every rank got rank 0's answer.
  absl::StatusOr<std::vector<std::string>> all =
      session->AllGather(std::string(epochs.status().message()));
  ASSERT_TRUE(all.ok());
  for (const std::string& message : *all) {
    EXPECT_EQ(message, epochs.status().message());
  }
  EXPECT_NE(epochs.status().message().find("epoch 3"), std::string::npos)
      << epochs.status();
}

}  // namespace
}  // namespace jobgraph

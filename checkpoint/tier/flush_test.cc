#include "checkpoint/tier/flush.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/tier/flusher.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/pause_gate.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing_util::RunStoppedAtGate;
using ::jobgraph::testing_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kNodes = {"a", "b"};

class FlushTest : public ::testing::Test {
 protected:
  FlushTest() {
    local_ = dirs_.Join("local");
    shared_ = dirs_.Join("shared");
    CHECK(CreateDir(local_).ok());
  }

  // Saves epoch `epoch` of both nodes into the local tier and commits it
  // there at `micros`.
  void SaveLocal(int64_t epoch, int64_t micros) {
    for (const std::string& node : kNodes) {
      Blob blob;
      Tensor* w = blob.Reset(
          std::make_unique<Tensor>(FLOAT, std::vector<int64_t>{1000}));
      for (int i = 0; i < 1000; ++i) {
        w->mutable_data<float>()[i] = static_cast<float>(epoch * 1000 + i);
      }
      CheckpointDbOptions options;
      options.node = node;
      options.epoch = epoch;
      absl::StatusOr<int64_t> written =
          WriteCheckpointDb("leveldb", CheckpointDbPath(local_, node, epoch),
                            {{"w", &blob}}, options);
      ASSERT_TRUE(written.ok()) << written.status();
    }
    EpochCommit commit;
    commit.epoch = epoch;
    commit.nodes = kNodes;
    commit.total_bytes = 8000;
    commit.committed_unix_micros = micros;
    ASSERT_TRUE(CommitEpoch(local_, "leveldb", commit).ok());
  }

  FlushRequest Request(int64_t epoch) const {
    FlushRequest request;
    request.local = local_;
    request.shared = shared_;
    request.nodes = kNodes;
    request.epoch = epoch;
    return request;
  }

  std::vector<int64_t> SharedEpochs() const {
    absl::StatusOr<CommitLog> log = ReadCommitLog(shared_);
    CHECK(log.ok()) << log.status();
    std::vector<int64_t> epochs;
    for (const CommittedEpoch& e : log->epoch()) epochs.push_back(e.epoch());
    return epochs;
  }

  // The names in the shared directory.
  std::vector<std::string> SharedFiles() const { return *ListDir(shared_); }

  TempDir dirs_;
  std::string local_;
  std::string shared_;
};

TEST_F(FlushTest, CopiesEveryNodeAndCommitsTheSameCommit) {
  SaveLocal(3, 3000);
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(3));
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_FALSE(flushed->already_there);
  EXPECT_GT(flushed->bytes_copied, 8000);
  EXPECT_THAT(SharedEpochs(), ElementsAre(3));
  const CommitLog log = *ReadCommitLog(shared_);
  EXPECT_EQ(log.epoch(0).committed_unix_micros(), 3000);
  EXPECT_EQ(log.epoch(0).total_bytes(), 8000);
  EXPECT_THAT(log.epoch(0).node(), ElementsAre("a", "b"));
  EXPECT_TRUE(VerifyCommittedEpoch(shared_, "leveldb", kNodes, 3).ok());
  EXPECT_THAT(
      SharedFiles(),
      ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev", "a.3", "b.3"));
  // Again: already there, nothing copied.
  flushed = FlushEpoch(Request(3));
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_TRUE(flushed->already_there);
  EXPECT_EQ(flushed->bytes_copied, 0);
}

TEST_F(FlushTest, CarriesTheMarkAfterTheLastEpoch) {
  SaveLocal(2, 2000);
  ASSERT_TRUE(FlushEpoch(Request(2)).ok());
  Preemption mark;
  mark.set_group(JOB_GROUP_DOWNLOAD);
  mark.set_signal("SIGTERM");
  ASSERT_TRUE(MarkEpochLoopFinished(local_, 2, kNodes, mark).ok());
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(2));
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_TRUE(flushed->already_there);
  const CommitLog log = *ReadCommitLog(shared_);
  ASSERT_TRUE(log.epoch(0).has_preemption());
  EXPECT_EQ(log.epoch(0).preemption().group(), JOB_GROUP_DOWNLOAD);
  EXPECT_EQ(log.epoch(0).preemption().signal(), "SIGTERM");
}

TEST_F(FlushTest, ADamagedLocalCopyReachesNothing) {
  SaveLocal(1, 1000);
  const std::string db = CheckpointDbPath(local_, "b", 1);
  std::string table;
  const std::vector<std::string> names = *ListDir(db);
  for (const std::string& name : names) {
    if (absl::EndsWith(name, ".ldb")) table = JoinPath(db, name);
  }
  ASSERT_FALSE(table.empty());
  std::string bytes = *ReadFileToString(table);
  bytes[bytes.size() / 2] ^= 0x01;
  const int fd = ::open(table.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(1));
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(flushed.status().message(), HasSubstr(table));
  // Node a's copy is in place but unlisted; b's is not there at all.
  EXPECT_THAT(SharedEpochs(), ElementsAre());
  EXPECT_THAT(SharedFiles(), ElementsAre("MANIFEST.jobgraph", "a.1"));
}

TEST_F(FlushTest, AnEpochNotCommittedLocallyIsNotFound) {
  SaveLocal(1, 1000);
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(2));
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      flushed.status().message(),
      HasSubstr("epoch 2 is not committed in the local tier " + local_));
}

TEST_F(FlushTest, OneHostsPartOfAnEpochIsRefusedUnlessHostsCopy) {
  SaveLocal(1, 1000);
  // The entry as a host of a job on several hosts commits it: it holds one
  // node's database (the other node's is on another host).
  EpochCommit commit;
  commit.epoch = 1;
  commit.nodes = kNodes;
  commit.total_bytes = 8000;
  commit.committed_unix_micros = 1000;
  commit.held_nodes = {kNodes[0]};
  commit.host = "h1";
  ASSERT_TRUE(CommitEpoch(local_, "leveldb", commit).ok());
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(1));
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(flushed.status().message(),
            "epoch 1 in " + local_ + " holds the databases of node(s) '" +
                kNodes[0] +
                "' only (host h1's part of a job on several hosts); the job "
                "flushes it when it runs on its hosts again");
  EXPECT_FALSE(PathExists(shared_).value());
  // The hosts copy their own nodes; then the entry is what is committed.
  FlushRequest request = Request(1);
  request.copied_by_hosts = true;
  absl::StatusOr<FlushBegun> begun = BeginFlush(request);
  ASSERT_TRUE(begun.ok()) << begun.status();
  EXPECT_FALSE(begun->already_there);
  ASSERT_TRUE(CopyFlushedNodes(request, kNodes).ok());
  ASSERT_TRUE(CommitFlush(request, *begun).ok());
  absl::StatusOr<CommitLog> log = ReadCommitLog(shared_);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->epoch_size(), 1);
  EXPECT_EQ(log->epoch(0).held_node_size(), 0);
  EXPECT_EQ(log->epoch(0).host(), "");
  EXPECT_EQ(log->epoch(0).committed_unix_micros(), 1000);
}

TEST_F(FlushTest, ACrashBeforeTheCommitListsNothingAndARetryFlushes) {
  SaveLocal(1, 1000);
  ASSERT_TRUE(
      Failpoints::Enable("flush.before_commit", FailpointAction::kError).ok());
  absl::StatusOr<FlushResult> flushed = FlushEpoch(Request(1));
  Failpoints::DisableAll();
  EXPECT_EQ(flushed.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(SharedEpochs(), ElementsAre());
  flushed = FlushEpoch(Request(1));
  ASSERT_TRUE(flushed.ok()) << flushed.status();
  EXPECT_FALSE(flushed->already_there);
  EXPECT_THAT(SharedEpochs(), ElementsAre(1));
  EXPECT_TRUE(VerifyCommittedEpoch(shared_, "leveldb", kNodes, 1).ok());
}

TEST_F(FlushTest, RetentionAppliesToTheSharedDirectory) {
  FlushRequest request = Request(0);
  request.retention.keep_last = 1;
  for (int64_t epoch : {1, 2}) {
    SaveLocal(epoch, epoch * 1000);
    request.epoch = epoch;
    ASSERT_TRUE(FlushEpoch(request).ok());
  }
  EXPECT_THAT(SharedEpochs(), ElementsAre(2));
  EXPECT_FALSE(*PathExists(CheckpointDbPath(shared_, "a", 1)));
  EXPECT_TRUE(*PathExists(CheckpointDbPath(shared_, "a", 2)));
}

TEST_F(FlushTest, FlusherFlushesAskedEpochsAndTheNewestAtTheEnd) {
  Flusher flusher(Request(0));
  EXPECT_THAT(flusher.Pinned(), ElementsAre());
  SaveLocal(0, 100);
  flusher.Committed(0, /*flush=*/true);
  ASSERT_TRUE(flusher.Drain().ok());
  EXPECT_THAT(SharedEpochs(), ElementsAre(0));
  EXPECT_THAT(flusher.Pinned(), ElementsAre(0));  // the newest flushed
  SaveLocal(1, 200);
  flusher.Committed(1, /*flush=*/false);
  ASSERT_TRUE(flusher.Drain().ok());
  EXPECT_THAT(SharedEpochs(), ElementsAre(0));
  flusher.FlushNewest();
  ASSERT_TRUE(flusher.Drain().ok());
  EXPECT_THAT(SharedEpochs(), ElementsAre(0, 1));
  const Flusher::Stats stats = flusher.stats();
  EXPECT_EQ(stats.epochs_flushed, 2);
  EXPECT_EQ(stats.newest_flushed, 1);
  // Nothing new: FlushNewest has nothing to do.
  flusher.FlushNewest();
  ASSERT_TRUE(flusher.Drain().ok());
  EXPECT_EQ(flusher.stats().epochs_flushed, 2);
}

// While a save holds the request's pause gate, the flush stops before the
// first chunk of its copy; it commits once the gate opens, and counts the
// wait.
TEST_F(FlushTest, FlusherGivesWayToASaveThatHoldsTheGate) {
  PauseGate gate;
  FlushRequest request = Request(0);
  request.pause = &gate;
  Flusher flusher(request);
  SaveLocal(0, 100);
  // Drain returns when the flush ended, also when it failed before its
  // copy (then nothing stops at the gate).
  absl::Status drained = absl::UnknownError("not drained");
  EXPECT_TRUE(RunStoppedAtGate(
      gate,
      [&] {
        flusher.Committed(0, /*flush=*/true);
        drained = flusher.Drain();
      },
      [&] {
        EXPECT_THAT(SharedEpochs(), ElementsAre());
        EXPECT_THAT(flusher.Pinned(), ElementsAre(0));  // the one copied
        EXPECT_EQ(flusher.stats().epochs_flushed, 0);
      }));
  ASSERT_TRUE(drained.ok()) << drained;
  EXPECT_THAT(SharedEpochs(), ElementsAre(0));
  const Flusher::Stats stats = flusher.stats();
  EXPECT_EQ(stats.epochs_flushed, 1);
  EXPECT_EQ(gate.blocked(), 1);
  // The one wait, as the gate measured it.
  EXPECT_EQ(stats.paused_micros, absl::ToInt64Microseconds(gate.waited()));
}

TEST_F(FlushTest, FlusherReportsAFailureOnceAtDrain) {
  Flusher flusher(Request(0));
  flusher.Committed(5, /*flush=*/true);  // never committed locally
  absl::Status drained = flusher.Drain();
  EXPECT_EQ(drained.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(drained.message(), HasSubstr("cannot flush epoch 5 of " + local_ +
                                           " to " + shared_));
  EXPECT_TRUE(flusher.Drain().ok());
}

}  // namespace
}  // namespace jobgraph

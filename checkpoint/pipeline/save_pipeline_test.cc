#include "checkpoint/pipeline/save_pipeline.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/pipeline/coordinator.h"
#include "checkpoint/pipeline/save_queue.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/pause_gate.h"
#include "checkpoint/util/test_util.h"
#include "engine/operator.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing_util::TempDir;
using ::testing::ElementsAre;

// A coordinator of several processes of which this is the committer and the
// only one that writes: every exchange is recorded, in order, as what it
// carried ("prepare", "w<bytes>", "c", "w<bytes>+c").
class RecordingCoordinator : public Coordinator {
 public:
  explicit RecordingCoordinator(std::vector<std::string>* rounds)
      : rounds_(*rounds) {}
  bool commits() const override { return true; }
  bool spans_processes() const override { return true; }
  bool Hosts(absl::string_view) const override { return true; }
  absl::Status CheckPlacement(const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
  absl::Status Agree(const absl::Status& local) override { return local; }
  absl::StatusOr<int64_t> AgreeWithCommitter(const absl::Status& local,
                                             int64_t value) override {
    rounds_.push_back("prepare");
    if (!local.ok()) return local;
    return value;
  }
  absl::StatusOr<CommitLogRead> ShareCommitLog(
      const std::function<absl::StatusOr<CommitLogRead>()>& read) override {
    return read();
  }
  Settled Settle(const SettleRound& round) override {
    std::string what;
    Settled settled;
    if (round.write.has_value()) {
      what = absl::StrCat("w", round.write->bytes);
      if (round.write->status.ok()) {
        settled.write = WriteTotals{round.write->bytes, round.write->tallies};
      } else {
        settled.write = round.write->status;
      }
    }
    if (round.commit.has_value()) {
      what += what.empty() ? "c" : "+c";
      settled.commit = *round.commit;
    }
    rounds_.push_back(what);
    return settled;
  }
  CommitRound AgreeAndCommit(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals&)>& commit) override {
    rounds_.push_back(absl::StrCat("w", write.bytes, "=c"));
    if (!write.status.ok()) {
      return {write.status, absl::OkStatus(), absl::Now()};
    }
    WriteTotals totals{write.bytes, write.tallies};
    absl::Status committed = commit(totals);
    return {std::move(totals), std::move(committed), absl::Now()};
  }

 private:
  std::vector<std::string>& rounds_;
};

class SavePipelineTest : public ::testing::Test {
 protected:
  // Two nodes, each with a tensor "w".
  void SetUp() override {
    for (const char* node : {"a", "b"}) {
      session_.NodeWorkspace(node)->SetTensor("w", Tensor::Scalar<int64_t>(1));
    }
    options_.directory = dir_.path();
  }

  std::unique_ptr<SavePipeline> NewPipeline(
      std::unique_ptr<Coordinator> coordinator, SaveQueue* queue) {
    return std::make_unique<SavePipeline>(
        options_, std::vector<PipelineNode>{{"a", "a"}, {"b", "b"}},
        std::move(coordinator), queue);
  }

  absl::StatusOr<CheckpointStats> SaveEpoch(SavePipeline& pipeline,
                                            int64_t epoch) {
    return pipeline.Save(&session_, {.kind = SaveKind::kEpoch, .epoch = epoch},
                         {{"w"}, {"w"}});
  }

  void SetW(int64_t value) {
    for (const char* node : {"a", "b"}) {
      *session_.NodeWorkspace(node)
           ->GetBlob("w")
           ->GetMutable<Tensor>()
           ->mutable_data<int64_t>() = value;
    }
  }

  // The epochs the commit log lists.
  std::string Listed() {
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
    return log.ok() ? CommittedEpochList(*log) : log.status().ToString();
  }

  TempDir dir_;
  LocalSession session_;
  CheckpointOptions options_;
};

TEST_F(SavePipelineTest, AnInlineSaveEndsCommittedBeforeSaveReturns) {
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  ASSERT_TRUE(pipeline->LockNodes().ok());
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    absl::StatusOr<CheckpointStats> saved = SaveEpoch(*pipeline, epoch);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_FALSE(saved->in_background);
    EXPECT_EQ(saved->epoch, epoch);
    EXPECT_EQ(saved->num_dbs, 2);
    EXPECT_GT(saved->bytes, 0);
    EXPECT_EQ(Listed(), epoch == 0 ? "0" : epoch == 1 ? "0, 1" : "0, 1, 2");
  }
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 3u);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(outcomes[epoch].epoch, epoch);
    EXPECT_EQ(outcomes[epoch].kind, SaveKind::kEpoch);
    EXPECT_FALSE(outcomes[epoch].in_background);
    ASSERT_TRUE(outcomes[epoch].stats.ok());
  }
  EXPECT_TRUE(pipeline->TakeFinished().empty());
}

// A background save freezes the blobs when Save returns: a write to them
// afterwards is not in the database.
TEST_F(SavePipelineTest, ABackgroundSaveWritesTheBlobsAsTheyWereAtSave) {
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  SetW(7);
  absl::StatusOr<CheckpointStats> saved = SaveEpoch(*pipeline, 0);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_TRUE(saved->in_background);
  EXPECT_EQ(saved->bytes, 0);
  SetW(8);
  pipeline->Drain();
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].in_background);
  ASSERT_TRUE(outcomes[0].stats.ok()) << outcomes[0].stats.status();
  EXPECT_EQ(Listed(), "0");
  // The database holds 7: the same bytes as a database saved from 7.
  absl::StatusOr<BlobIndex> index =
      ReadBlobIndexAt("leveldb", CheckpointDbPath(dir_.path(), "a", 0));
  ASSERT_TRUE(index.ok()) << index.status();
  pipeline.reset();  // releases the nodes' locks
  std::unique_ptr<SaveQueue> inline_queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> check =
      NewPipeline(NewLocalCoordinator(), inline_queue.get());
  SetW(7);
  ASSERT_TRUE(SaveEpoch(*check, 1).ok());
  absl::StatusOr<BlobIndex> seven =
      ReadBlobIndexAt("leveldb", CheckpointDbPath(dir_.path(), "a", 1));
  ASSERT_TRUE(seven.ok()) << seven.status();
  ASSERT_EQ(index->blob_size(), 1);
  EXPECT_EQ(index->blob(0).value_crc32c(0), seven->blob(0).value_crc32c(0));
  SetW(8);
  ASSERT_TRUE(SaveEpoch(*check, 2).ok());
  absl::StatusOr<BlobIndex> eight =
      ReadBlobIndexAt("leveldb", CheckpointDbPath(dir_.path(), "a", 2));
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_NE(index->blob(0).value_crc32c(0), eight->blob(0).value_crc32c(0));
}

// A failed write is its save's outcome; nothing of it is committed, and the
// next save goes on.
TEST_F(SavePipelineTest, AFailedWriteCommitsNothing) {
  for (bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "inline");
    TempDir dir;
    options_.directory = dir.path();
    std::unique_ptr<SaveQueue> queue =
        background ? NewBackgroundSaveQueue() : NewInlineSaveQueue();
    std::unique_ptr<SavePipeline> pipeline =
        NewPipeline(NewLocalCoordinator(), queue.get());
    ASSERT_TRUE(SaveEpoch(*pipeline, 0).ok());
    pipeline->Drain();
    ASSERT_TRUE(
        Failpoints::Enable("save.after_db_write", FailpointAction::kError)
            .ok());
    absl::StatusOr<CheckpointStats> failed = SaveEpoch(*pipeline, 1);
    pipeline->Drain();
    Failpoints::DisableAll();
    if (!background) {
      EXPECT_EQ(failed.status().code(), absl::StatusCode::kAborted);
    }
    ASSERT_TRUE(SaveEpoch(*pipeline, 2).ok());
    pipeline->Drain();
    std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
    ASSERT_EQ(outcomes.size(), 3u);
    EXPECT_TRUE(outcomes[0].stats.ok());
    EXPECT_EQ(outcomes[1].epoch, 1);
    EXPECT_EQ(outcomes[1].stats.status().code(), absl::StatusCode::kAborted);
    EXPECT_THAT(std::string(outcomes[1].stats.status().message()),
                ::testing::HasSubstr("node 'a': saving checkpoint"));
    EXPECT_TRUE(outcomes[2].stats.ok());
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
    ASSERT_TRUE(log.ok());
    EXPECT_EQ(CommittedEpochList(*log), "0, 2");
  }
}

// Across processes a background save's exchanges wait for the next call
// from the job's thread, and each boundary settles the newest write and
// the commit before it in one round.
TEST_F(SavePipelineTest, BackgroundExchangesTakeOneRoundPerBoundary) {
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    absl::StatusOr<CheckpointStats> saved = SaveEpoch(*pipeline, epoch);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_TRUE(saved->in_background);
  }
  pipeline->Drain();
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 3u);
  const std::string w = rounds.size() > 1 ? rounds[1] : "";
  // The first save of a run agrees on what the log lists; then one round
  // per boundary, and the last two at the drain.
  EXPECT_THAT(rounds, ElementsAre("prepare", w, w + "+c", w + "+c", "c"));
  EXPECT_EQ(w, absl::StrCat("w", outcomes[0].stats->bytes));
  EXPECT_EQ(Listed(), "1, 2, 3");
}

// A save of an epoch whose commit is still in flight takes its entry out
// of the log first (after that commit), as every save of an epoch the log
// may list does.
TEST_F(SavePipelineTest, ResavingAnEpochWhoseCommitIsInFlightForgetsItFirst) {
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  for (int64_t epoch : {1, 2, 2}) {
    ASSERT_TRUE(SaveEpoch(*pipeline, epoch).ok()) << epoch;
  }
  pipeline->Drain();
  ASSERT_EQ(pipeline->TakeFinished().size(), 3u);
  const std::string w = rounds.size() > 1 ? rounds[1] : "";
  EXPECT_THAT(rounds,
              ElementsAre("prepare", w, w + "+c", "c", "prepare", w, "c"));
  EXPECT_EQ(Listed(), "1, 2");
}

// CommitHooks::after_write runs after each save's write in the thread that
// wrote it, also after a failure before the write (the other processes'
// hooks, collective, wait for this one's), and its failure fails the save
// before anything is committed.
TEST_F(SavePipelineTest, AfterWriteRunsInTheWritersThreadAndCanFailTheSave) {
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  std::mutex mu;
  std::vector<std::string> calls;
  const std::thread::id job = std::this_thread::get_id();
  SavePipeline::CommitHooks hooks;
  hooks.after_write = [&](const SaveRecord& record,
                          const absl::Status& written) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(absl::StrCat(
        record.epoch, written.ok() ? " ok" : " failed",
        std::this_thread::get_id() == job ? " job" : " queue",
        ::access(CheckpointDbPath(dir_.path(), "a", record.epoch).c_str(),
                 F_OK) == 0
            ? " written"
            : ""));
    return record.epoch == 2 ? absl::UnavailableError("partner gone")
                             : absl::OkStatus();
  };
  pipeline->SetCommitHooks(std::move(hooks));
  ASSERT_TRUE(SaveEpoch(*pipeline, 1).ok());
  ASSERT_TRUE(SaveEpoch(*pipeline, 2).ok());  // fails in the background
  // Node b's snapshot fails on this process only, before any write: its
  // outcome, as every background save's across processes, comes later.
  ASSERT_TRUE(session_.NodeWorkspace("b")->RemoveBlob("w"));
  EXPECT_TRUE(SaveEpoch(*pipeline, 3).ok());
  pipeline->Drain();
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[0].stats.ok()) << outcomes[0].stats.status();
  EXPECT_EQ(outcomes[1].stats.status(), absl::UnavailableError("partner gone"));
  EXPECT_EQ(outcomes[2].stats.status().code(),
            absl::StatusCode::kFailedPrecondition)
      << outcomes[2].stats.status();
  EXPECT_THAT(calls, ElementsAre("1 ok queue written", "2 ok queue written",
                                 "3 failed queue"));
  EXPECT_EQ(Listed(), "1");
}

// The write pause is held while the databases are written (the failpoint
// after a database's write is inside), and not before the write (after the
// snapshot) nor in after_write, which may wait for copies on other hosts.
TEST_F(SavePipelineTest, TheWriteOfTheDatabasesHoldsTheWritePause) {
  PauseGate gate;
  std::vector<bool> held_after_write;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  SavePipeline::CommitHooks hooks;
  hooks.write_pause = &gate;
  hooks.after_write = [&](const SaveRecord&, const absl::Status&) {
    held_after_write.push_back(gate.held());
    return absl::OkStatus();
  };
  pipeline->SetCommitHooks(std::move(hooks));
  // A failed assertion below must not leave a save held at a failpoint:
  // the pipeline's destructor would wait for it.
  absl::Cleanup release = [] { Failpoints::DisableAll(); };
  constexpr absl::Duration kHoldTimeout = absl::Minutes(5);
  for (const char* failpoint : {"save.after_snapshot", "save.after_db_write"}) {
    SCOPED_TRACE(failpoint);
    ASSERT_TRUE(Failpoints::Enable(failpoint, FailpointAction::kHold).ok());
    ASSERT_TRUE(SaveEpoch(*pipeline, 1).ok());
    ASSERT_TRUE(Failpoints::WaitForHold(failpoint, kHoldTimeout));
    EXPECT_EQ(gate.held(),
              absl::string_view(failpoint) == "save.after_db_write");
    ASSERT_TRUE(Failpoints::Release(failpoint).ok());
    pipeline->Drain();
    EXPECT_FALSE(gate.held());
  }
  EXPECT_THAT(held_after_write, ElementsAre(false, false));
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[0].stats.ok()) << outcomes[0].stats.status();
  EXPECT_TRUE(outcomes[1].stats.ok()) << outcomes[1].stats.status();
}

// The same across processes with an inline queue: a save agrees on its
// write, commits and shares the commit in one exchange before Save
// returns.
TEST_F(SavePipelineTest, InlineExchangesSettleEachSaveInItsCall) {
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    absl::StatusOr<CheckpointStats> saved = SaveEpoch(*pipeline, epoch);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_FALSE(saved->in_background);
  }
  const std::string w = rounds.size() > 1 ? rounds[1] : "";
  EXPECT_THAT(rounds, ElementsAre("prepare", w, w));
  EXPECT_THAT(w, ::testing::MatchesRegex("w[1-9][0-9]*=c"));
  EXPECT_EQ(Listed(), "1, 2");
}

// The mark after the last epoch is a save that writes no database and
// whose commit marks the epoch's entry.
TEST_F(SavePipelineTest, TheMarkAfterTheLastEpochIsASaveOfItsOwn) {
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  ASSERT_TRUE(SaveEpoch(*pipeline, 3).ok());
  Preemption mark;
  mark.set_group(JOB_GROUP_DOWNLOAD);
  mark.set_signal("SIGTERM");
  absl::StatusOr<CheckpointStats> marked = pipeline->Save(
      nullptr,
      {.kind = SaveKind::kLoopFinished, .epoch = 3, .preemption = mark}, {},
      /*wait=*/true);
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_FALSE(marked->in_background);
  EXPECT_EQ(marked->num_dbs, 0);
  absl::StatusOr<CheckpointStats> missing = pipeline->Save(
      nullptr,
      {.kind = SaveKind::kLoopFinished, .epoch = 4, .preemption = mark}, {},
      /*wait=*/true);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  std::vector<SaveOutcome> outcomes = pipeline->TakeFinished();
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[1].kind, SaveKind::kLoopFinished);
  EXPECT_EQ(outcomes[2].stats.status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->epoch_size(), 1);
  EXPECT_EQ(log->epoch(0).preemption().group(), JOB_GROUP_DOWNLOAD);
}

// Incremental saves. Node a's and b's "w" change every epoch; "v" never.
class IncrementalSaveTest : public SavePipelineTest {
 protected:
  void SetUp() override {
    SavePipelineTest::SetUp();
    for (const char* node : {"a", "b"}) {
      session_.NodeWorkspace(node)->SetTensor(
          "v", Tensor::FromVector<int64_t>({1, 2, 3}));
    }
    options_.incremental = true;
    options_.full_every = 3;
  }

  absl::StatusOr<CheckpointStats> SaveBoth(SavePipeline& pipeline,
                                           int64_t epoch) {
    SetW(epoch);
    return pipeline.Save(&session_, {.kind = SaveKind::kEpoch, .epoch = epoch},
                         {{"v", "w"}, {"v", "w"}});
  }

  // "v:<epoch that holds it>,w:<...>" of node `node`'s database of `epoch`.
  std::string Holders(const std::string& node, int64_t epoch) {
    absl::StatusOr<BlobIndex> index =
        ReadBlobIndexAt("leveldb", CheckpointDbPath(dir_.path(), node, epoch));
    if (!index.ok()) return index.status().ToString();
    std::vector<std::string> parts;
    for (const CheckpointBlobInfo& b : index->blob()) {
      parts.push_back(
          absl::StrCat(b.name(), ":",
                       b.has_stored_in_epoch() ? b.stored_in_epoch() : epoch));
    }
    return absl::StrJoin(parts, ",");
  }

  // "epoch[referenced epochs]" of every committed epoch.
  std::string References() {
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
    if (!log.ok()) return log.status().ToString();
    std::vector<std::string> parts;
    for (const CommittedEpoch& e : log->epoch()) {
      parts.push_back(absl::StrCat(
          e.epoch(), "[", absl::StrJoin(e.referenced_epoch(), ","), "]"));
    }
    return absl::StrJoin(parts, " ");
  }
};

// An unchanged tensor is listed by reference to the database that holds it
// (never to another reference); a full save comes when the chain would
// reach full_every epochs; the commit log lists what each epoch references.
TEST_F(IncrementalSaveTest, UnchangedTensorsAreReferencedUntilAFullSave) {
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  for (int64_t epoch = 1; epoch <= 5; ++epoch) {
    absl::StatusOr<CheckpointStats> saved = SaveBoth(*pipeline, epoch);
    ASSERT_TRUE(saved.ok()) << saved.status();
  }
  EXPECT_EQ(Holders("a", 1), "v:1,w:1");
  EXPECT_EQ(Holders("a", 2), "v:1,w:2");
  EXPECT_EQ(Holders("b", 3), "v:1,w:3");
  EXPECT_EQ(Holders("a", 4), "v:4,w:4");  // 4 - 1 >= full_every
  EXPECT_EQ(Holders("b", 5), "v:4,w:5");
  EXPECT_EQ(References(), "1[] 2[1] 3[1] 4[] 5[4]");
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->format_version(), 2);
  // Epoch 2 references both nodes' v, as stored in epoch 1.
  absl::StatusOr<BlobIndex> first =
      ReadBlobIndexAt("leveldb", CheckpointDbPath(dir_.path(), "a", 1));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->blob(0).name(), "v");
  ASSERT_EQ(first->blob(0).value_bytes_size(), 1);
  const int64_t v_bytes = first->blob(0).value_bytes(0);
  EXPECT_GT(v_bytes, 3 * 8);
  EXPECT_EQ(log->epoch(1).referenced_bytes(), 2 * v_bytes);
  EXPECT_EQ(log->epoch(1).referenced_bytes(), log->epoch(2).referenced_bytes());
  EXPECT_EQ(log->epoch(3).referenced_bytes(), 0);
  EXPECT_EQ(log->epoch(1).total_bytes(), log->epoch(0).total_bytes());
}

// Written once, a tensor written again (even to the same values) is saved
// again: a write is a change.
TEST_F(IncrementalSaveTest, ATensorWrittenIsSavedAgain) {
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  ASSERT_TRUE(SaveBoth(*pipeline, 1).ok());
  session_.NodeWorkspace("a")
      ->GetBlob("v")
      ->GetMutable<Tensor>()
      ->mutable_data<int64_t>()[0] = 1;  // the same value
  ASSERT_TRUE(SaveBoth(*pipeline, 2).ok());
  EXPECT_EQ(Holders("a", 2), "v:2,w:2");
  EXPECT_EQ(Holders("b", 2), "v:1,w:2");
}

// A save whose write failed is no base: the next one refers to the last
// committed. After a failed commit the next save is full: the commit may
// have put its log in place all the same (AFailedCommitLeavesNoBase), retiring
// what the base refers to.
TEST_F(IncrementalSaveTest, AFailedSaveIsNoBase) {
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  ASSERT_TRUE(SaveBoth(*pipeline, 1).ok());
  ASSERT_TRUE(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError).ok());
  EXPECT_FALSE(SaveBoth(*pipeline, 2).ok());
  Failpoints::DisableAll();
  ASSERT_TRUE(SaveBoth(*pipeline, 3).ok());
  EXPECT_EQ(Holders("a", 3), "v:1,w:3");
  ASSERT_TRUE(
      Failpoints::Enable("commit.before_commit_log", FailpointAction::kError)
          .ok());
  EXPECT_FALSE(SaveBoth(*pipeline, 4).ok());
  Failpoints::DisableAll();
  ASSERT_TRUE(SaveBoth(*pipeline, 5).ok());
  EXPECT_EQ(Holders("a", 5), "v:5,w:5");
  ASSERT_TRUE(SaveBoth(*pipeline, 6).ok());
  EXPECT_EQ(References(), "1[] 3[1] 5[] 6[5]");
}

// Retention keeps what a kept epoch references, so every listed epoch can
// be restored, and deletes the rest.
TEST_F(IncrementalSaveTest, RetentionKeepsWhatAKeptEpochReferences) {
  options_.retention.keep_last = 1;
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    ASSERT_TRUE(SaveBoth(*pipeline, epoch).ok());
  }
  pipeline.reset();
  WaitForBackgroundDeletes();
  EXPECT_EQ(References(), "1[] 3[1]");
  std::vector<std::string> left = ListDir(dir_.path()).value();
  EXPECT_THAT(left, ::testing::ElementsAre("MANIFEST.jobgraph",
                                           "MANIFEST.jobgraph.prev", "a.1",
                                           "a.3", "b.1", "b.3"));
}

// Across processes, with background saves (the base is the last save known
// committed when the next one is snapshotted), every committed epoch's
// entry lists exactly what its databases reference.
TEST_F(IncrementalSaveTest, TheLogListsWhatTheDatabasesReference) {
  for (bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "inline");
    TempDir dir;
    options_.directory = dir.path();
    std::vector<std::string> rounds;
    std::unique_ptr<SaveQueue> queue =
        background ? NewBackgroundSaveQueue() : NewInlineSaveQueue();
    std::unique_ptr<SavePipeline> pipeline = NewPipeline(
        std::make_unique<RecordingCoordinator>(&rounds), queue.get());
    for (int64_t epoch = 1; epoch <= 7; ++epoch) {
      ASSERT_TRUE(SaveBoth(*pipeline, epoch).ok()) << epoch;
    }
    pipeline->Drain();
    for (const SaveOutcome& outcome : pipeline->TakeFinished()) {
      EXPECT_TRUE(outcome.stats.ok()) << outcome.epoch;
    }
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
    ASSERT_TRUE(log.ok());
    ASSERT_EQ(log->epoch_size(), 7);
    int referencing = 0;
    for (const CommittedEpoch& e : log->epoch()) {
      std::set<int64_t> expected;
      int64_t referenced_bytes = 0;
      for (const char* node : {"a", "b"}) {
        absl::StatusOr<BlobIndex> index = ReadBlobIndexAt(
            "leveldb", CheckpointDbPath(dir.path(), node, e.epoch()));
        ASSERT_TRUE(index.ok()) << index.status();
        expected.insert(index->referenced_epoch().begin(),
                        index->referenced_epoch().end());
        referenced_bytes += index->referenced_bytes();
      }
      EXPECT_THAT(e.referenced_epoch(), ::testing::ElementsAreArray(expected))
          << e.epoch();
      EXPECT_EQ(e.referenced_bytes(), referenced_bytes) << e.epoch();
      if (!expected.empty()) ++referencing;
    }
    // Inline, a save refers to the one before it: 2, 3, 5 and 6 do (1, 4
    // and 7 are full). In the background the base is the last save known
    // committed, two epochs back: 3 refers to 1, 4 to 2 (full, being
    // based on nothing known), 7 to 5 (5 and 6 full, their chains too long).
    EXPECT_EQ(referencing, background ? 3 : 4);
  }
}

// With background saves across processes a save is snapshotted before the
// commit of the one before it runs: that commit's retention must keep what
// the snapshotted save refers to. Every epoch left listed verifies, its
// references included, after each boundary.
TEST_F(IncrementalSaveTest, RetentionKeepsWhatASaveInFlightRefersTo) {
  options_.retention.keep_last = 1;
  options_.full_every = 4;
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  auto every_listed_epoch_verifies = [&] {
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
    ASSERT_TRUE(log.ok()) << log.status();
    for (const CommittedEpoch& e : log->epoch()) {
      for (const char* node : {"a", "b"}) {
        absl::StatusOr<CompactBlobIndex> verified = VerifyCheckpointDb(
            "leveldb", CheckpointDbPath(dir_.path(), node, e.epoch()), node,
            e.epoch());
        EXPECT_TRUE(verified.ok()) << verified.status();
      }
    }
  };
  for (int64_t epoch = 1; epoch <= 9; ++epoch) {
    ASSERT_TRUE(SaveBoth(*pipeline, epoch).ok()) << epoch;
    // The commit handed to the queue's thread, and the deletions its
    // retention queued, are done before looking.
    queue->Wait();
    WaitForBackgroundDeletes();
    every_listed_epoch_verifies();
  }
  pipeline->Drain();
  WaitForBackgroundDeletes();
  every_listed_epoch_verifies();
  for (const SaveOutcome& outcome : pipeline->TakeFinished()) {
    EXPECT_TRUE(outcome.stats.ok()) << outcome.epoch;
  }
}

// What Load reads back from node `node`'s database of `epoch`, references
// followed: "t0=<first element>,t1=...", or the error.
std::string Loaded(const std::string& dir, const std::string& node,
                   int64_t epoch) {
  OperatorDef def;
  def.set_type("Load");
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"db", CheckpointDbPath(dir, node, epoch)},
           {"db_type", "leveldb"}}) {
    Argument* arg = def.add_arg();
    arg->set_name(name);
    arg->set_s(value);
  }
  Argument* all = def.add_arg();
  all->set_name("load_all");
  all->set_i(1);
  Workspace ws;
  absl::StatusOr<std::unique_ptr<OperatorBase>> op =
      OperatorRegistry::Global().Create(def, &ws);
  absl::Status status = op.ok() ? (*op)->Run() : op.status();
  if (!status.ok()) return status.ToString();
  std::vector<std::string> parts;
  for (const std::string& name : ws.LocalBlobNames()) {
    const Tensor& t = ws.GetBlob(name)->Get<Tensor>();
    parts.push_back(absl::StrCat(name, "=", t.data<int64_t>()[0]));
  }
  return absl::StrJoin(parts, ",");
}

// A long run: random tensors written each epoch, full saves asked for at
// random, failed saves (inline, where the failing save is known), keep_last
// 3. After every save each epoch the log lists loads exactly the values it
// was saved with (through its references), the newest committed epochs are
// all listed, and (inline, where no save is in flight) no database is left
// that no listed epoch needs, but those of failed saves.
TEST_F(IncrementalSaveTest, RetentionNeverLeavesAnEpochUnrestorable) {
  options_.retention.keep_last = 3;
  options_.full_every = 5;
  const std::vector<std::string> names = {"t0", "t1", "t2", "t3", "t4", "t5"};
  for (bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "inline");
    TempDir dir;
    options_.directory = dir.path();
    LocalSession session;
    for (const char* node : {"a", "b"}) {
      for (size_t t = 0; t < names.size(); ++t) {
        session.NodeWorkspace(node)->SetTensor(
            names[t], Tensor::FromVector<int64_t>({0, int64_t(t)}));
      }
    }
    std::unique_ptr<SaveQueue> queue =
        background ? NewBackgroundSaveQueue() : NewInlineSaveQueue();
    std::vector<std::string> rounds;
    std::unique_ptr<SavePipeline> pipeline = NewPipeline(
        std::make_unique<RecordingCoordinator>(&rounds), queue.get());
    std::mt19937 random(29);
    // What each node's tensors held when each epoch was saved.
    std::map<int64_t, std::map<std::string, std::string>> expected;
    std::vector<int64_t> committed;
    int failures = 0;
    std::set<std::string> failed;
    int referencing = 0;
    for (int64_t epoch = 1; epoch <= 60; ++epoch) {
      for (const char* node : {"a", "b"}) {
        std::vector<std::string> values;
        for (const std::string& name : names) {
          Tensor* t =
              session.NodeWorkspace(node)->GetBlob(name)->GetMutable<Tensor>();
          if (random() % 4 == 0) t->mutable_data<int64_t>()[0] = epoch;
          values.push_back(absl::StrCat(name, "=", t->data<int64_t>()[0]));
        }
        expected[epoch][node] = absl::StrJoin(values, ",");
      }
      const bool fail = !background && random() % 8 == 0;
      if (fail) {
        ASSERT_TRUE(Failpoints::Enable(random() % 2
                                           ? "save.after_db_write"
                                           : "commit.before_commit_log",
                                       FailpointAction::kError)
                        .ok());
      }
      absl::StatusOr<CheckpointStats> saved = pipeline->Save(
          &session,
          {.kind = SaveKind::kEpoch, .epoch = epoch, .full = random() % 9 == 0},
          {names, names});
      Failpoints::DisableAll();
      ASSERT_EQ(saved.ok(), !fail) << epoch << ": " << saved.status();
      failures += fail;
      if (fail) {
        // A failed save's database may be left (unlisted, so never read);
        // a later save of the epoch or `ckpt gc` removes it.
        for (const char* node : {"a", "b"}) {
          failed.insert(absl::StrCat(node, ".", epoch));
        }
      }
      if (!background && saved.ok()) committed.push_back(epoch);
      for (const SaveOutcome& outcome : pipeline->TakeFinished()) {
        ASSERT_EQ(outcome.stats.ok(), !fail || outcome.epoch != epoch)
            << outcome.epoch;
        if (background) committed.push_back(outcome.epoch);
      }
      // Nothing changes the directory while it is looked at: the commit the
      // save handed to the queue's thread (its retention too) is done.
      queue->Wait();
      WaitForBackgroundDeletes();
      absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
      ASSERT_TRUE(log.ok()) << log.status();
      std::set<int64_t> listed;
      // The run holds each node's lock.
      std::set<std::string> needed = {
          "MANIFEST.jobgraph", "MANIFEST.jobgraph.prev", "a.lock", "b.lock"};
      for (const CommittedEpoch& e : log->epoch()) {
        listed.insert(e.epoch());
        referencing += e.referenced_epoch_size() > 0;
        for (const char* node : {"a", "b"}) {
          EXPECT_EQ(Loaded(dir.path(), node, e.epoch()),
                    expected[e.epoch()][node])
              << "epoch " << e.epoch() << " of node " << node
              << ", listed after saving " << epoch;
          needed.insert(absl::StrCat(node, ".", e.epoch()));
        }
      }
      // In the background the log may list a commit whose outcome is not
      // taken yet.
      std::vector<int64_t> known = committed;
      for (int64_t e : listed) {
        if (known.empty() || e > known.back()) known.push_back(e);
      }
      for (size_t k = known.size() >= 3 ? known.size() - 3 : 0;
           k < known.size(); ++k) {
        EXPECT_TRUE(listed.count(known[k])) << known[k];
      }
      if (!background) {
        std::vector<std::string> left = ListDir(dir.path()).value();
        std::set<std::string> unneeded;
        for (const std::string& name : left) {
          if (!needed.count(name) && !failed.count(name)) unneeded.insert(name);
          needed.erase(name);
        }
        EXPECT_THAT(needed, ::testing::IsEmpty()) << "after saving " << epoch;
        EXPECT_THAT(unneeded, ::testing::IsEmpty()) << "after saving " << epoch;
      }
      if (HasFailure()) return;
    }
    pipeline->Drain();
    for (const SaveOutcome& outcome : pipeline->TakeFinished()) {
      EXPECT_TRUE(outcome.stats.ok()) << outcome.epoch;
    }
    // The run did what it is meant to exercise.
    EXPECT_GT(referencing, 60);
    if (!background) {
      EXPECT_GT(failures, 3);
    }
  }
}

// Every listed epoch of `dir` verifies for nodes a and b, references
// followed: "" or the first failure.
std::string FirstUnloadableEpoch(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (!log.ok()) return log.status().ToString();
  for (const CommittedEpoch& e : log->epoch()) {
    for (const char* node : {"a", "b"}) {
      absl::StatusOr<CompactBlobIndex> verified = VerifyCheckpointDb(
          "leveldb", CheckpointDbPath(dir, node, e.epoch()), node, e.epoch());
      if (!verified.ok()) {
        return absl::StrCat("epoch ", e.epoch(), ": ",
                            verified.status().ToString());
      }
    }
  }
  return "";
}

// A commit can fail after its new log is in place (commit.after_commit_log:
// the directory's fsync failed after the rename). That log already left out
// the epochs its retention retired, and DeleteIfUnlisted deletes their
// databases, which the base before the failed save may refer to: after a
// failed commit the next save is full, never a reference to a deleted
// database.
TEST_F(IncrementalSaveTest, AFailedCommitLeavesNoBase) {
  options_.retention.keep_last = 1;
  options_.full_every = 10;
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  ASSERT_TRUE(SaveBoth(*pipeline, 1).ok());
  ASSERT_TRUE(SaveBoth(*pipeline, 2).ok());  // v by reference to 1
  ASSERT_TRUE(
      Failpoints::Enable("commit.after_commit_log", FailpointAction::kError)
          .ok());
  SetW(3);
  // Full (as the last save of an uploading job is): it references nothing,
  // so keep_last=1 retires 1 and 2 in the log it puts in place.
  EXPECT_FALSE(pipeline
                   ->Save(&session_,
                          {.kind = SaveKind::kEpoch, .epoch = 3, .full = true},
                          {{"v", "w"}, {"v", "w"}})
                   .ok());
  Failpoints::DisableAll();
  ASSERT_TRUE(SaveBoth(*pipeline, 4).ok());
  pipeline.reset();
  WaitForBackgroundDeletes();
  EXPECT_EQ(FirstUnloadableEpoch(dir_.path()), "") << References();
}

// Records how many tallies each write report carries.
class TallyCountingCoordinator : public RecordingCoordinator {
 public:
  TallyCountingCoordinator(std::vector<std::string>* rounds,
                           std::vector<size_t>* lengths)
      : RecordingCoordinator(rounds), lengths_(*lengths) {}
  Settled Settle(const SettleRound& round) override {
    if (round.write.has_value())
      lengths_.push_back(round.write->tallies.size());
    return RecordingCoordinator::Settle(round);
  }
  CommitRound AgreeAndCommit(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals&)>& commit) override {
    lengths_.push_back(write.tallies.size());
    return RecordingCoordinator::AgreeAndCommit(write, commit);
  }

 private:
  std::vector<size_t>& lengths_;
};

// WriteReport::tallies have the same length on every process (they are
// summed by MPI_Allreduce / MPI_Reduce), also that of a process whose save
// failed before its write (a snapshot, the directory or a node lock
// failing on that rank only).
TEST_F(IncrementalSaveTest, AFailureBeforeTheWriteReportsAsManyTallies) {
  std::vector<std::string> rounds;
  std::vector<size_t> lengths;
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<TallyCountingCoordinator>(&rounds, &lengths),
                  queue.get());
  ASSERT_TRUE(SaveBoth(*pipeline, 1).ok());
  // On this process only, node b's snapshot fails before anything is written.
  ASSERT_TRUE(session_.NodeWorkspace("b")->RemoveBlob("v"));
  EXPECT_FALSE(SaveBoth(*pipeline, 2).ok());
  ASSERT_EQ(lengths.size(), 2u);
  EXPECT_EQ(lengths[1], lengths[0]);
}

// The value every element of tensor "t<i>" of node a holds when written in
// `epoch`: a distinctive pattern, to find on disk.
int64_t PatternOf(int i, int64_t epoch) {
  return static_cast<int64_t>(0x5AC3A55AC3A50000ULL | (i << 8) | epoch);
}

// Loads every blob of node `node`'s database of `epoch` into `ws` with
// `threads` reading threads (Load's argument).
absl::Status LoadAllInto(const std::string& dir, const std::string& node,
                         int64_t epoch, int threads, Workspace* ws) {
  OperatorDef def;
  def.set_type("Load");
  Argument* db = def.add_arg();
  db->set_name("db");
  db->set_s(CheckpointDbPath(dir, node, epoch));
  Argument* db_type = def.add_arg();
  db_type->set_name("db_type");
  db_type->set_s("leveldb");
  Argument* all = def.add_arg();
  all->set_name("load_all");
  all->set_i(1);
  Argument* threads_arg = def.add_arg();
  threads_arg->set_name("threads");
  threads_arg->set_i(threads);
  absl::StatusOr<std::unique_ptr<OperatorBase>> op =
      OperatorRegistry::Global().Create(def, ws);
  return op.ok() ? (*op)->Run() : op.status();
}

// Flips one bit of the first value of tensor "t<i>" as written in `epoch`,
// in node a's database of that epoch.
void DamageValue(const std::string& dir, int i, int64_t epoch) {
  std::string pattern;
  const int64_t value = PatternOf(i, epoch);
  for (int k = 0; k < 8; ++k) {
    pattern.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  const std::string db = CheckpointDbPath(dir, "a", epoch);
  absl::StatusOr<std::vector<std::string>> files = ListDir(db);
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string& name : *files) {
    const std::string path = JoinPath(db, name);
    absl::StatusOr<std::string> contents = ReadFileToString(path);
    ASSERT_TRUE(contents.ok()) << contents.status();
    const size_t at = contents->find(pattern);
    if (at == std::string::npos) continue;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + 100));
    f.put(static_cast<char>((*contents)[at + 100] ^ 0x10));
    ASSERT_TRUE(f.good()) << path;
    return;
  }
  FAIL() << "no file of " << db << " holds t" << i << " of epoch " << epoch;
}

// A restore reads the database and those it references with one set of
// threads. Epoch 4 of node a holds t6 and refers to epoch 1 for t0, t1 and
// t7, to 2 for t2 and t3, to 3 for t4 and t5: whatever the number of
// threads, the tensors are exactly those saved, and damage in two of the
// referenced databases is the error that one reader, reading the databases
// in order, meets first.
TEST_F(IncrementalSaveTest, ThreadsReadTheReferencedDatabasesLikeOneReader) {
  options_.full_every = 10;
  Workspace* a = session_.NodeWorkspace("a");
  std::vector<std::string> a_blobs = {"v", "w"};
  auto write = [&](int i, int64_t epoch) {
    Tensor t(INT64, {4096});
    for (int64_t j = 0; j < t.numel(); ++j) {
      t.mutable_data<int64_t>()[j] = PatternOf(i, epoch);
    }
    a->SetTensor(absl::StrCat("t", i), std::move(t));
  };
  for (int i = 0; i < 8; ++i) {
    write(i, 1);
    a_blobs.push_back(absl::StrCat("t", i));
  }
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  const std::map<int64_t, std::vector<int>> written = {
      {1, {}}, {2, {2, 3}}, {3, {4, 5}}, {4, {6}}};
  for (const auto& [epoch, tensors] : written) {
    for (int i : tensors) write(i, epoch);
    SetW(epoch);
    absl::StatusOr<CheckpointStats> saved =
        pipeline->Save(&session_, {.kind = SaveKind::kEpoch, .epoch = epoch},
                       {a_blobs, {"v", "w"}});
    ASSERT_TRUE(saved.ok()) << saved.status();
  }
  EXPECT_EQ(Holders("a", 4), "t0:1,t1:1,t2:2,t3:2,t4:3,t5:3,t6:4,t7:1,v:1,w:4");
  const std::vector<int64_t> holder_of = {1, 1, 2, 2, 3, 3, 4, 1};
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    ASSERT_TRUE(LoadAllInto(dir_.path(), "a", 4, threads, &loaded).ok());
    for (int i = 0; i < 8; ++i) {
      const std::string name = absl::StrCat("t", i);
      EXPECT_TRUE(a->GetTensor(name).value()->BitwiseEquals(
          *loaded.GetTensor(name).value()))
          << name;
      EXPECT_EQ(loaded.GetTensor(name).value()->data<int64_t>()[4095],
                PatternOf(i, holder_of[i]))
          << name;
    }
    EXPECT_EQ(loaded.GetTensor("w").value()->scalar<int64_t>(), 4);
  }
  DamageValue(dir_.path(), 5, 3);
  DamageValue(dir_.path(), 3, 2);
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    absl::Status status = LoadAllInto(dir_.path(), "a", 4, threads, &loaded);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(status.message(),
              absl::StrCat("op Load( -> ): checkpoint ",
                           CheckpointDbPath(dir_.path(), "a", 2),
                           ": value of key 't3#%0' (blob 't3') fails its "
                           "CRC-32C check; the database is damaged"));
  }
}

// A chain longer than the Load op's batch of open databases (16): epoch 21
// of node a refers to 20 epochs (t<k> last written in epoch k + 2, v in 1),
// read in two batches; the values are exact, and damage in the first batch
// and in the second is the first batch's error.
TEST_F(IncrementalSaveTest, ALoadReadsAChainLongerThanABatchOfOpenDatabases) {
  options_.full_every = 40;
  Workspace* a = session_.NodeWorkspace("a");
  std::vector<std::string> a_blobs = {"v", "w"};
  auto write = [&](int i, int64_t epoch) {
    Tensor t(INT64, {512});
    for (int64_t j = 0; j < t.numel(); ++j) {
      t.mutable_data<int64_t>()[j] = PatternOf(i, epoch);
    }
    a->SetTensor(absl::StrCat("t", i), std::move(t));
  };
  for (int i = 0; i < 20; ++i) {
    write(i, 1);
    a_blobs.push_back(absl::StrCat("t", i));
  }
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(NewLocalCoordinator(), queue.get());
  for (int64_t epoch = 1; epoch <= 21; ++epoch) {
    if (epoch >= 2) write(static_cast<int>(epoch - 2), epoch);
    SetW(epoch);
    absl::StatusOr<CheckpointStats> saved =
        pipeline->Save(&session_, {.kind = SaveKind::kEpoch, .epoch = epoch},
                       {a_blobs, {"v", "w"}});
    ASSERT_TRUE(saved.ok()) << saved.status();
  }
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->epoch_size(), 21);
  EXPECT_EQ(log->epoch(20).referenced_epoch_size(), 20);
  for (int threads : {1, 4}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    ASSERT_TRUE(LoadAllInto(dir_.path(), "a", 21, threads, &loaded).ok());
    for (int i = 0; i < 20; ++i) {
      const std::string name = absl::StrCat("t", i);
      EXPECT_EQ(loaded.GetTensor(name).value()->data<int64_t>()[511],
                PatternOf(i, i + 2))
          << name;
    }
    EXPECT_EQ(loaded.GetTensor("v").value()->data<int64_t>()[2], 3);
  }
  DamageValue(dir_.path(), 18, 20);  // second batch
  DamageValue(dir_.path(), 3, 5);    // first batch
  for (int threads : {1, 4}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    absl::Status status = LoadAllInto(dir_.path(), "a", 21, threads, &loaded);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(status.message(),
              absl::StrCat("op Load( -> ): checkpoint ",
                           CheckpointDbPath(dir_.path(), "a", 5),
                           ": value of key 't3#%0' (blob 't3') fails its "
                           "CRC-32C check; the database is damaged"));
  }
}

// With background saves across processes a save refers to the last save
// known committed, two epochs back, which the newest listed epoch need not
// reference. Retention applied from outside the job while it runs (`ckpt
// gc --keep_last=1` applies this rule, under the log's lock) keeps the
// newest epoch and what the log says it references, so it deletes the base
// of the save in flight: that save's commit is refused (it would list an
// epoch that cannot be restored).
TEST_F(IncrementalSaveTest, RetentionFromOutsideKeepsTheBaseOfASaveInFlight) {
  options_.full_every = 10;
  std::vector<std::string> rounds;
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  std::unique_ptr<SavePipeline> pipeline =
      NewPipeline(std::make_unique<RecordingCoordinator>(&rounds), queue.get());
  ASSERT_TRUE(SaveBoth(*pipeline, 1).ok());
  ASSERT_TRUE(SaveBoth(*pipeline, 2).ok());  // full: nothing known committed
  ASSERT_TRUE(SaveBoth(*pipeline, 3).ok());  // refers to 1
  queue->Wait();                             // 2 is committed
  ASSERT_EQ(References(), "1[] 2[]");
  RetentionOptions gc;
  gc.keep_last = 1;
  ASSERT_TRUE(ApplyRetention(dir_.path(), gc, /*nodes=*/{},
                             /*background=*/false)
                  .ok());
  ASSERT_TRUE(SaveBoth(*pipeline, 4).ok());
  pipeline->Drain();
  std::vector<std::string> outcomes;
  for (const SaveOutcome& outcome : pipeline->TakeFinished()) {
    outcomes.push_back(absl::StrCat(
        outcome.epoch, ":",
        outcome.stats.ok() ? "ok" : outcome.stats.status().ToString()));
  }
  EXPECT_THAT(
      outcomes,
      ElementsAre("1:ok", "2:ok",
                  absl::StrCat("3:FAILED_PRECONDITION: epoch 3 refers to the "
                               "databases of epoch 1, which the commit log of ",
                               dir_.path(),
                               " no longer lists (did `ckpt gc` run while the "
                               "job ran?); epoch 3 is not committed"),
                  "4:ok"));
  // 4 was snapshotted before 3's outcome was known: it refers to 2.
  EXPECT_EQ(References(), "2[] 4[2]");
  EXPECT_EQ(FirstUnloadableEpoch(dir_.path()), "");
}

}  // namespace
}  // namespace jobgraph

// The Caffe2 checkpoint_test, ported: the same pipeline (values 0..9 read
// three at a time into a total that starts at 100) must give the same epochs
// and totals, through every resume, with both checkpoint managers.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/upload.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "engine/ops/function_op.h"
#include "engine/session.h"
#include "engine/storage_pool.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::NewTempDir;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;

constexpr int64_t kExpectedTotals[] = {103, 115, 136, 145};

// Caffe2's run_with: a full run, then a resume from every epoch, each in a
// fresh session with a fresh manager; then load(e) of every epoch.
template <typename MakeManager>
void RunWith(MakeManager make_manager) {
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  {
    LocalSession session;
    auto manager = make_manager();
    JobRunner runner(job, manager.get());
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, 4);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
    EXPECT_EQ(runner.stats().save_failures, 0);
    ASSERT_EQ(runner.stats().epochs.size(), 5u);
    // Every save reports the bytes it wrote, and the commit log records them:
    // the four blobs of this pipeline take 291 bytes. A background save's
    // bytes are in its outcome (the epoch's record says what its boundary
    // cost).
    for (const EpochStats& e : runner.stats().epochs) {
      EXPECT_TRUE(e.saved) << "epoch " << e.epoch;
      if (!e.save_in_background) {
        EXPECT_EQ(e.save_bytes, 291) << "epoch " << e.epoch;
      }
    }
    ASSERT_EQ(runner.stats().saves.size(), 5u);
    for (const SaveOutcome& outcome : runner.stats().saves) {
      ASSERT_TRUE(outcome.stats.ok()) << "epoch " << outcome.epoch;
      EXPECT_EQ(outcome.stats->bytes, 291) << "epoch " << outcome.epoch;
    }
  }
  std::unique_ptr<LocalSession> session;
  std::unique_ptr<Checkpointer> manager;
  for (int64_t resume = 1; resume <= 4; ++resume) {
    session = std::make_unique<LocalSession>();
    manager = make_manager();
    JobRunner runner(job, manager.get(),
                     {.resume_from = ResumeFrom::Epoch(resume)});
    absl::StatusOr<int64_t> epochs = runner.Train(*session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, resume < 4 ? 4 : 5) << "resumed from " << resume;
    EXPECT_EQ(testing::Caffe2Total(*session), 145) << "resumed from " << resume;
    EXPECT_EQ(runner.stats().resumed_from, resume);
  }
  // Each epoch's checkpoint holds that epoch's state.
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    absl::StatusOr<CheckpointStats> load = manager->Restore(*session, epoch);
    ASSERT_TRUE(load.ok()) << load.status();
    EXPECT_EQ(load->bytes, 291);
    EXPECT_EQ(testing::Caffe2Total(*session), kExpectedTotals[epoch - 1])
        << "epoch " << epoch;
  }
}

TEST(CheckpointTest, SingleCheckpointManager) {
  const std::string dir = NewTempDir("single");
  RunWith([&] {
    return std::make_unique<CheckpointManager>(
        CheckpointOptions{.directory = dir, .node_name = "temp_node"});
  });
  absl::StatusOr<std::vector<std::string>> files = ListDir(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                                  "temp_node.0", "temp_node.1", "temp_node.2",
                                  "temp_node.3", "temp_node.4", "temp_node.5"));
}

TEST(CheckpointTest, MultiNodeCheckpointManager) {
  const std::string dir = NewTempDir("multi");
  RunWith([&] {
    return std::make_unique<MultiNodeCheckpointManager>(
        CheckpointOptions{.directory = dir});
  });
  absl::StatusOr<std::vector<std::string>> files = ListDir(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                                  "trainer_0.0", "trainer_0.1", "trainer_0.2",
                                  "trainer_0.3", "trainer_0.4", "trainer_0.5"));
}

// Caffe2's run_with again with incremental saves (sum_pipeline's "val"
// never changes after init, so later epochs refer to epoch 0's database),
// synchronous and in the background, with a full save every 2 and every
// 10 epochs: every resume and every load is exact.
TEST(CheckpointTest, IncrementalCheckpointsResumeAndLoadExactly) {
  for (bool async : {false, true}) {
    for (int full_every : {2, 10}) {
      SCOPED_TRACE(
          absl::StrCat(async ? "async" : "sync", " full_every ", full_every));
      const std::string dir =
          NewTempDir(absl::StrCat("incremental", async, full_every));
      RunWith([&] {
        return std::make_unique<MultiNodeCheckpointManager>(
            CheckpointOptions{.directory = dir,
                              .async = async,
                              .incremental = true,
                              .full_every = full_every});
      });
      absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
      ASSERT_TRUE(log.ok());
      std::vector<std::string> references;
      for (const CommittedEpoch& e : log->epoch()) {
        references.push_back(absl::StrCat(
            e.epoch(), "[", absl::StrJoin(e.referenced_epoch(), ","), "]"));
      }
      // A resumed run's first save refers to the epoch it restored (and to
      // what that one refers to) for the tensors not written since, unless
      // the chain is too long: with full_every 2 the resume from 1 (which
      // refers to 0) saved 2 in full, the one from 2 referred 3 to 2, and
      // so on; with full_every 10 every epoch refers to 0 for the dataset,
      // and 5 (an empty epoch after the resume from 4) also to 4 for the
      // total it did not change.
      if (full_every == 2) {
        EXPECT_THAT(references,
                    ElementsAre("0[]", "1[0]", "2[]", "3[2]", "4[]", "5[4]"));
      } else {
        EXPECT_THAT(references, ElementsAre("0[]", "1[0]", "2[0]", "3[0]",
                                            "4[0]", "5[0,4]"));
      }
      // Epoch 1 wrote what the epoch changed: the total, and the reader's
      // cursor (not a tensor: always written). It referred to the dataset
      // and the blob list, which it only read: 183 of 291 bytes.
      EXPECT_EQ(log->epoch(1).referenced_bytes(), 183);
      EXPECT_EQ(log->epoch(1).total_bytes(), 291);
      absl::StatusOr<BlobIndex> index =
          ReadBlobIndexAt("leveldb", CheckpointDbPath(dir, "trainer_0", 1));
      ASSERT_TRUE(index.ok()) << index.status();
      std::vector<std::string> held;
      for (const CheckpointBlobInfo& b : index->blob()) {
        held.push_back(absl::StrCat(
            b.name(), ":", b.has_stored_in_epoch() ? b.stored_in_epoch() : 1));
      }
      EXPECT_THAT(held, ElementsAre("blob_names:0", "dataset:0_cursor:1",
                                    "total:1", "val:0"));
    }
  }
}

// The runner trims the storage pool once per epoch: a buffer given back
// before the run (during epoch 1, as far as the pool can tell: without a
// checkpointer epoch 0 has no end to report) and not reused in epoch 2 is
// unmapped at epoch 2's end.
TEST(CheckpointTest, TheRunnerTrimsTheStoragePoolEveryEpoch) {
  StoragePool& pool = StoragePool::Global();
  // Empty, whatever tests before this one left in it.
  pool.set_limit_bytes(0);
  pool.set_limit_bytes(StoragePool::kDefaultLimitBytes);
  constexpr size_t kBytes = size_t{3} << 20;
  pool.Give(pool.Take(kBytes, /*zero=*/false), kBytes);
  const StoragePool::Stats before = pool.stats();
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  std::vector<int64_t> epochs;
  std::vector<StoragePool::Stats> at_epoch_end;
  JobRunner runner(job, /*checkpointer=*/nullptr,
                   {.on_epoch_end = [&](const EpochStats& epoch) {
                     epochs.push_back(epoch.epoch);
                     at_epoch_end.push_back(pool.stats());
                   }});
  ASSERT_EQ(runner.Train(session).value(), 4);
  ASSERT_THAT(epochs, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(at_epoch_end[0].held_bytes, before.held_bytes);
  EXPECT_EQ(at_epoch_end[1].held_bytes, before.held_bytes - kBytes);
  EXPECT_EQ(at_epoch_end[1].released_bytes,
            before.released_bytes + static_cast<int64_t>(kBytes));
  EXPECT_EQ(at_epoch_end[3].held_bytes, before.held_bytes - kBytes);
}

// jobgraph pins its own count of checkpointed blobs (Caffe2 had 12, later
// 17, both artefacts of auto-named dummy outputs): the blobs in the root
// workspace when init has run, including the list itself.
TEST(CheckpointTest, CheckpointedBlobsAreTheInitGroupsBlobs) {
  const std::string dir = NewTempDir("blobs");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager);
  ASSERT_EQ(runner.Train(session).value(), 4);
  absl::StatusOr<Tensor> names = session.FetchBlob("trainer_0", "blob_names");
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(
      std::vector<std::string>(names->data<std::string>(),
                               names->data<std::string>() + names->numel()),
      ElementsAre("blob_names", "dataset:0_cursor", "total", "val"));
  // After the run the root also holds the stop condition published by the
  // epoch group; everything else the epochs made lived in private
  // workspaces and is gone, and the saves leave nothing in the workspace.
  EXPECT_THAT(session.NodeWorkspace("trainer_0")->LocalBlobNames(),
              ElementsAre("blob_names", "dataset:0/limit/data_finished",
                          "dataset:0_cursor", "total", "val"));
}

TEST(CheckpointTest, DbNamesAndPartialLoadFromEveryNode) {
  const std::string dir = NewTempDir("names");
  Job job;
  for (int id = 0; id < 3; ++id) testing::BuildCaffe2Pipeline(job, id);
  {
    // Building the init tasks runs nothing, but names every database.
    MultiNodeCheckpointManager names({.directory = dir});
    ASSERT_EQ(
        names.Start(job.nodes_to_checkpoint(), ResumeFrom::Scratch()).value(),
        std::nullopt);
    for (int id = 0; id < 3; ++id) {
      EXPECT_EQ(names.DbPath(absl::StrCat("trainer_", id), 5),
                absl::StrCat(dir, "/trainer_", id, ".5"));
    }
    EXPECT_EQ(names.DbPath("trainer_9", 5), std::nullopt);
  }
  {
    MultiNodeCheckpointManager manager({.directory = dir});
    LocalSession session;
    JobRunner runner(job, &manager);
    ASSERT_EQ(runner.Train(session).value(), 4);
    for (int id = 0; id < 3; ++id)
      EXPECT_EQ(testing::Caffe2Total(session, id), 145);
  }
  for (int64_t epoch = 1; epoch <= 5; ++epoch) {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir});
    JobRunner runner(job, &manager);
    absl::StatusOr<bool> loaded =
        runner.LoadBlobsFromCheckpoints({"total"}, epoch, session);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    if (epoch == 5) {
      EXPECT_FALSE(*loaded);
      // Nothing was loaded anywhere.
      EXPECT_FALSE(session.FetchBlob("trainer_1", "total").ok());
      continue;
    }
    EXPECT_TRUE(*loaded);
    EXPECT_EQ(testing::Caffe2Total(session, 1), kExpectedTotals[epoch - 1]);
    EXPECT_EQ(testing::Caffe2Total(session, 2), kExpectedTotals[epoch - 1]);
  }
}

TEST(CheckpointTest, UploadCopiesEachNodesDatabase) {
  const std::string dir = NewTempDir("upload_ckpt");
  const std::string upload_dir = NewTempDir("upload_dest");
  for (int id = 0; id < 3; ++id) {
    Job job;
    testing::BuildCaffe2Pipeline(job, id);
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir});
    UploadToLocalDirectory upload(upload_dir);
    const std::string dest = absl::StrCat(upload_dir, "/trainer_", id);
    EXPECT_FALSE(PathExists(dest).value());
    JobRunner runner(job, &manager, {}, &upload);
    ASSERT_EQ(runner.Train(session).value(), 4);
    EXPECT_TRUE(PathExists(dest).value());
    // The copy is a complete database of epoch 4.
    EXPECT_TRUE(
        VerifyCheckpointDb("leveldb", dest, absl::StrCat("trainer_", id), 4)
            .ok());
  }
}

// With incremental saves the job saves its last epoch in full when it
// uploads, so the copy stands alone; an epoch saved by reference is refused
// by the upload, naming what it refers to, and nothing is published.
TEST(CheckpointTest, AnUploadIsAlwaysADatabaseThatStandsAlone) {
  const std::string dir = NewTempDir("upload_incremental");
  const std::string upload_dir = NewTempDir("upload_incremental_dest");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir, .incremental = true});
    UploadToLocalDirectory upload(upload_dir);
    JobRunner runner(job, &manager, {}, &upload);
    ASSERT_EQ(runner.Train(session).value(), 4);
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
    ASSERT_TRUE(log.ok());
    EXPECT_THAT(log->epoch(3).referenced_epoch(), ElementsAre(0));
    EXPECT_THAT(log->epoch(4).referenced_epoch(), ::testing::IsEmpty());
    EXPECT_TRUE(
        VerifyCheckpointDb("leveldb", upload_dir + "/trainer_0", "trainer_0", 4)
            .ok());
  }
  // Epoch 3 refers to epoch 0.
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir, .incremental = true});
  ASSERT_TRUE(manager.Start(session, {"trainer_0"}, ResumeFrom()).ok());
  UploadToLocalDirectory upload(NewTempDir("upload_incremental_refused"));
  absl::StatusOr<TaskGroup> group = upload.Build(3, manager);
  ASSERT_TRUE(group.ok());
  absl::Status uploaded = session.Run(*group);
  EXPECT_EQ(uploaded.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(uploaded.message(),
              HasSubstr(absl::StrCat("cannot upload ", dir,
                                     "/trainer_0.3: it holds blobs by "
                                     "reference to epoch 0 (")));
  manager.End();
}

// A re-run publishing into the same upload directory replaces the earlier
// copy atomically (Caffe2 overwrites) and runs the download and exit groups.
TEST(CheckpointTest, UploadReplacesAnEarlierUpload) {
  const std::string upload_dir = NewTempDir("upload_again_dest");
  const std::string dest = JoinPath(upload_dir, "trainer_0");
  for (int run = 0; run < 2; ++run) {
    Job job;
    testing::BuildCaffe2Pipeline(job, 0);
    bool exit_ran = false;
    job.exit_group()
        .NewTask(Node("trainer_0"))
        .net()
        .Op("Function", {}, std::vector<BlobRef>{},
            {MakeArg("func",
                     run == 0 ? "test.exit_ran_0" : "test.exit_ran_1")});
    ASSERT_TRUE(FunctionRegistry::Global()
                    .Register(run == 0 ? "test.exit_ran_0" : "test.exit_ran_1",
                              [&exit_ran](FunctionContext&) {
                                exit_ran = true;
                                return absl::OkStatus();
                              })
                    .ok());
    LocalSession session;
    MultiNodeCheckpointManager manager(
        {.directory = NewTempDir(absl::StrCat("upload_again_", run))});
    UploadToLocalDirectory upload(upload_dir);
    if (run == 1) {
      // Something only the old copy has must be gone afterwards.
      ASSERT_TRUE(WriteFileAtomically(JoinPath(dest, "stale"), "x").ok());
    }
    JobRunner runner(job, &manager, {}, &upload);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << "run " << run << ": " << epochs.status();
    EXPECT_EQ(*epochs, 4);
    EXPECT_TRUE(exit_ran) << "run " << run;
    EXPECT_THAT(ListDir(upload_dir).value(), ElementsAre("trainer_0"));
    EXPECT_FALSE(PathExists(JoinPath(dest, "stale")).value());
    EXPECT_TRUE(VerifyCheckpointDb("leveldb", dest, "trainer_0", 4).ok());
  }
}

TEST(CheckpointTest, SaveFailuresDoNotStopTheJobButAreReported) {
  // A directory under a regular file can never be created, even by root.
  const std::string base = NewTempDir("unwritable");
  const std::string file = base + "/not_a_directory";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  for (int run = 0; run < 3; ++run) {
    Job job;
    testing::BuildCaffe2Pipeline(job, 0);
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = file + "/ckpt"});
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, 4);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
    EXPECT_EQ(runner.stats().save_failures, 5);  // epochs 0..4
    ASSERT_EQ(runner.stats().save_errors.size(), 5u);
    EXPECT_THAT(runner.stats().save_errors[0],
                HasSubstr("unable to write checkpoint for epoch 0"));
  }
}

TEST(CheckpointTest, AnEpochWhoseSaveFailedIsNotUploaded) {
  const std::string base = NewTempDir("upload_failed");
  const std::string file = base + "/not_a_directory";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  const std::string upload_dir = NewTempDir("upload_failed_dest");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = file + "/ckpt"});
  UploadToLocalDirectory upload(upload_dir);
  JobRunner runner(job, &manager, {}, &upload);
  ASSERT_EQ(runner.Train(session).value(), 4);
  EXPECT_EQ(runner.stats().save_failures, 5);
  EXPECT_THAT(ListDir(upload_dir).value(), ElementsAre());
}

TEST(CheckpointTest, SaveFailureCanBeFatal) {
  const std::string base = NewTempDir("fatal");
  const std::string file = base + "/not_a_directory";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = file + "/ckpt"});
  JobRunner runner(job, &manager, {.fail_on_save_error = true});
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  EXPECT_EQ(epochs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(epochs.status().message(),
              HasSubstr("unable to write checkpoint for epoch 0"));
}

TEST(CheckpointTest, DownloadGroupRunsAfterTheLoop) {
  Job job;
  Node node("trainer_0");
  Task& init = job.init_group().NewTask(node);
  for (const char* name : {"input1", "input2", "output", "download_result"}) {
    init.net().Const(Tensor::FromVector<float>(std::vector<float>(8, 1.0f)),
                     name);
  }
  Task& epoch = job.epoch_group().NewTask(node);
  epoch.net().Loop(
      1, [](NetBuilder& body) { body.Add("input1", "input2", "output"); });
  job.download_group().NewTask(node).net().Copy("output", "download_result");
  EpochLimiter(job, node, 1);
  LocalSession session;
  JobRunner runner(job, nullptr);
  ASSERT_EQ(runner.Train(session).value(), 1);
  for (const char* name : {"output", "download_result"}) {
    absl::StatusOr<Tensor> value = session.FetchBlob("trainer_0", name);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_TRUE(value->BitwiseEquals(
        Tensor::FromVector<float>(std::vector<float>(8, 2.0f))))
        << name << ": " << value->DebugString();
  }
}

// Two limiters on one node each count on their own blobs: the smaller limit
// ends the job after exactly that many epochs, every time, and a resume
// continues both counters.
TEST(CheckpointTest, TwoEpochLimitersOnOneNodeStopAtTheSmallerLimit) {
  const std::string dir = NewTempDir("two_limiters");
  Job job;
  Node node("trainer_0");
  job.init_group().NewTask(node).net().Const<int64_t>("x", {1});
  EpochLimiter(job, node, 10);
  EpochLimiter(job, node, 3);
  for (int run = 0; run < 20; ++run) {
    LocalSession session;
    JobRunner runner(job, nullptr);
    ASSERT_EQ(runner.Train(session).value(), 3) << "run " << run;
    EXPECT_EQ(session.FetchBlob("trainer_0", "trainer_0/epoch_limit_reached")
                  ->scalar<bool>(),
              false);
    EXPECT_EQ(session.FetchBlob("trainer_0", "trainer_0/epoch_limit_reached:1")
                  ->scalar<bool>(),
              true);
  }
  {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir});
    JobRunner runner(job, &manager);
    ASSERT_EQ(runner.Train(session).value(), 3);
  }
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(1)});
  ASSERT_EQ(runner.Train(session).value(), 3);
}

TEST(CheckpointTest, ReusedCheckpointManager) {
  const std::string dir = NewTempDir("reuse");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  MultiNodeCheckpointManager manager({.directory = dir});
  LocalSession session;
  {
    JobRunner runner(job, &manager);
    ASSERT_EQ(runner.Train(session).value(), 4);
  }
  for (int64_t resume = 1; resume <= 4; ++resume) {
    JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(resume)});
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, resume < 4 ? 4 : 5);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
  }
}

// A retry loop builds a fresh session for every run and reuses the
// checkpointer: from scratch it writes the blob lists of its first run into
// the new session, and on resume it takes them from the checkpoint.
TEST(CheckpointTest, ReusedCheckpointerWithANewSessionEachRun) {
  const std::string dir = NewTempDir("reuse_sessions");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  MultiNodeCheckpointManager manager({.directory = dir});
  for (int run = 0; run < 2; ++run) {
    LocalSession session;
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, 4);
    EXPECT_EQ(runner.stats().save_failures, 0) << "run " << run;
    ASSERT_EQ(runner.stats().epochs.size(), 5u);
    for (const EpochStats& e : runner.stats().epochs) {
      EXPECT_EQ(e.save_bytes, 291) << "run " << run << " epoch " << e.epoch;
    }
    EXPECT_EQ(testing::Caffe2Total(session), 145);
  }
  for (int64_t resume = 1; resume <= 4; ++resume) {
    LocalSession session;
    JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(resume)});
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_EQ(*epochs, resume < 4 ? 4 : 5);
    EXPECT_EQ(runner.stats().save_failures, 0);
    EXPECT_EQ(testing::Caffe2Total(session), 145);
  }
}

// LevelDB databases whose opens for reading are counted per path.
class CountingLevelDb final : public DbType {
 public:
  static constexpr char kName[] = "counting_leveldb";

  // The registered instance (registered on the first call).
  static CountingLevelDb& Get() {
    static CountingLevelDb* const type = [] {
      auto owned = std::make_shared<CountingLevelDb>();
      CountingLevelDb* raw = owned.get();
      absl::Status registered =
          DbRegistry::Global().Register(kName, std::move(owned));
      CHECK(registered.ok()) << registered;
      return raw;
    }();
    return *type;
  }

  CountingLevelDb() : base_(*DbRegistry::Global().Find("leveldb").value()) {}

  std::map<std::string, int> TakeReadOpens() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(read_opens_, {});
  }

  absl::StatusOr<bool> Exists(const std::string& path) const override {
    return base_.Exists(path);
  }
  absl::Status CheckInstallable(const std::string& path) const override {
    return base_.CheckInstallable(path);
  }
  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override {
    return base_.Install(temp_path, final_path);
  }
  absl::Status Remove(const std::string& path) const override {
    return base_.Remove(path);
  }

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override {
    if (mode == DbMode::kRead) {
      std::lock_guard<std::mutex> lock(mu_);
      ++read_opens_[path];
    }
    return base_.Open(path, mode, options);
  }

 private:
  const DbType& base_;
  mutable std::mutex mu_;
  mutable std::map<std::string, int> read_opens_;
};

// Builds the pipeline on trainer_0 and trainer_1 into `job` and trains it
// into `dir` (epochs 0..4 committed).
void TrainTwoNodes(Job& job, const std::string& dir,
                   const std::string& db_type) {
  testing::BuildCaffe2Pipeline(job, 0);
  testing::BuildCaffe2Pipeline(job, 1);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir, .db_type = db_type});
  JobRunner runner(job, &manager);
  ASSERT_EQ(runner.Train(session).value(), 4);
  ASSERT_EQ(testing::Caffe2Total(session, 1), 145);
}

// No blob of trainer_0's or trainer_1's workspace in `session` is staged.
void ExpectNoStagedBlobs(LocalSession& session) {
  for (const char* node : {"trainer_0", "trainer_1"}) {
    for (const std::string& name :
         session.NodeWorkspace(node)->LocalBlobNames()) {
      EXPECT_THAT(name, Not(StartsWith(kStagedBlobPrefix))) << node;
    }
  }
}

// Choosing the epoch loads it: verification happens while loading, so a
// resume opens and reads each database once.
TEST(CheckpointTest, AResumeReadsEachDatabaseOnce) {
  CountingLevelDb& counting = CountingLevelDb::Get();
  const std::string dir = NewTempDir("read_once");
  Job job;
  TrainTwoNodes(job, dir, CountingLevelDb::kName);
  counting.TakeReadOpens();

  LocalSession session;
  MultiNodeCheckpointManager manager(
      {.directory = dir, .db_type = CountingLevelDb::kName});
  absl::StatusOr<std::optional<int64_t>> epoch =
      manager.Start(session, {"trainer_0", "trainer_1"}, ResumeFrom::Latest());
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  ASSERT_EQ(*epoch, 4);
  // Nothing is in place before Restore.
  EXPECT_FALSE(session.NodeWorkspace("trainer_0")->HasBlob("total"));
  ASSERT_TRUE(manager.Restore(session, 4).ok());
  EXPECT_THAT(counting.TakeReadOpens(),
              ElementsAre(Pair(JoinPath(dir, "trainer_0.4"), 1),
                          Pair(JoinPath(dir, "trainer_1.4"), 1)));
  EXPECT_EQ(testing::Caffe2Total(session, 0), 145);
  EXPECT_EQ(testing::Caffe2Total(session, 1), 145);
  ExpectNoStagedBlobs(session);
  manager.End();
}

// trainer_1's newest database is truncated and its epoch 3 deleted, while
// trainer_0's load well: a restore of either changes no workspace, and
// latest falls back to epoch 2, whose totals are 115.
TEST(CheckpointTest, DamageFoundWhileRestoringLeavesEveryWorkspaceAsItWas) {
  const std::string dir = NewTempDir("restore_damage");
  Job job;
  TrainTwoNodes(job, dir, "leveldb");
  const std::string damaged = JoinPath(dir, "trainer_1.4");
  const std::vector<std::string> files = ListDir(damaged).value();
  std::string table;
  for (const std::string& name : files) {
    if (absl::EndsWith(name, ".ldb")) table = JoinPath(damaged, name);
  }
  ASSERT_FALSE(table.empty());
  struct stat st;
  ASSERT_EQ(stat(table.c_str(), &st), 0);
  ASSERT_EQ(truncate(table.c_str(), st.st_size - 1), 0);
  ASSERT_TRUE(DbRegistry::Global()
                  .Find("leveldb")
                  .value()
                  ->Remove(JoinPath(dir, "trainer_1.3"))
                  .ok());

  LocalSession session;
  const std::vector<std::string> nodes = {"trainer_0", "trainer_1"};
  for (const std::string& node : nodes) {
    Workspace* ws = session.NodeWorkspace(node);
    ws->SetTensor("total", Tensor::Scalar<int64_t>(7));
    ws->SetTensor("mine", Tensor::Scalar<int64_t>(8));
  }
  // The workspaces' own blobs as the test left them; staged ones only when
  // an epoch has been chosen and not yet restored.
  auto expect_untouched = [&](const std::string& when, bool staged = false) {
    for (const std::string& node : nodes) {
      Workspace* ws = session.NodeWorkspace(node);
      std::vector<std::string> own;
      int num_staged = 0;
      for (const std::string& name : ws->LocalBlobNames()) {
        if (absl::StartsWith(name, kStagedBlobPrefix)) {
          ++num_staged;
        } else {
          own.push_back(name);
        }
      }
      EXPECT_THAT(own, ElementsAre("mine", "total")) << node << " " << when;
      // blob_names, the cursor, total and val, and the load's marker.
      EXPECT_EQ(num_staged, staged ? 5 : 0) << node << " " << when;
      EXPECT_EQ(ws->GetTensor("total").value()->data<int64_t>()[0], 7)
          << node << " " << when;
    }
  };

  MultiNodeCheckpointManager manager({.directory = dir});
  ASSERT_TRUE(manager.Start(nodes, ResumeFrom::Scratch()).ok());
  for (int64_t epoch : {4, 3}) {
    absl::StatusOr<CheckpointStats> restored = manager.Restore(session, epoch);
    EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss)
        << restored.status();
    EXPECT_THAT(restored.status().message(),
                HasSubstr(absl::StrCat("trainer_1.", epoch)));
    expect_untouched(absl::StrCat("after the restore of epoch ", epoch));
  }
  manager.End();

  absl::StatusOr<std::optional<int64_t>> epoch =
      manager.Start(session, nodes, ResumeFrom::Latest());
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 2);
  expect_untouched("after the choice of epoch 2", /*staged=*/true);
  ASSERT_TRUE(manager.Restore(session, 2).ok());
  EXPECT_EQ(testing::Caffe2Total(session, 0), 115);
  EXPECT_EQ(testing::Caffe2Total(session, 1), 115);
  // Blobs the checkpoint does not hold stay.
  EXPECT_EQ(session.NodeWorkspace("trainer_1")
                ->GetTensor("mine")
                .value()
                ->data<int64_t>()[0],
            8);
  manager.End();

  // An explicit epoch that is damaged is an error, not a fallback.
  EXPECT_EQ(manager.Start(session, nodes, ResumeFrom::Epoch(4)).status().code(),
            absl::StatusCode::kDataLoss);
  manager.End();
}

// Only damage makes latest try an older epoch: a load that fails for
// another reason (here a stop request) ends the choice with that error, so
// that a run never resumes an older epoch and replaces the newer ones.
TEST(CheckpointTest, OnlyDamageMakesLatestFallBack) {
  const std::string dir = NewTempDir("fallback_only_on_damage");
  Job job;
  TrainTwoNodes(job, dir, "leveldb");
  LocalSession session;
  session.RequestStop();
  MultiNodeCheckpointManager manager({.directory = dir});
  absl::StatusOr<std::optional<int64_t>> epoch =
      manager.Start(session, {"trainer_0", "trainer_1"}, ResumeFrom::Latest());
  EXPECT_EQ(epoch.status().code(), absl::StatusCode::kCancelled)
      << epoch.status();
  EXPECT_THAT(epoch.status().message(),
              HasSubstr(absl::StrCat("resume_from_epoch=latest: epoch 4 of ",
                                     dir, ": ")));
  manager.End();
}

// Staged blobs belong to one session: a Restore in another session (also
// one built where a destroyed one was) loads the epoch itself; blobs staged
// for a Restore that never came never enter a later run's blob list; an
// epoch that was never committed is NotFound.
TEST(CheckpointTest, StagedBlobsStayInTheirSession) {
  const std::string dir = NewTempDir("staged_sessions");
  Job job;
  TrainTwoNodes(job, dir, "leveldb");
  const std::vector<std::string> nodes = {"trainer_0", "trainer_1"};
  MultiNodeCheckpointManager manager({.directory = dir});
  auto session = std::make_unique<LocalSession>();
  ASSERT_EQ(manager.Start(*session, nodes, ResumeFrom::Latest()).value(), 4);
  session.reset();
  session = std::make_unique<LocalSession>();
  absl::StatusOr<CheckpointStats> restored = manager.Restore(*session, 4);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->bytes, 582);
  EXPECT_EQ(testing::Caffe2Total(*session, 0), 145);
  EXPECT_EQ(testing::Caffe2Total(*session, 1), 145);
  EXPECT_EQ(manager.Restore(*session, 7).status().code(),
            absl::StatusCode::kNotFound);
  manager.End();

  // Epoch 3 staged in one session and never restored, epoch 4 staged in
  // another: a Restore of 4 in the first loads 4, not the leftover 3.
  LocalSession first;
  LocalSession second;
  ASSERT_EQ(manager.Start(first, nodes, ResumeFrom::Epoch(3)).value(), 3);
  manager.End();
  ASSERT_EQ(manager.Start(second, nodes, ResumeFrom::Latest()).value(), 4);
  ASSERT_TRUE(manager.Restore(first, 4).ok());
  EXPECT_EQ(testing::Caffe2Total(first, 0), 145);
  EXPECT_EQ(testing::Caffe2Total(first, 1), 145);
  manager.End();

  // Staged, never restored; then the same session runs from scratch.
  LocalSession reused;
  ASSERT_EQ(manager.Start(reused, nodes, ResumeFrom::Latest()).value(), 4);
  manager.End();
  const std::string other_dir = NewTempDir("staged_sessions_other");
  MultiNodeCheckpointManager other({.directory = other_dir});
  JobRunner runner(job, &other);
  ASSERT_EQ(runner.Train(reused).value(), 4);
  ASSERT_EQ(runner.stats().epochs.size(), 5u);
  for (const EpochStats& e : runner.stats().epochs) {
    EXPECT_EQ(e.save_bytes, 582) << "epoch " << e.epoch;
  }
  ExpectNoStagedBlobs(reused);
}

// A save of an epoch the commit log may list takes the old entry out before
// its databases are replaced; a save of a newer epoch has nothing to take
// out and skips that step (and, on several ranks, the agreement on it).
TEST(CheckpointTest, ReSavingAListedEpochUnlistsItBeforeItsDatabasesChange) {
  const std::string dir = NewTempDir("resave");
  const std::vector<std::string> nodes = {"trainer_0", "trainer_1"};
  TaskGroup init("init", GLOBAL);
  for (const std::string& node : nodes) {
    init.NewTask(Node(node)).net().Const(Tensor::Scalar<int64_t>(7), "w");
  }
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  ASSERT_EQ(manager.Start(session, nodes, ResumeFrom::Scratch()).value(),
            std::nullopt);
  ASSERT_TRUE(session.Run(init).ok());
  ASSERT_TRUE(manager.CaptureBlobNames(session).ok());
  for (int64_t epoch = 0; epoch <= 2; ++epoch) {
    ASSERT_TRUE(manager.SaveEpoch(session, epoch).ok()) << epoch;
  }
  auto listed = [&] { return CommittedEpochList(ReadCommitLog(dir).value()); };
  ASSERT_EQ(listed(), "0, 1, 2");

  // Epoch 1 again, its commit failing: the log no longer lists it, although
  // its databases were rewritten.
  ASSERT_TRUE(
      Failpoints::Enable("commit.before_commit_log", FailpointAction::kError)
          .ok());
  absl::StatusOr<CheckpointStats> failed = manager.SaveEpoch(session, 1);
  Failpoints::DisableAll();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(listed(), "0, 2");
  // Its save commits it and drops the later epoch (of an abandoned run).
  ASSERT_TRUE(manager.SaveEpoch(session, 1).ok());
  EXPECT_EQ(listed(), "0, 1");
  // Epoch 2 is new again; epoch 1 is listed again.
  ASSERT_TRUE(manager.SaveEpoch(session, 2).ok());
  ASSERT_TRUE(
      Failpoints::Enable("commit.before_commit_log", FailpointAction::kError)
          .ok());
  failed = manager.SaveEpoch(session, 1);
  Failpoints::DisableAll();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(listed(), "0, 2");
  manager.End();
}

// Retention leaves the log in the commit's own write. When that commit
// fails after its log is in place (here the failpoint after the rename
// returns an error; a failed fsync of the directory does the same), the
// retired epochs are unlisted all the same, and their databases are deleted
// then, since no later commit would see them again.
TEST(CheckpointTest, ACommitFailingAfterItsLogLandedStillDeletesWhatItRetired) {
  const std::string dir = NewTempDir("retire_failed");
  TaskGroup init("init", GLOBAL);
  init.NewTask(Node("trainer_0")).net().Const(Tensor::Scalar<int64_t>(7), "w");
  LocalSession session;
  MultiNodeCheckpointManager manager(
      {.directory = dir, .retention = {.keep_last = 1}});
  ASSERT_EQ(
      manager.Start(session, {"trainer_0"}, ResumeFrom::Scratch()).value(),
      std::nullopt);
  ASSERT_TRUE(session.Run(init).ok());
  ASSERT_TRUE(manager.CaptureBlobNames(session).ok());
  ASSERT_TRUE(manager.SaveEpoch(session, 0).ok());
  ASSERT_TRUE(manager.SaveEpoch(session, 1).ok());
  ASSERT_TRUE(
      Failpoints::Enable("commit.after_commit_log", FailpointAction::kError)
          .ok());
  absl::StatusOr<CheckpointStats> failed = manager.SaveEpoch(session, 2);
  Failpoints::DisableAll();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(CommittedEpochList(ReadCommitLog(dir).value()), "2");
  manager.End();
  WaitForBackgroundDeletes();
  EXPECT_THAT(ListDir(dir).value(),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                          "trainer_0.2"));
}

// keep_last=2 with keep_every=2 keeps the two newest epochs and the even
// ones, drops the rest from the commit log and deletes their databases.
TEST(CheckpointTest, RetentionKeepsTheNewestAndTheMilestones) {
  const std::string dir = NewTempDir("retention");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  MultiNodeCheckpointManager manager(
      {.directory = dir, .retention = {.keep_last = 2, .keep_every = 2}});
  JobRunner runner(job, &manager);
  ASSERT_EQ(runner.Train(session).value(), 4);
  absl::StatusOr<CommitLog> commit_log = ReadCommitLog(dir);
  ASSERT_TRUE(commit_log.ok()) << commit_log.status();
  std::vector<int64_t> committed;
  for (const CommittedEpoch& e : commit_log->epoch())
    committed.push_back(e.epoch());
  EXPECT_THAT(committed, ElementsAre(0, 2, 3, 4));
  EXPECT_THAT(
      ListDir(dir).value(),
      ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev", "trainer_0.0",
                  "trainer_0.2", "trainer_0.3", "trainer_0.4"));
  // A resume from the newest still works after retention.
  LocalSession again;
  MultiNodeCheckpointManager resumed_manager({.directory = dir});
  JobRunner resumed(job, &resumed_manager,
                    {.resume_from = ResumeFrom::Latest()});
  ASSERT_EQ(resumed.Train(again).value(), 5);
  EXPECT_EQ(resumed.stats().resumed_from, 4);
  EXPECT_EQ(testing::Caffe2Total(again), 145);
}

// The in-memory DB type goes through the same commit: the commit log is on
// disk, the databases in memory.
TEST(CheckpointTest, InMemoryDatabasesCommitAndResume) {
  const std::string dir = NewTempDir("memory");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir, .db_type = "memory"});
    JobRunner runner(job, &manager);
    ASSERT_EQ(runner.Train(session).value(), 4);
    EXPECT_EQ(runner.stats().save_failures, 0);
    EXPECT_EQ(ReadCommitLog(dir)->epoch_size(), 5);
  }
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir, .db_type = "memory"});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(2)});
  ASSERT_EQ(runner.Train(session).value(), 4);
  EXPECT_EQ(testing::Caffe2Total(session), 145);
}

TEST(CheckpointTest, ResumeLatestFromEmptyDirectoryStartsFromScratch) {
  const std::string dir = NewTempDir("latest_empty");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Latest()});
  ASSERT_EQ(runner.Train(session).value(), 4);
  EXPECT_EQ(runner.stats().resumed_from, std::nullopt);
  EXPECT_EQ(testing::Caffe2Total(session), 145);
}

TEST(CheckpointTest, ResumeErrorsNameTheEpochAndDirectory) {
  const std::string dir = NewTempDir("resume_errors");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir});
    JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Epoch(7)});
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    EXPECT_EQ(epochs.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(epochs.status().message(), HasSubstr("epoch 7"));
    EXPECT_THAT(epochs.status().message(), HasSubstr(dir));
  }
  {
    LocalSession session;
    JobRunner runner(job, nullptr, {.resume_from = ResumeFrom::Epoch(2)});
    EXPECT_EQ(runner.Train(session).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// full_every is bounded: the processes of a job exchange one count per
// epoch of a chain at every save.
TEST(CheckpointTest, FullEveryOutOfRangeIsRefusedNamingIt) {
  const std::string dir = NewTempDir("full_every");
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  for (int full_every : {0, kMaxFullEvery + 1}) {
    LocalSession session;
    MultiNodeCheckpointManager manager(
        {.directory = dir, .incremental = true, .full_every = full_every});
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    EXPECT_EQ(epochs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        epochs.status().message(),
        HasSubstr(absl::StrCat("CheckpointOptions.full_every is ", full_every,
                               "; give 1 (every save is "
                               "full) to 1000")));
  }
  // Nothing was written.
  EXPECT_THAT(ListDir(dir).value(), ::testing::IsEmpty());
}

// A second run over a node that a running job holds is refused before it
// reads or writes anything; a job with other nodes shares the directory.
TEST(CheckpointTest, ASecondRunOfTheSameNodesIsRefused) {
  const std::string dir = NewTempDir("locked");
  Job job;
  for (int id = 0; id < 2; ++id) testing::BuildCaffe2Pipeline(job, id);
  Checkpointer running({.directory = dir});
  ASSERT_TRUE(
      running.Start(job.nodes_to_checkpoint(), ResumeFrom::Scratch()).ok());

  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager, {.resume_from = ResumeFrom::Latest()});
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  EXPECT_EQ(epochs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(epochs.status().message(),
              HasSubstr(absl::StrCat("node 'trainer_0' of checkpoint "
                                     "directory ",
                                     dir, " is in use by another run (host ")));
  // The commit log is the running job's (written at its Start).
  EXPECT_THAT(
      ListDir(dir).value(),
      ElementsAre("MANIFEST.jobgraph", "trainer_0.lock", "trainer_1.lock"));

  Job other;
  testing::BuildCaffe2Pipeline(other, 2);
  MultiNodeCheckpointManager other_manager({.directory = dir});
  JobRunner other_runner(other, &other_manager);
  EXPECT_EQ(other_runner.Train(session).value(), 4);

  running.End();
  JobRunner again(job, &manager);
  EXPECT_EQ(again.Train(session).value(), 4);
  EXPECT_THAT(
      ListDir(dir).value(),
      ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev", "trainer_0.0",
                  "trainer_0.1", "trainer_0.2", "trainer_0.3", "trainer_0.4",
                  "trainer_1.0", "trainer_1.1", "trainer_1.2", "trainer_1.3",
                  "trainer_1.4", "trainer_2.0", "trainer_2.1", "trainer_2.2",
                  "trainer_2.3", "trainer_2.4"));
}

TEST(CheckpointTest, NodeNamesThatEscapeTheDirectoryAreRejected) {
  const std::string dir = NewTempDir("names_bad");
  for (const char* bad : {"../evil", "a/b", ".hidden", "", "sp ace"}) {
    Job job;
    job.init_group().NewTask(Node(bad)).net().Const<int64_t>("x", {1});
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir});
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    EXPECT_EQ(epochs.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(epochs.status().message(), HasSubstr("node name"));
  }
  EXPECT_THAT(ListDir(dir).value(), ElementsAre());
}

}  // namespace
}  // namespace jobgraph

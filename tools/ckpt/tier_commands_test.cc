// `ckpt flush`, `ckpt list --local` and `ckpt verify` on local tiers
// (CheckpointOptions::local_directory): exact output and exit codes, on
// tiers written database by database and by a Checkpointer.

#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"
#include "tests/caffe2_pipeline.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"

namespace jobgraph {
namespace ckpt {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using testing_util::TempDir;

const std::vector<std::string> kNodes = {"trainer_0", "trainer_1"};

// 2023-11-14 22:13:20 UTC.
constexpr int64_t kCommitTime = int64_t{1700000000} * 1000000;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result RunTool(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  Result result;
  result.code = RunCkpt(args, "", out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

// The lines of `text` with runs of spaces collapsed to one and no leading
// or trailing spaces (as in ckpt_test.cc).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string collapsed;
    for (absl::string_view word :
         absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      if (!collapsed.empty()) collapsed += ' ';
      collapsed.append(word.data(), word.size());
    }
    lines.push_back(collapsed);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

BlobIndex IndexOf(const std::string& path) {
  absl::StatusOr<BlobIndex> index = ReadBlobIndexAt("leveldb", path);
  CHECK(index.ok()) << index.status();
  return *index;
}

std::vector<std::string> Names(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  CHECK(names.ok()) << names.status();
  return *names;
}

// The job's epochs that the commit log of `dir` lists.
std::vector<int64_t> LoggedEpochs(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  CHECK(log.ok()) << log.status();
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : log->epoch()) epochs.push_back(e.epoch());
  return epochs;
}

// What NodeLock writes into its file: "host <name> pid <pid>".
std::string ThisHolder() {
  char host[256] = {};
  CHECK_EQ(::gethostname(host, sizeof(host) - 1), 0);
  return absl::StrCat("host ", host, " pid ", ::getpid());
}

// Flips one byte in the middle of the first table file of database `db`;
// returns the file's path.
std::string DamageTable(const std::string& db) {
  for (const std::string& name : Names(db)) {
    if (!absl::EndsWith(name, ".ldb")) continue;
    const std::string path = JoinPath(db, name);
    absl::StatusOr<std::string> bytes = ReadFileToString(path);
    CHECK(bytes.ok()) << bytes.status();
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(bytes->size() / 2);
    const char flipped = (*bytes)[bytes->size() / 2] ^ 0x01;
    file.write(&flipped, 1);
    CHECK(file.good()) << path;
    return path;
  }
  ADD_FAILURE() << "no table file in " << db;
  return "";
}

class TierCommandsTest : public ::testing::Test {
 protected:
  TierCommandsTest()
      : local_(dirs_.Join("local")), shared_(dirs_.Join("shared")) {
    CHECK(CreateDir(local_).ok());
  }

  // Writes `node`'s database of `epoch` into `dir` (one tensor "w" whose
  // values follow from the epoch); returns its bytes.
  static absl::StatusOr<int64_t> WriteNodeDb(const std::string& dir,
                                             const std::string& node,
                                             int64_t epoch) {
    Blob blob;
    Tensor* w =
        blob.Reset(std::make_unique<Tensor>(FLOAT, std::vector<int64_t>{100}));
    for (int i = 0; i < 100; ++i) {
      w->mutable_data<float>()[i] = static_cast<float>(epoch * 100 + i);
    }
    CheckpointDbOptions options;
    options.node = node;
    options.epoch = epoch;
    return WriteCheckpointDb("leveldb", CheckpointDbPath(dir, node, epoch),
                             {{"w", &blob}}, options);
  }

  // Writes both nodes' databases of `epoch` into `dir` and commits the
  // epoch there at kCommitTime + `second` s, after a save of 1500 + epoch
  // us: the same arguments make the same commit (SameCommit) in two
  // directories, as a flush leaves it.
  void Commit(const std::string& dir, int64_t epoch, int64_t second) {
    ASSERT_TRUE(PrepareCheckpointDirectory(dir).ok());
    int64_t total = 0;
    for (const std::string& node : kNodes) {
      absl::StatusOr<int64_t> written = WriteNodeDb(dir, node, epoch);
      ASSERT_TRUE(written.ok()) << written.status();
      total += *written;
    }
    EpochCommit commit;
    commit.epoch = epoch;
    commit.nodes = kNodes;
    commit.total_bytes = total;
    commit.save_micros = 1500 + epoch;
    commit.committed_unix_micros = kCommitTime + second * 1000000;
    absl::Status committed = CommitEpoch(dir, "leveldb", commit);
    ASSERT_TRUE(committed.ok()) << committed;
  }

  // One host's part of `epoch` of a job on several hosts, as host `host`'s
  // local tier holds it: trainer_0's database only, committed with the
  // job's nodes, the held node and the host (checkpoint/FORMAT.md 3.5) at
  // kCommitTime + `second` s. `total` is the whole epoch's bytes, as every
  // host's log records them.
  void CommitHostPart(const std::string& dir, int64_t epoch, int64_t second,
                      int64_t total, const std::string& host) {
    ASSERT_TRUE(PrepareCheckpointDirectory(dir).ok());
    absl::StatusOr<int64_t> written = WriteNodeDb(dir, kNodes[0], epoch);
    ASSERT_TRUE(written.ok()) << written.status();
    EpochCommit commit;
    commit.epoch = epoch;
    commit.nodes = kNodes;
    commit.held_nodes = {kNodes[0]};
    commit.host = host;
    commit.total_bytes = total;
    commit.save_micros = 1500 + epoch;
    commit.committed_unix_micros = kCommitTime + second * 1000000;
    absl::Status committed = CommitEpoch(dir, "leveldb", commit);
    ASSERT_TRUE(committed.ok()) << committed;
  }

  // The bytes of both nodes' databases of `epoch` in `dir`, by their blob
  // indexes.
  static int64_t EpochBytes(const std::string& dir, int64_t epoch) {
    int64_t bytes = 0;
    for (const std::string& node : kNodes) {
      bytes += IndexOf(CheckpointDbPath(dir, node, epoch)).total_bytes();
    }
    return bytes;
  }

  // The bytes of the files of both nodes' databases of `epoch` in `dir`:
  // what a flush copies into it.
  static int64_t FileBytes(const std::string& dir, int64_t epoch) {
    int64_t bytes = 0;
    for (const std::string& node : kNodes) {
      absl::StatusOr<int64_t> b = DiskBytes(CheckpointDbPath(dir, node, epoch));
      CHECK(b.ok()) << b.status();
      bytes += *b;
    }
    return bytes;
  }

  // A row of `list` (spaces collapsed) for an epoch of the standard
  // databases committed at kCommitTime + `second` s, whose databases are in
  // `dir`, followed by `tiers` if not empty.
  static std::string Row(const std::string& dir, int64_t epoch, int64_t second,
                         const std::string& tiers) {
    std::string row =
        absl::StrCat(epoch, " committed trainer_0,trainer_1 2 ",
                     EpochBytes(dir, epoch), " ", FormatMicros(1500 + epoch),
                     " ", FormatUnixMicros(kCommitTime + second * 1000000));
    if (!tiers.empty()) absl::StrAppend(&row, " ", tiers);
    return row;
  }

  std::string Local(absl::string_view name) const {
    return JoinPath(local_, name);
  }
  std::string Shared(absl::string_view name) const {
    return JoinPath(shared_, name);
  }

  TempDir dirs_;
  const std::string local_;
  const std::string shared_;
};

// --- flush

TEST_F(TierCommandsTest, FlushCopiesTheNewestEpochAsTheSameCommit) {
  Commit(local_, 1, 1);
  Commit(local_, 2, 2);
  // The shared directory does not exist yet: the flush creates it.
  Result r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, absl::StrCat("flushed epoch 2 from ", local_, " to ",
                                shared_, ": nodes trainer_0, trainer_1; ",
                                FileBytes(shared_, 2), " bytes copied\n"));
  absl::StatusOr<CommitLog> log = ReadCommitLog(shared_);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->epoch_size(), 1);
  EXPECT_EQ(log->epoch(0).epoch(), 2);
  EXPECT_EQ(log->epoch(0).committed_unix_micros(), kCommitTime + 2000000);
  EXPECT_THAT(log->epoch(0).node(), ElementsAre("trainer_0", "trainer_1"));
  // The locks are gone from both directories.
  EXPECT_THAT(Names(shared_),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                          "trainer_0.2", "trainer_1.2"));
  EXPECT_THAT(
      Names(local_),
      ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev", "trainer_0.1",
                  "trainer_0.2", "trainer_1.1", "trainer_1.2"));
  r = RunTool({"verify", shared_});
  EXPECT_EQ(r.code, kExitOk) << r.out;

  // Again: nothing to copy.
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, absl::StrCat("epoch 2 is already in ", shared_, "\n"));
}

TEST_F(TierCommandsTest, FlushOfARequestedEpoch) {
  Commit(local_, 1, 1);
  Commit(local_, 2, 2);
  Commit(local_, 3, 3);
  Result r = RunTool({"flush", local_, shared_, "--epoch=2"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("flushed epoch 2 from ", local_, " to ",
                                shared_, ": nodes trainer_0, trainer_1; ",
                                FileBytes(shared_, 2), " bytes copied\n"));
  EXPECT_THAT(LoggedEpochs(shared_), ElementsAre(2));
  r = RunTool({"flush", local_, shared_, "--epoch=2"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("epoch 2 is already in ", shared_, "\n"));

  // Epoch 3 continues epoch 2; the newest is the default.
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("flushed epoch 3 from ", local_, " to ",
                                shared_, ": nodes trainer_0, trainer_1; ",
                                FileBytes(shared_, 3), " bytes copied\n"));
  EXPECT_THAT(LoggedEpochs(shared_), ElementsAre(2, 3));

  // Committing epoch 1 now would take epochs 2 and 3 out of the shared
  // log.
  r = RunTool({"flush", local_, shared_, "--epoch=1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            absl::StrCat("ckpt: epoch 1 of ", local_,
                         " is older than the newest epoch of ", shared_,
                         " (3): committing it there would take the newer "
                         "epochs out of its commit log; nothing is "
                         "flushed\n"));
  EXPECT_THAT(LoggedEpochs(shared_), ElementsAre(2, 3));
}

TEST_F(TierCommandsTest, FlushOfAnEpochAlreadyThereCarriesTheMarkOnly) {
  Commit(local_, 1, 1);
  Commit(shared_, 1, 1);
  Result r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, absl::StrCat("epoch 1 is already in ", shared_, "\n"));

  // The run was then preempted after its last epoch: the mark is the only
  // news.
  Preemption mark;
  mark.set_group(JOB_GROUP_DOWNLOAD);
  mark.set_signal("SIGTERM");
  ASSERT_TRUE(MarkEpochLoopFinished(local_, 1, kNodes, mark).ok());
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            absl::StrCat("epoch 1 is already in ", shared_,
                         "; copied its mark of a run preempted after the last "
                         "epoch there\n"));
  absl::StatusOr<CommitLog> log = ReadCommitLog(shared_);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->epoch_size(), 1);
  EXPECT_EQ(log->epoch(0).preemption().group(), JOB_GROUP_DOWNLOAD);
  EXPECT_EQ(log->epoch(0).preemption().signal(), "SIGTERM");
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.out, absl::StrCat("epoch 1 is already in ", shared_, "\n"));
}

TEST_F(TierCommandsTest, FlushOfADamagedLocalCopyReachesNothing) {
  Commit(local_, 1, 1);
  const std::string table = DamageTable(Local("trainer_1.1"));
  Result r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.out, "");
  // FlushEpoch's message, which names the damaged file.
  EXPECT_THAT(r.err, StartsWith(absl::StrCat("ckpt: copying checkpoint ",
                                             Local("trainer_1.1"), " to ",
                                             Shared("trainer_1.1"), ": ")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(table, " has CRC-32C ")));
  EXPECT_THAT(r.err, EndsWith(absl::StrCat(
                         "; epoch 1 is not flushed (the commit log of ",
                         shared_, " does not list it); `ckpt verify ", local_,
                         "` checks the local tier\n")));
  EXPECT_THAT(LoggedEpochs(shared_), IsEmpty());
}

TEST_F(TierCommandsTest, FlushIsRefusedWhileAJobHoldsANodeLock) {
  Commit(local_, 1, 1);
  auto refusal = [&](const std::string& dir, const std::string& node) {
    return absl::StrCat(
        "ckpt: node '", node, "' of checkpoint directory ", dir,
        " is in use by another run (", ThisHolder(), "; lock file ",
        NodeLockPath(dir, node),
        "). Two runs of one job would save the same epochs over each other: "
        "wait for that run to end, or stop it, then start again. A job that "
        "runs flushes its epochs itself: run `ckpt flush` after it stops.\n");
  };
  {
    absl::StatusOr<std::unique_ptr<NodeLock>> held =
        NodeLock::Acquire(local_, "trainer_1");
    ASSERT_TRUE(held.ok()) << held.status();
    Result r = RunTool({"flush", local_, shared_});
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, refusal(local_, "trainer_1"));
    // Nothing was created, and trainer_0's lock was given back.
    EXPECT_FALSE(*PathExists(shared_));
    EXPECT_FALSE(*PathExists(NodeLockPath(local_, "trainer_0")));
  }
  ASSERT_TRUE(CreateDir(shared_).ok());
  {
    absl::StatusOr<std::unique_ptr<NodeLock>> held =
        NodeLock::Acquire(shared_, "trainer_0");
    ASSERT_TRUE(held.ok()) << held.status();
    Result r = RunTool({"flush", local_, shared_});
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_EQ(r.err, refusal(shared_, "trainer_0"));
    EXPECT_THAT(Names(shared_), ElementsAre("trainer_0.lock"));
  }
  Result r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, StartsWith("flushed epoch 1 from "));
}

TEST_F(TierCommandsTest, FlushOfAnEpochTheLocalLogDoesNotList) {
  Commit(local_, 1, 1);
  Commit(local_, 2, 2);
  Result r = RunTool({"flush", local_, shared_, "--epoch=5"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, absl::StrCat("ckpt: epoch 5 is not committed in ", local_,
                                " (committed epochs: 1, 2)\n"));
  EXPECT_FALSE(*PathExists(shared_));
}

TEST_F(TierCommandsTest, FlushNeedsALocalCommitLog) {
  const std::string empty = dirs_.Join("empty");
  ASSERT_TRUE(CreateDir(empty).ok());
  Result r = RunTool({"flush", empty, shared_});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", empty,
                                " is not a checkpoint directory (no "
                                "MANIFEST.jobgraph)\n"));

  r = RunTool({"flush", dirs_.Join("absent"), shared_});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            absl::StrCat("ckpt: ", dirs_.Join("absent"), " does not exist\n"));

  // A log that lists nothing: nothing to do.
  ASSERT_TRUE(CreateCommitLogIfMissing(local_, "leveldb").ok());
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("nothing to flush: ", local_,
                                " lists no committed epoch\n"));
  EXPECT_FALSE(*PathExists(shared_));

  Commit(local_, 1, 1);
  r = RunTool({"flush", local_, JoinPath(local_, ".")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", local_, " and ", local_,
                                "/. are the same directory; give the local "
                                "tier, then the shared directory\n"));

  r = RunTool({"flush", local_});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("ckpt: `flush` takes 2 arguments (LOCAL "
                                "SHARED), got 1\n"));
  EXPECT_THAT(r.err, HasSubstr(Usage()));
}

TEST_F(TierCommandsTest, UsageNamesTheNewCommandAndFlag) {
  EXPECT_THAT(Usage(), HasSubstr("  flush LOCAL SHARED [--epoch=N]\n"));
  EXPECT_THAT(Usage(),
              HasSubstr("  list DIR [--format=json] [--local=DIR[,DIR...]]\n"));
  Result r = RunTool({"list", shared_, "--bogus"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("ckpt: unknown flag --bogus for `list` (it "
                                "takes --db_type, --format) and, for local "
                                "tiers, --local\n"));
  r = RunTool({"list", shared_, "--local=,"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, StartsWith("ckpt: flag --local needs a value: "
                                "--local=DIR[,DIR...]\n"));
}

// --- list --local

// The shared directory holds epochs 0 to 2; the local tier holds epoch 2
// (the newest flushed) and epoch 3, not flushed yet.
class ListTiersTest : public TierCommandsTest {
 protected:
  void SetUp() override {
    for (int64_t epoch : {0, 1, 2}) Commit(shared_, epoch, epoch);
    Commit(local_, 2, 2);
    Commit(local_, 3, 3);
  }
};

TEST_F(ListTiersTest, TiersColumnSaysWhichTiersHoldEachEpoch) {
  Result r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string local_tier = absl::StrCat("local:", local_);
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("checkpoint ", shared_, " (leveldb, format version 1)"),
          "EPOCH STATE NODES BLOBS BYTES SAVE TIME TIERS",
          Row(shared_, 0, 0, "shared"), Row(shared_, 1, 1, "shared"),
          Row(shared_, 2, 2, absl::StrCat("shared,", local_tier)),
          Row(local_, 3, 3, local_tier),
          "4 committed epochs (newest 3, 1 only in a local tier), 0 "
          "uncommitted, 0 incomplete"));

  // Without --local, the list of the shared directory alone, as ever.
  r = RunTool({"list", shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("checkpoint ", shared_, " (leveldb, format version 1)"),
          "EPOCH STATE NODES BLOBS BYTES SAVE TIME", Row(shared_, 0, 0, ""),
          Row(shared_, 1, 1, ""), Row(shared_, 2, 2, ""),
          "3 committed epochs (newest 2), 0 uncommitted, 0 incomplete"));
}

TEST_F(ListTiersTest, JsonHasATiersArray) {
  Result r = RunTool(
      {"list", shared_, absl::StrCat("--local=", local_), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  auto row = [&](const std::string& dir, int64_t epoch,
                 const std::string& tiers) {
    return absl::StrCat(
        "{\"epoch\":", epoch,
        ",\"state\":\"committed\",\"nodes\":[\"trainer_0\",\"trainer_1\"],"
        "\"paths\":[",
        JsonQuote(CheckpointDbPath(dir, "trainer_0", epoch)), ",",
        JsonQuote(CheckpointDbPath(dir, "trainer_1", epoch)),
        "],\"blobs\":2,\"bytes\":", EpochBytes(dir, epoch),
        ",\"save_micros\":", 1500 + epoch,
        ",\"time_unix_micros\":", kCommitTime + epoch * 1000000, ",\"tiers\":[",
        tiers, "],\"problems\":[]}");
  };
  const std::string shared_tier =
      absl::StrCat("{\"tier\":\"shared\",\"dir\":", JsonQuote(shared_), "}");
  const std::string local_tier =
      absl::StrCat("{\"tier\":\"local\",\"dir\":", JsonQuote(local_), "}");
  EXPECT_EQ(
      r.out,
      absl::StrCat(
          "{\"dir\":", JsonQuote(shared_),
          ",\"commit_log\":\"ok\",\"format_version\":1,\"db_type\":"
          "\"leveldb\",\"epochs\":[",
          row(shared_, 0, shared_tier), ",", row(shared_, 1, shared_tier), ",",
          row(shared_, 2, absl::StrCat(shared_tier, ",", local_tier)), ",",
          row(local_, 3, local_tier),
          "],\"leftover_temporaries\":[],\"local_tiers\":[{\"dir\":",
          JsonQuote(local_),
          ",\"nodes\":[\"trainer_0\",\"trainer_1\"],\"ignored\":[]}]}\n"));
}

TEST_F(TierCommandsTest, ListShowsAHostsPartOfAJobOnSeveralHosts) {
  // Host hA holds trainer_0's databases of epoch 1 (flushed: the shared
  // directory has the same commit) and of epoch 2 (not flushed yet).
  Commit(shared_, 0, 0);
  Commit(shared_, 1, 1);
  CommitHostPart(local_, 1, 1, ReadCommitLog(shared_)->epoch(1).total_bytes(),
                 "hA");
  CommitHostPart(local_, 2, 2, 4321, "hA");
  const std::string part = absl::StrCat("local:", local_, "@hA[trainer_0]");
  Result r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[2], Row(shared_, 0, 0, "shared"));
  EXPECT_EQ(lines[3], Row(shared_, 1, 1, absl::StrCat("shared,", part)));
  // Its own row: the node it holds, its bytes, its commit.
  EXPECT_THAT(lines[4], StartsWith("2 committed trainer_0 1 "));
  EXPECT_THAT(lines[4],
              EndsWith(absl::StrCat(FormatUnixMicros(kCommitTime + 2 * 1000000),
                                    " ", part)));
  EXPECT_EQ(lines[5],
            "3 committed epochs (newest 2, 1 only in a local tier), 0 "
            "uncommitted, 0 incomplete");
  EXPECT_THAT(r.out, Not(HasSubstr("ignored")));

  // `ckpt flush` never copies one host's part into the shared directory.
  r = RunTool({"flush", local_, shared_, "--epoch=2"});
  EXPECT_EQ(r.code, kExitUsage) << r.out;
  EXPECT_EQ(r.err,
            absl::StrCat("ckpt: epoch 2 of ", local_,
                         " is one host's part of a job on several hosts (the "
                         "other nodes' databases are on other hosts): flushing "
                         "it alone would commit an incomplete epoch; the job's "
                         "own flush copies it; nothing is flushed\n"));
  EXPECT_THAT(LoggedEpochs(shared_), ElementsAre(0, 1));
}

TEST_F(TierCommandsTest, ListNamesTheEpochsOfAStaleLocalTier) {
  // This host committed epochs 7 to 9 locally and flushed epoch 7; the job
  // then went on from epoch 7 on another host, which committed 8 and 9.
  Commit(shared_, 7, 7);
  Commit(shared_, 8, 108);
  Commit(shared_, 9, 109);
  Commit(local_, 7, 7);
  Commit(local_, 8, 8);
  Commit(local_, 9, 9);
  const std::string ignored =
      "epochs 8, 9 ignored (the shared directory's newest epoch 9 is another "
      "commit)";
  Result r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("checkpoint ", shared_, " (leveldb, format version 1)"),
          "EPOCH STATE NODES BLOBS BYTES SAVE TIME TIERS",
          Row(shared_, 7, 7, absl::StrCat("shared,local:", local_)),
          Row(shared_, 8, 108, "shared"), Row(shared_, 9, 109, "shared"),
          "3 committed epochs (newest 9), 0 uncommitted, 0 incomplete",
          absl::StrCat("local tier ", local_, ": ", ignored)));
  r = RunTool(
      {"list", shared_, absl::StrCat("--local=", local_), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out,
              EndsWith(absl::StrCat(
                  "\"local_tiers\":[{\"dir\":", JsonQuote(local_),
                  ",\"nodes\":[\"trainer_0\",\"trainer_1\"],\"ignored\":[{"
                  "\"epochs\":[8,9],\"reason\":\"the shared directory's "
                  "newest epoch 9 is another commit\"}]}]}\n")));

  // flush takes the newest epoch that continues the shared history, which
  // is there already, and refuses to replace that history.
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("epoch 7 is already in ", shared_, "\n"));
  r = RunTool({"flush", local_, shared_, "--epoch=9"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: epoch 9 of ", local_,
                                " does not continue the history of ", shared_,
                                " (the shared directory's newest epoch 9 is "
                                "another commit): flushing it would rewrite "
                                "that history; nothing is flushed\n"));
  EXPECT_EQ(ReadCommitLog(shared_)->epoch(2).committed_unix_micros(),
            kCommitTime + 109 * 1000000);
}

TEST_F(TierCommandsTest, ALocalTierWithoutTheSharedNewestEpochIsIgnored) {
  Commit(shared_, 2, 2);
  Commit(local_, 5, 5);
  const std::string ignored =
      "epoch 5 ignored (the local tier does not hold the shared directory's "
      "newest epoch 2)";
  Result r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out),
              ElementsAre(absl::StrCat("checkpoint ", shared_,
                                       " (leveldb, format version 1)"),
                          "EPOCH STATE NODES BLOBS BYTES SAVE TIME TIERS",
                          Row(shared_, 2, 2, "shared"),
                          "1 committed epoch (newest 2), 0 uncommitted, 0 "
                          "incomplete",
                          absl::StrCat("local tier ", local_, ": ", ignored)));
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("nothing to flush from ", local_, ": ", ignored,
                                "\n"));
  EXPECT_THAT(LoggedEpochs(shared_), ElementsAre(2));
}

TEST_F(TierCommandsTest, ListRefusesALocalTierThatIsNotACheckpoint) {
  Commit(shared_, 0, 0);
  const std::string empty = dirs_.Join("empty");
  ASSERT_TRUE(CreateDir(empty).ok());
  ASSERT_TRUE(CreateCommitLogIfMissing(local_, "leveldb").ok());
  Result r = RunTool({"list", shared_, absl::StrCat("--local=", empty)});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err,
              StartsWith(absl::StrCat(
                  "ckpt: ", empty, " is not a jobgraph checkpoint directory")));
  // An empty local tier holds nothing.
  r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out), ElementsAre(absl::StrCat("checkpoint ", shared_,
                                                     " (leveldb, format "
                                                     "version 1)"),
                                        "EPOCH STATE NODES BLOBS BYTES SAVE "
                                        "TIME TIERS",
                                        Row(shared_, 0, 0, "shared"),
                                        "1 committed epoch (newest 0), 0 "
                                        "uncommitted, 0 incomplete"));
}

// --- A local tier written by a Checkpointer.

// Caffe2's checkpoint_test pipeline on two nodes, saved into a local tier
// and flushed to the shared directory: epochs 0 (after init) to 4.
TEST_F(TierCommandsTest, VerifyListAndFlushOnALocalTierOfAJob) {
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  testing::BuildCaffe2Pipeline(job, 1);
  {
    LocalSession session;
    Checkpointer checkpointer(
        {.directory = shared_, .local_directory = local_});
    JobRunner runner(job, &checkpointer);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    ASSERT_EQ(*epochs, 4);
  }
  // The local tier keeps its newest keep_local (2) epochs. The shared
  // directory has the newest, flushed at the end of the run, and those
  // that no newer epoch replaced while the flush was behind (flusher.h).
  ASSERT_THAT(LoggedEpochs(local_), ElementsAre(3, 4));
  const std::vector<int64_t> shared_epochs = LoggedEpochs(shared_);
  ASSERT_FALSE(shared_epochs.empty());
  ASSERT_EQ(shared_epochs.back(), 4);

  // verify: a local tier is a checkpoint directory like any other.
  auto ok = [&](int64_t epoch, const std::string& node) {
    const BlobIndex index = IndexOf(CheckpointDbPath(local_, node, epoch));
    return absl::StrCat("epoch ", epoch, " ", node, ": ok (", index.blob_size(),
                        " blobs, ", index.total_bytes(), " bytes)");
  };
  Result r = RunTool({"verify", local_});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(ok(3, "trainer_0"), ok(3, "trainer_1"), ok(4, "trainer_0"),
                  ok(4, "trainer_1"),
                  absl::StrCat("OK: verified 4 databases of 2 committed "
                               "epochs in ",
                               local_)));

  // list: every epoch of the shared directory, and epoch 3 also when only
  // the local tier holds it (it continues the shared history: a resume
  // counts it).
  r = RunTool({"list", shared_, absl::StrCat("--local=", local_)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  std::vector<int64_t> epochs = shared_epochs;
  const bool flushed_3 =
      std::find(epochs.begin(), epochs.end(), 3) != epochs.end();
  if (!flushed_3) {
    epochs.insert(std::find(epochs.begin(), epochs.end(), 4), 3);
  }
  ASSERT_EQ(lines.size(), epochs.size() + 3) << r.out;
  EXPECT_EQ(lines[1], "EPOCH STATE NODES BLOBS BYTES SAVE TIME TIERS");
  for (size_t i = 0; i < epochs.size(); ++i) {
    const int64_t epoch = epochs[i];
    const bool only_local = epoch == 3 && !flushed_3;
    int64_t blobs = 0;
    int64_t bytes = 0;
    for (const std::string& node : kNodes) {
      const BlobIndex index =
          IndexOf(CheckpointDbPath(only_local ? local_ : shared_, node, epoch));
      blobs += index.blob_size();
      bytes += index.total_bytes();
    }
    EXPECT_THAT(lines[2 + i], StartsWith(absl::StrCat(
                                  epoch, " committed trainer_0,trainer_1 ",
                                  blobs, " ", bytes, " ")));
    EXPECT_THAT(
        lines[2 + i],
        EndsWith(epoch < 3    ? std::string(" UTC shared")
                 : only_local ? absl::StrCat(" UTC local:", local_)
                              : absl::StrCat(" UTC shared,local:", local_)));
  }
  EXPECT_EQ(lines[2 + epochs.size()],
            absl::StrCat(epochs.size(), " committed epochs (newest 4",
                         flushed_3 ? "" : ", 1 only in a local tier",
                         "), 0 uncommitted, 0 incomplete"));

  // flush: the end of the run flushed the newest epoch.
  r = RunTool({"flush", local_, shared_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, absl::StrCat("epoch 4 is already in ", shared_, "\n"));

  // verify names damage in a local database.
  const std::string table = DamageTable(Local("trainer_1.4"));
  r = RunTool({"verify", local_});
  EXPECT_EQ(r.code, kExitProblem);
  const std::vector<std::string> damaged = Lines(r.out);
  ASSERT_EQ(damaged.size(), 5u) << r.out;
  EXPECT_EQ(damaged[2], ok(4, "trainer_0"));
  EXPECT_THAT(damaged[3], StartsWith("epoch 4 trainer_1: DAMAGED: "));
  EXPECT_THAT(damaged[3], HasSubstr(Local("trainer_1.4")));
  EXPECT_EQ(
      damaged[4],
      absl::StrCat("FAILED: 1 of 4 databases of 2 committed epochs in ", local_,
                   " failed (1 damaged, 0 missing, 0 "
                   "unreadable)"));
}

}  // namespace
}  // namespace ckpt
}  // namespace jobgraph

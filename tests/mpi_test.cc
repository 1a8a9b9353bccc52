// Jobs on Open MPI, started the way users start them: `mpirun -np N` on the
// example binaries and on tests/mpi_job (builder code with collectives).
// Results must equal the one-process (LocalSession) run, resumes must be
// exact from every epoch, a failure must be reported the same on every rank,
// and a rank killed with SIGKILL at any of its events must leave a directory
// that `ckpt verify` accepts and that resumes from exactly the newest
// committed epoch to the exact result.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/sanitizers.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const char kMpirun[] = "/usr/bin/mpirun";

std::string SumPipeline() { return RunfilesPath("examples/sum_pipeline"); }
std::string MpiJob() { return RunfilesPath("tests/mpi_job"); }
std::string Ckpt() { return RunfilesPath("tools/ckpt"); }
std::string LinearRegression() {
  return RunfilesPath("examples/linear_regression");
}

// mpirun as a user on this one machine runs it (root in CI, more ranks than
// cores).
std::vector<std::string> MpirunArgs(int ranks, const std::string& binary,
                                    const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--allow-run-as-root", "--oversubscribe",
                                  "-np", absl::StrCat(ranks), binary};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

// The environment of every mpirun here: OpenMpiTempEnv() and
// - under --config=asan, Open MPI's frames (no frame pointers) need the slow
//   unwinder for LeakSanitizer's suppressions of Open MPI's own allocations
//   (engine/mpi/mpi_session.cc); other builds ignore the variable.
// - Under --config=asan, LeakSanitizer does not scan threads' TLS in the
//   ranks: gcc 12's runtime reads a garbage dynamic-TLS entry of a rank's
//   main thread once Open MPI's plugins are loaded ("Tracer caught signal
//   11" at exit, in Bazel's PID namespace, depending on the binary's
//   layout: a change to the examples' flags alone brought it out). Leaks
//   are still found; only TLS is not a root.
std::vector<std::string> MpiEnv(std::vector<std::string> env = {}) {
  for (std::string& e : ::jobgraph::testing::OpenMpiTempEnv()) {
    env.push_back(std::move(e));
  }
  env.push_back("ASAN_OPTIONS=fast_unwind_on_malloc=0");
  env.push_back("LSAN_OPTIONS=use_tls=0");
  return env;
}

ChildRun Mpirun(int ranks, const std::string& binary,
                const std::vector<std::string>& args,
                const std::vector<std::string>& env = {}) {
  return RunBinary(kMpirun, MpirunArgs(ranks, binary, args), MpiEnv(env));
}

// Every file under `dir` (relative path -> contents).
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    files[std::filesystem::relative(entry.path(), dir).string()] = text.str();
  }
  return files;
}

// The result lines (stdout) of a run, which must have exited 0.
std::vector<std::string> Output(const ChildRun& run) {
  EXPECT_TRUE(run.exited_ok()) << run.Describe();
  return run.lines;
}

// How often `needle` occurs in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// "epoch:total_bytes" of every committed epoch of `dir`.
std::vector<std::string> CommittedBytes(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  EXPECT_TRUE(log.ok()) << log.status();
  std::vector<std::string> bytes;
  for (const CommittedEpoch& e :
       log.ok() ? log->epoch() : CommitLog().epoch()) {
    bytes.push_back(absl::StrCat(e.epoch(), ":", e.total_bytes()));
  }
  return bytes;
}

TEST(MpiTest, SumPipelineEqualsOneProcessOn1To4Ranks) {
  const std::string local_dir = NewTempDir("sum_local");
  const std::string local =
      RunBinary(SumPipeline(), {"--nodes=4", "--session=local",
                                "--checkpoint_dir=" + local_dir})
          .Result()
          .value_or("(none)");
  EXPECT_EQ(local, "result: epochs=4 totals=145,145,145,145");
  // The same databases, so the same bytes: the ranks' sum reached rank 0.
  const std::vector<std::string> local_bytes = CommittedBytes(local_dir);
  ASSERT_EQ(local_bytes.size(), 5u);
  for (int ranks : {1, 2, 4}) {
    const std::string dir = NewTempDir(absl::StrCat("sum", ranks));
    ChildRun run =
        Mpirun(ranks, SumPipeline(), {"--nodes=4", "--checkpoint_dir=" + dir});
    EXPECT_EQ(Output(run), std::vector<std::string>{local}) << ranks;
    // Only rank 0 prints: exactly one result line.
    ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
    EXPECT_EQ(CommittedBytes(dir), local_bytes) << ranks;
  }
}

// The files of the databases under `dir` (the commit log and lock files
// left out), relative path -> contents.
std::map<std::string, std::string> DatabaseFiles(const std::string& dir) {
  std::map<std::string, std::string> files = Files(dir);
  for (auto it = files.begin(); it != files.end();) {
    const bool database = it->first.find('/') != std::string::npos;
    it = database ? std::next(it) : files.erase(it);
  }
  return files;
}

// The commit log of `dir` with the times of its entries cleared.
std::string CommitLogWithoutTimes(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  EXPECT_TRUE(log.ok()) << log.status();
  if (!log.ok()) return "";
  for (CommittedEpoch& e : *log->mutable_epoch()) {
    e.clear_committed_unix_micros();
    e.clear_save_micros();
  }
  return log->DebugString();
}

// A synchronous save is the asynchronous pipeline run inline: the same job
// saved either way writes the same databases, byte for byte, and the same
// commit log but for its times, in one process and on 2 and 4 ranks.
TEST(MpiTest, SynchronousAndAsynchronousSavesWriteTheSameBytes) {
  const std::vector<std::string> env = {"SOURCE_DATE_EPOCH=1700000000"};
  for (int ranks : {0, 2, 4}) {
    SCOPED_TRACE(ranks == 0 ? "one process" : absl::StrCat(ranks, " ranks"));
    std::map<std::string, std::string> databases[2];
    std::string logs[2];
    for (int async = 0; async < 2; ++async) {
      const std::string dir = NewTempDir(absl::StrCat("same", ranks, async));
      std::vector<std::string> args = {
          "--nodes=4", "--checkpoint_dir=" + dir,
          async ? "--async_checkpoint" : "--async_checkpoint=false"};
      ChildRun run;
      if (ranks == 0) {
        args.push_back("--session=local");
        run = RunBinary(SumPipeline(), args, env);
      } else {
        run = Mpirun(ranks, SumPipeline(), args, env);
      }
      EXPECT_EQ(Output(run), std::vector<std::string>{
                                 "result: epochs=4 totals=145,145,145,145"});
      databases[async] = DatabaseFiles(dir);
      logs[async] = CommitLogWithoutTimes(dir);
    }
    // 4 nodes x 5 epochs, each database some files.
    std::set<std::string> dbs;
    for (const auto& [path, bytes] : databases[0]) {
      dbs.insert(path.substr(0, path.find('/')));
    }
    EXPECT_EQ(dbs.size(), 20u);
    EXPECT_TRUE(databases[0] == databases[1]);
    EXPECT_EQ(logs[0], logs[1]);
    EXPECT_EQ(Count(logs[0], "epoch {"), 5u);
  }
}

TEST(MpiTest, MoreNodesThanRanks) {
  const std::string dir = NewTempDir("six_on_three");
  ChildRun run =
      Mpirun(3, SumPipeline(), {"--nodes=6", "--checkpoint_dir=" + dir});
  EXPECT_EQ(Output(run),
            std::vector<std::string>{
                "result: epochs=4 totals=145,145,145,145,145,145"});
  // Every node's databases, written by the rank that hosts it.
  for (int node = 0; node < 6; ++node) {
    for (int epoch = 0; epoch <= 4; ++epoch) {
      EXPECT_TRUE(std::ifstream(absl::StrCat(dir, "/trainer_", node, ".", epoch,
                                             "/CURRENT"))
                      .good())
          << node << "." << epoch;
    }
  }
}

TEST(MpiTest, MoreRanksThanNodesIsAnErrorNamingBoth) {
  ChildRun run = Mpirun(4, SumPipeline(), {"--nodes=2"});
  EXPECT_EQ(run.exit_code(), 2) << run.Describe();
  EXPECT_THAT(run.log, HasSubstr("the job has 2 node(s) but runs on 4 MPI "
                                 "ranks"));
}

// An explicit MpiSessionOptions::node_ranks places each node on exactly the
// rank it names (HostsNode and RankOf agree on every rank), the job's
// results are those of one process, and each way the map can be wrong is
// refused with its own message.
TEST(MpiTest, ExplicitNodeRanksPlaceEveryNodeWhereTheMapSays) {
  const std::vector<std::string> local =
      Output(RunBinary(MpiJob(), {"--nodes=3", "--session=local"}));
  ASSERT_EQ(local.size(), 4u);
  ChildRun run =
      Mpirun(2, MpiJob(),
             {"--nodes=3", "--node_ranks=trainer_0:1,trainer_1:0,trainer_2:1"});
  // The ranks' placement lines interleave in any order; the rest is rank 0's.
  std::vector<std::string> placement;
  std::vector<std::string> results;
  for (const std::string& line : Output(run)) {
    (absl::StartsWith(line, "rank ") || absl::StartsWith(line, "placement ")
         ? placement
         : results)
        .push_back(line);
  }
  std::sort(placement.begin(), placement.end());
  EXPECT_EQ(placement,
            (std::vector<std::string>{
                "placement trainer_0=1 trainer_1=0 trainer_2=1",
                "rank 0 hosts trainer_1", "rank 1 hosts trainer_0,trainer_2"}))
      << run.Describe();
  EXPECT_EQ(results, local) << run.Describe();

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"trainer_0:0,trainer_1:1,trainer_2:1,ghost:0",
       "node_ranks names node 'ghost', which the job does not have"},
      {"trainer_0:0,trainer_1:1,trainer_2:2",
       "node_ranks places node 'trainer_2' on rank 2, but the MPI job has "
       "ranks 0 to 1"},
      {"trainer_0:0,trainer_1:-1,trainer_2:1",
       "node_ranks places node 'trainer_1' on rank -1, but the MPI job has "
       "ranks 0 to 1"},
      {"trainer_0:0,trainer_1:1",
       "node_ranks places no rank for node 'trainer_2'"},
      {"trainer_0:0,trainer_1:0,trainer_2:0",
       "node_ranks gives rank 1 no node; the job has 3 node(s) on 2 MPI "
       "ranks"},
  };
  for (const auto& [map, message] : bad) {
    ChildRun refused =
        Mpirun(2, MpiJob(), {"--nodes=3", "--node_ranks=" + map});
    EXPECT_EQ(refused.exit_code(), 2) << map << "\n" << refused.Describe();
    EXPECT_THAT(refused.log, HasSubstr(message)) << map;
    EXPECT_THAT(refused.lines, Not(Contains(HasSubstr("result:")))) << map;
  }
}

TEST(MpiTest, ResumeFromEveryEpochOn4Ranks) {
  const std::string dir = NewTempDir("resume4");
  ASSERT_EQ(
      Output(
          Mpirun(4, SumPipeline(), {"--nodes=4", "--checkpoint_dir=" + dir})),
      std::vector<std::string>{"result: epochs=4 totals=145,145,145,145"});
  for (int epoch = 0; epoch <= 4; ++epoch) {
    // Caffe2's runner runs at least one epoch after a resume, so resuming
    // from the last epoch ends at epoch 5 with the same totals.
    const std::string expected = absl::StrCat(
        "result: epochs=", epoch == 4 ? 5 : 4, " totals=145,145,145,145");
    ChildRun run = Mpirun(4, SumPipeline(),
                          {"--nodes=4", "--checkpoint_dir=" + dir,
                           absl::StrCat("--resume_from_epoch=", epoch)});
    EXPECT_EQ(Output(run), std::vector<std::string>{expected}) << epoch;
    EXPECT_THAT(run.log, HasSubstr(absl::StrCat("resumed from epoch ", epoch)));
  }
}

// "epoch[referenced epochs]" of every committed epoch of `dir`.
std::string References(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (!log.ok()) return log.status().ToString();
  std::vector<std::string> parts;
  for (const CommittedEpoch& e : log->epoch()) {
    parts.push_back(absl::StrCat(
        e.epoch(), "[", absl::StrJoin(e.referenced_epoch(), ","), "]"));
  }
  return absl::StrJoin(parts, " ");
}

// Incremental saves on 4 ranks, synchronous and in the background: each
// rank writes its nodes' changed blobs and refers to the dataset its node
// made at init; the commit log lists what every epoch refers to (the ranks'
// references summed at the agreement), `ckpt verify` follows them, and
// every resume is exact.
TEST(MpiTest, IncrementalSavesResumeFromEveryEpochOn4Ranks) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    const std::string dir = NewTempDir(absl::StrCat("incremental", async));
    const std::vector<std::string> args = {
        "--nodes=4", "--checkpoint_dir=" + dir, "--incremental_checkpoint",
        "--full_every=3",
        async ? "--async_checkpoint" : "--async_checkpoint=false"};
    ASSERT_EQ(
        Output(Mpirun(4, SumPipeline(), args)),
        std::vector<std::string>{"result: epochs=4 totals=145,145,145,145"});
    // Synchronous: each save refers to the one before, a full save every
    // third epoch. In the background a save's base is the newest one known
    // committed when it is snapshotted, two epochs back (ranks learn of a
    // commit at the next boundary): 1 is full, 2 refers to 0, 3 to 1.
    EXPECT_EQ(References(dir),
              async ? "0[] 1[] 2[0] 3[1] 4[]" : "0[] 1[0] 2[0] 3[] 4[3]");
    ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
    for (int epoch = 0; epoch <= 4; ++epoch) {
      std::vector<std::string> resume = args;
      resume.push_back(absl::StrCat("--resume_from_epoch=", epoch));
      ChildRun run = Mpirun(4, SumPipeline(), resume);
      EXPECT_EQ(Output(run), std::vector<std::string>{absl::StrCat(
                                 "result: epochs=", epoch == 4 ? 5 : 4,
                                 " totals=145,145,145,145")})
          << epoch;
      EXPECT_THAT(run.log,
                  HasSubstr(absl::StrCat("resumed from epoch ", epoch)));
      verify = RunBinary(Ckpt(), {"verify", dir});
      EXPECT_TRUE(verify.exited_ok()) << epoch << ": " << verify.Describe();
    }
  }
}

TEST(MpiTest, CollectivesAreBitIdenticalToOneProcess) {
  const std::vector<std::string> local =
      Output(RunBinary(MpiJob(), {"--nodes=4", "--session=local"}));
  ASSERT_EQ(local.size(), 5u);
  EXPECT_EQ(local[0], "node trainer_0 x=3df44773,3eac21b8,b0f8618c c=7");
  EXPECT_EQ(local[4], "result: epochs=3");
  for (int ranks : {1, 2, 4}) {
    EXPECT_EQ(Output(Mpirun(ranks, MpiJob(), {"--nodes=4"})), local) << ranks;
  }
  // With checkpoints, resumed from every epoch.
  const std::string dir = NewTempDir("collectives");
  EXPECT_EQ(
      Output(Mpirun(2, MpiJob(), {"--nodes=4", "--checkpoint_dir=" + dir})),
      local);
  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(Output(Mpirun(4, MpiJob(),
                            {"--nodes=4", "--checkpoint_dir=" + dir,
                             absl::StrCat("--resume_from_epoch=", epoch)})),
              local)
        << epoch;
  }
}

TEST(MpiTest, AFailingOpGivesTheSameErrorOnEveryRank) {
  ChildRun run = Mpirun(4, MpiJob(), {"--nodes=4", "--fail_node=trainer_2"});
  EXPECT_EQ(run.exit_code(), 1) << run.Describe();
  const std::string error =
      "error: init group: rank 2: node 'trainer_2': net "
      "'init/trainer_2/task': op AlwaysFail( -> ): deliberate failure";
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(run.log, HasSubstr(absl::StrCat("rank ", rank, " ", error)))
        << run.log;
  }
}

// RunHosted (what a save runs) runs only this rank's tasks and does not
// agree on the outcome, so a group with collectives, which needs every rank,
// is refused on every rank before anything runs.
TEST(MpiTest, RunHostedRunsOwnTasksAndRefusesCollectives) {
  ChildRun run =
      Mpirun(2, MpiJob(),
             {"--nodes=2", "--fail_node=trainer_1", "--check_run_hosted"});
  const std::vector<std::string> lines = Output(run);
  const std::string refused =
      "INVALID_ARGUMENT: group 'epoch' uses collective operators, so every "
      "rank must run it: use Run";
  EXPECT_THAT(
      lines,
      ::testing::UnorderedElementsAre(
          "rank 0 init: OK",
          "rank 1 init: INTERNAL: node 'trainer_1': net "
          "'init/trainer_1/task': op AlwaysFail( -> ): deliberate failure",
          "rank 0 epoch: " + refused, "rank 1 epoch: " + refused))
      << run.Describe();
}

// After a run in which a file was in the way of trainer_1's database of
// epoch 2: every other epoch is committed, and the file is as it was.
// The commit of every epoch (0 to 4) of `run` failed at the failpoint
// commit.before_commit_log, reported once on each of its `ranks` ranks (`how`
// follows the epoch: "" or " (in the background)"), and `dir` lists none.
void ExpectEveryCommitFailed(const ChildRun& run, const std::string& dir,
                             size_t ranks, const std::string& how) {
  for (int epoch = 0; epoch <= 4; ++epoch) {
    EXPECT_EQ(Count(run.log, absl::StrCat("unable to write checkpoint for "
                                          "epoch ",
                                          epoch, how,
                                          ": failpoint "
                                          "commit.before_commit_log")),
              ranks)
        << "epoch " << epoch << ": " << run.log;
  }
  EXPECT_EQ(Count(run.log, "unable to write checkpoint"), 5 * ranks) << run.log;
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(CommittedEpochList(*log), "none");
}

// No temporary file of a commit-log write or of a database is in `dir`.
void ExpectNoTemporaryFiles(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(absl::StrContains(name, ".tmp-")) << name;
  }
}

void ExpectEpoch2MissingAndFileKept(const std::string& dir,
                                    const std::string& in_the_way) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(CommittedEpochList(*log), "0, 1, 3, 4");
  std::ifstream kept(in_the_way);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "not a database");
}

// One rank's save fails (a file is in the way of trainer_1's database of
// epoch 2), after the run's first save, so on the path where each rank's
// failure reaches the others only through the save's one agreement: every
// rank reports the same failure, the epoch is committed on none, and the
// job goes on to the exact end.
TEST(MpiTest, ASaveFailingOnOneRankIsTheSameFailureOnEveryRank) {
  const std::string dir = NewTempDir("save_fails_on_rank_1");
  const std::string in_the_way = dir + "/trainer_1.2";
  { std::ofstream(in_the_way) << "not a database"; }
  ChildRun run =
      Mpirun(2, SumPipeline(), {"--nodes=2", "--checkpoint_dir=" + dir});
  EXPECT_EQ(Output(run),
            std::vector<std::string>{"result: epochs=4 totals=145,145"});
  // Rank 1 hosts trainer_1; both ranks log its failure, named once each.
  EXPECT_EQ(Count(run.log,
                  "unable to write checkpoint for epoch 2: rank 1: "
                  "node 'trainer_1': "),
            2u)
      << run.log;
  EXPECT_THAT(run.log, HasSubstr(in_the_way)) << run.log;
  ExpectEpoch2MissingAndFileKept(dir, in_the_way);
  // Rank 0 had prepared the commit of epoch 2 before its own save; the
  // commit not made left no file behind.
  ExpectNoTemporaryFiles(dir);
}

// A checkpointed node that no rank runs would be committed without its
// database: the start is refused on every rank, naming the node, and
// nothing is written.
TEST(MpiTest, ACheckpointedNodeNoRankRunsIsRefusedOnEveryRank) {
  const std::string dir = NewTempDir("ghost");
  ChildRun run = Mpirun(2, MpiJob(),
                        {"--nodes=2", "--checkpoint_dir=" + dir,
                         "--checkpoint_extra_node=ghost"});
  EXPECT_NE(run.exit_code(), 0) << run.Describe();
  for (int rank : {0, 1}) {
    EXPECT_THAT(run.log,
                HasSubstr(absl::StrCat(
                    "rank ", rank,
                    " error: cannot checkpoint node(s) 'ghost': no rank of the "
                    "session runs them; checkpoint only the job's nodes")))
        << run.log;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/MANIFEST.jobgraph"));
}

// Rank 0's commit-log write fails for every epoch, on the synchronous path
// (rank 0 prepares the write before its save, and its outcome reaches the
// ranks in one broadcast): every rank reports the same failure for every
// epoch, nothing is committed, nothing temporary is left, and the job still
// ends with the exact result.
TEST(MpiTest, ACommitFailingOnRankZeroIsTheSameFailureOnEveryRank) {
  const std::string dir = NewTempDir("commit_fails");
  ChildRun run =
      Mpirun(4, SumPipeline(), {"--nodes=4", "--checkpoint_dir=" + dir},
             {"JOBGRAPH_FAILPOINT=commit.before_commit_log:error"});
  EXPECT_EQ(Output(run), std::vector<std::string>{
                             "result: epochs=4 totals=145,145,145,145"});
  ExpectEveryCommitFailed(run, dir, 4, "");
  ExpectNoTemporaryFiles(dir);
}

// Asynchronous saves on several ranks: each rank writes its databases on its
// own thread, the ranks agree at the next save, rank 0 commits on its thread.
// Every epoch ends up committed, and the directory resumes.
TEST(MpiTest, AsyncSavesOnRanksCommitEveryEpochAndResume) {
  for (int ranks : {2, 4}) {
    const std::string dir = NewTempDir(absl::StrCat("async", ranks));
    ChildRun run =
        Mpirun(ranks, SumPipeline(),
               {"--nodes=4", "--checkpoint_dir=" + dir, "--async_checkpoint"});
    EXPECT_EQ(
        Output(run),
        std::vector<std::string>{"result: epochs=4 totals=145,145,145,145"})
        << ranks;
    // Rank 0 logs each commit once (other ranks log warnings and errors
    // only).
    for (int epoch = 0; epoch <= 4; ++epoch) {
      EXPECT_EQ(Count(run.log, absl::StrCat("epoch ", epoch,
                                            ": background checkpoint "
                                            "committed in ")),
                1u)
          << ranks << " ranks, epoch " << epoch << ": " << run.log;
    }
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(CommittedEpochList(*log), "0, 1, 2, 3, 4") << ranks;
    ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
    ChildRun resumed =
        Mpirun(ranks, SumPipeline(),
               {"--nodes=4", "--checkpoint_dir=" + dir, "--async_checkpoint",
                "--resume_from_epoch=latest"});
    EXPECT_EQ(
        Output(resumed),
        std::vector<std::string>{"result: epochs=5 totals=145,145,145,145"})
        << ranks;
    EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 4"));
    // From an older epoch: the first save re-saves an epoch the log lists
    // (the ranks prepare together), the later ones drop the abandoned run's.
    ChildRun older = Mpirun(ranks, SumPipeline(),
                            {"--nodes=4", "--checkpoint_dir=" + dir,
                             "--async_checkpoint", "--resume_from_epoch=1"});
    EXPECT_EQ(
        Output(older),
        std::vector<std::string>{"result: epochs=4 totals=145,145,145,145"})
        << ranks;
    log = ReadCommitLog(dir);
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(CommittedEpochList(*log), "0, 1, 2, 3, 4") << ranks;
  }
}

// As ASaveFailingOnOneRankIsTheSameFailureOnEveryRank, with the databases
// written in the background: the failure reaches every rank at the next
// save's agreement.
TEST(MpiTest, AnAsyncSaveFailingOnOneRankIsTheSameFailureOnEveryRank) {
  const std::string dir = NewTempDir("async_save_fails_on_rank_1");
  const std::string in_the_way = dir + "/trainer_1.2";
  { std::ofstream(in_the_way) << "not a database"; }
  ChildRun run =
      Mpirun(2, SumPipeline(),
             {"--nodes=2", "--checkpoint_dir=" + dir, "--async_checkpoint"});
  EXPECT_EQ(Output(run),
            std::vector<std::string>{"result: epochs=4 totals=145,145"});
  EXPECT_EQ(Count(run.log,
                  "unable to write checkpoint for epoch 2 (in the "
                  "background): rank 1: node 'trainer_1': saving checkpoint " +
                      in_the_way + ": "),
            2u)
      << run.log;
  EXPECT_EQ(Count(run.log, "unable to write checkpoint"), 2u) << run.log;
  ExpectEpoch2MissingAndFileKept(dir, in_the_way);
}

// Rank 0's commit-log write fails for every epoch: the commits that ran on
// its thread (epochs 0 to 3) and the last one, made when the run ends, are
// each reported as the same failure on every rank, and the job still ends
// with the exact result.
TEST(MpiTest, AnAsyncCommitFailingOnRankZeroIsTheSameFailureOnEveryRank) {
  const std::string dir = NewTempDir("async_commit_fails");
  ChildRun run =
      Mpirun(2, SumPipeline(),
             {"--nodes=2", "--checkpoint_dir=" + dir, "--async_checkpoint"},
             {"JOBGRAPH_FAILPOINT=commit.before_commit_log:error"});
  EXPECT_EQ(Output(run),
            std::vector<std::string>{"result: epochs=4 totals=145,145"});
  ExpectEveryCommitFailed(run, dir, 2, " (in the background)");
}

TEST(MpiTest, AFailureInAGroupWithCollectivesAbortsTheJob) {
  ChildRun run = Mpirun(
      4, MpiJob(), {"--nodes=4", "--fail_node=trainer_2", "--fail_in_epoch"});
  EXPECT_NE(run.exit_code(), 0) << run.Describe();
  EXPECT_THAT(run.log,
              HasSubstr("rank 2: node 'trainer_2': net 'epoch/trainer_2/task': "
                        "op AlwaysFail( -> ): deliberate failure -- the group "
                        "uses collective operators"));
}

// An event line of mpi_job --event_fifo_dir:
// "event rank=<r> pid=<pid> node=<node> group=<init|epoch>".
struct RankEvent {
  int rank = -1;
  pid_t pid = 0;
  std::string group;
};

std::optional<RankEvent> ParseEvent(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, "event ")) return std::nullopt;
  RankEvent event;
  for (absl::string_view field : absl::StrSplit(line, ' ')) {
    int number = 0;
    if (absl::ConsumePrefix(&field, "rank=")) {
      if (!absl::SimpleAtoi(field, &event.rank)) return std::nullopt;
    } else if (absl::ConsumePrefix(&field, "pid=")) {
      if (!absl::SimpleAtoi(field, &number)) return std::nullopt;
      event.pid = number;
    } else if (absl::ConsumePrefix(&field, "group=")) {
      event.group = std::string(field);
    }
  }
  if (event.rank < 0 || event.pid <= 0) return std::nullopt;
  return event;
}

// The epoch a line of rank 0's log reports committed, if it does: the
// epoch line of a synchronous save ("epoch N: ..., checkpoint 3.1 ms 291 B",
// logged once the commit is done and every rank knows it), or the report of
// a background one ("epoch N: background checkpoint committed in ...").
std::optional<int64_t> CommitLogged(absl::string_view line) {
  const size_t at = line.find("] epoch ");
  if (at == absl::string_view::npos) return std::nullopt;
  line.remove_prefix(at + strlen("] epoch "));
  const size_t digits = line.find_first_not_of("0123456789");
  int64_t epoch = 0;
  if (digits == 0 || digits == absl::string_view::npos ||
      !absl::SimpleAtoi(line.substr(0, digits), &epoch)) {
    return std::nullopt;
  }
  line.remove_prefix(digits);
  if (absl::StartsWith(line, ": background checkpoint committed in ")) {
    return epoch;
  }
  const bool epoch_line =
      absl::StartsWith(line, ": ") || absl::StartsWith(line, " (init): ");
  if (epoch_line && absl::StrContains(line, "checkpoint ") &&
      !absl::StrContains(line, "(snapshot") &&
      !absl::StrContains(line, "FAILED")) {
    return epoch;
  }
  return std::nullopt;
}

// The newest epoch the commit log of `dir` lists (none without a log).
std::optional<int64_t> NewestCommitted(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (absl::IsNotFound(log.status())) return std::nullopt;
  EXPECT_TRUE(log.ok()) << log.status();
  if (!log.ok() || log->epoch_size() == 0) return std::nullopt;
  return log->epoch(log->epoch_size() - 1).epoch();
}

std::string EpochText(std::optional<int64_t> epoch) {
  return epoch.has_value() ? absl::StrCat(*epoch) : "none";
}

// One rank of mpi_job (4 ranks, 4 nodes, 4 epochs) is SIGKILLed at one of
// its own events, chosen at random: the end of its init net or the start
// of an epoch. Every rank waits at each of its events until the test
// answers (mpi_job --event_fifo_dir); the test answers all but the chosen
// one, and kills the rank that waits there by its pid, so the kill lands in
// a running rank at a known point:
//  - synchronous saves: a rank starts epoch e only after every rank learned
//    that epoch e-1 was committed, and epoch e cannot be committed without
//    this rank's write: the newest committed epoch is exactly e-1 (none
//    for a kill in init). The kill also waits, the rank still waiting,
//    until rank 0 has logged that commit, so it is also the newest commit
//    the job logged before the kill.
//  - background saves: at the start of epoch e, the write of e-1 is not
//    agreed on (that needs every rank at the next boundary), the commit of
//    e-2 may be running on rank 0's save thread, and e-3 is committed: the
//    newest committed epoch is e-3 or e-2, which the commit log, read after
//    the kill, tells.
// The whole job must then end with a failure, `ckpt verify` accept the
// directory, and a resume from latest load exactly the newest committed
// epoch and end with the uninterrupted run's results, bit for bit.
TEST(MpiTest, SigkillOfOneRankAtRandomEventsThenResumeLatest) {
  constexpr int kRanks = 4;
  constexpr int kEpochs = 4;
  constexpr int kTrials = 10;
  std::mt19937 random(
      TestSeed(20261124, "SigkillOfOneRankAtRandomEventsThenResumeLatest"));
  const std::vector<std::string> job = {absl::StrCat("--nodes=", kRanks),
                                        absl::StrCat("--epochs=", kEpochs)};
  std::vector<std::string> local = job;
  local.push_back("--session=local");
  const std::vector<std::string> uninterrupted =
      Output(RunBinary(MpiJob(), local));
  ASSERT_EQ(uninterrupted.size(), kRanks + 1u);
  ASSERT_EQ(uninterrupted.back(), absl::StrCat("result: epochs=", kEpochs));
  int landed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string dir = NewTempDir(absl::StrCat("kill", trial));
    const int victim = static_cast<int>(random() % kRanks);
    // Each rank's events: init, then one per epoch.
    const int at_event = 1 + static_cast<int>(random() % (1 + kEpochs));
    const int64_t epoch = at_event - 1;  // where the victim is (0: init)
    // Every other trial saves in the background: a kill then may land while
    // a rank writes, or while rank 0 commits on its thread. Half of the
    // trials save incrementally: a kill may then leave an epoch whose
    // databases refer to others.
    const bool async = trial % 2 == 1;
    std::vector<std::string> args = job;
    args.push_back("--checkpoint_dir=" + dir);
    args.push_back(async ? "--async_checkpoint" : "--async_checkpoint=false");
    args.push_back(absl::StrCat("--incremental_checkpoint=",
                                trial % 4 >= 2 ? "true" : "false"));
    args.push_back("--full_every=2");
    const std::string trace = absl::StrCat(
        "trial ", trial, ": rank ", victim, " killed at its event ", at_event,
        " (", epoch == 0 ? "init" : absl::StrCat("epoch ", epoch), ") ",
        absl::StrJoin(args, " "));
    SCOPED_TRACE(trace);

    // The FIFOs the ranks wait on; the test holds both ends of each.
    const std::string fifo_dir = NewTempDir(absl::StrCat("events", trial));
    std::vector<int> acks;
    for (int rank = 0; rank < kRanks; ++rank) {
      const std::string fifo = absl::StrCat(fifo_dir, "/ack.", rank);
      ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
      acks.push_back(::open(fifo.c_str(), O_RDWR | O_CLOEXEC));
      ASSERT_GE(acks.back(), 0) << std::strerror(errno);
    }
    std::vector<std::string> run_args = args;
    run_args.push_back("--event_fifo_dir=" + fifo_dir);

    const std::optional<int64_t> sync_expected =
        epoch >= 1 ? std::optional<int64_t>(epoch - 1) : std::nullopt;
    int victim_events = 0;
    pid_t victim_pid = 0;
    bool waiting = false;  // the victim waits at the chosen event
    bool sent = false;
    bool alive = false;
    std::optional<int64_t> logged;  // the newest commit rank 0 logged
    std::optional<int64_t> logged_at_kill;
    ChildRun run = RunBinaryWatched(
        kMpirun, MpirunArgs(kRanks, MpiJob(), run_args),
        {.extra_env = MpiEnv()},
        [&](WatchedChild& mpirun, const std::string& line, bool from_stderr) {
          if (from_stderr) {
            if (std::optional<int64_t> e = CommitLogged(line)) {
              logged = std::max(logged.value_or(-1), *e);
            }
          } else if (std::optional<RankEvent> event = ParseEvent(line)) {
            if (event->rank == victim && !sent && ++victim_events == at_event) {
              waiting = true;
              victim_pid = event->pid;
            } else if (event->rank >= 0 && event->rank < kRanks) {
              CHECK_EQ(::write(acks[event->rank], "x", 1), 1);
            }
          }
          if (!waiting || sent) return;
          if (!async && sync_expected.has_value() &&
              logged.value_or(-1) < *sync_expected) {
            return;  // rank 0 has not logged the commit yet
          }
          sent = true;
          logged_at_kill = logged;
          const std::vector<pid_t> pids = RankPids(mpirun.pid());
          EXPECT_TRUE(static_cast<size_t>(victim) < pids.size() &&
                      pids[victim] == victim_pid)
              << "rank " << victim << " is not pid " << victim_pid;
          // The rank waits for the test: alive, not a zombie.
          const char state = ProcessState(victim_pid);
          alive = state != 0 && state != 'Z' && state != 'X' &&
                  ::kill(victim_pid, SIGKILL) == 0;
        });
    for (int fd : acks) ::close(fd);
    landed += alive;
    ASSERT_TRUE(sent) << "the chosen event did not come: " << run.Describe();
    EXPECT_TRUE(alive) << "rank " << victim << " (pid " << victim_pid
                       << ") was not running when killed";
    // mpirun ends the whole job, with a failure.
    EXPECT_TRUE(WIFEXITED(run.wait_status) && run.exit_code() != 0)
        << run.Describe();
    EXPECT_FALSE(run.Result().has_value()) << run.Describe();
    // (Open MPI names the pid as 0.)
    EXPECT_THAT(run.log,
                HasSubstr(absl::StrCat("mpirun noticed that process rank ",
                                       victim, " with PID ")))
        << run.Describe();
    EXPECT_THAT(run.log, HasSubstr("exited on signal 9 (Killed)"))
        << run.Describe();

    // The newest committed epoch, exactly.
    const std::optional<int64_t> newest = NewestCommitted(dir);
    if (!async) {
      EXPECT_EQ(EpochText(newest), EpochText(sync_expected));
      EXPECT_EQ(EpochText(logged_at_kill), EpochText(sync_expected));
    } else {
      std::set<std::string> possible = {
          EpochText(epoch >= 2 ? std::optional<int64_t>(epoch - 2)
                               : std::nullopt),
          EpochText(epoch >= 3 ? std::optional<int64_t>(epoch - 3)
                               : std::nullopt)};
      EXPECT_THAT(possible, ::testing::Contains(EpochText(newest)));
      // What rank 0 logged as committed is.
      EXPECT_LE(logged_at_kill.value_or(-1), newest.value_or(-1));
    }
    LOG(INFO) << trace << ": newest committed epoch " << EpochText(newest)
              << (alive ? "" : " (the kill did not land)");
    if (newest.has_value()) {
      ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
      EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
    }

    std::vector<std::string> resume = args;
    resume.push_back("--resume_from_epoch=latest");
    ChildRun resumed = Mpirun(kRanks, MpiJob(), resume);
    EXPECT_EQ(Output(resumed), uninterrupted) << resumed.Describe();
    if (newest.has_value()) {
      EXPECT_THAT(resumed.log,
                  HasSubstr(absl::StrCat("resumed from epoch ", *newest, " of ",
                                         dir, "\n")));
    } else {
      EXPECT_THAT(resumed.log, Not(HasSubstr("resumed from epoch")));
    }
    ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << "resumed: " << verify.Describe();
  }
  // Every kill landed in a running rank (it waited for the test).
  std::printf(
      "SigkillOfOneRankAtRandomEventsThenResumeLatest: interrupted "
      "%d of %d runs\n",
      landed, kTrials);
  std::fflush(stdout);
  EXPECT_EQ(landed, kTrials);
}

TEST(MpiTest, LinearRegressionDataParallelModelIsByteIdentical) {
  // The model database records its creation time; a fixed one makes two
  // saves of the same blobs byte-identical.
  const std::vector<std::string> env = {"SOURCE_DATE_EPOCH=1700000000"};
  for (int nodes : {2, 4}) {
    const std::string dir = NewTempDir(absl::StrCat("lr", nodes));
    const std::string n = absl::StrCat("--nodes=", nodes);
    ChildRun local = RunBinary(
        LinearRegression(),
        {n, "--epochs=5", "--session=local", "--model_out=" + dir + "/local"},
        env);
    ASSERT_TRUE(local.exited_ok()) << local.Describe();
    const std::map<std::string, std::string> model = Files(dir + "/local");
    ASSERT_FALSE(model.empty());
    ChildRun mpi = Mpirun(nodes, LinearRegression(),
                          {n, "--epochs=5", "--model_out=" + dir + "/mpi",
                           "--checkpoint_dir=" + dir + "/ckpt"},
                          env);
    EXPECT_EQ(Output(mpi), local.lines) << nodes;
    EXPECT_EQ(Files(dir + "/mpi"), model) << nodes;

    // Killed (one rank, SIGKILL) in the middle, then resumed; on 4 nodes
    // with incremental saves (the training data is referenced, the
    // parameters written).
    const std::string ckpt = dir + "/killed";
    const std::string incremental = absl::StrCat("--incremental_checkpoint=",
                                                 nodes == 4 ? "true" : "false");
    const std::string last_rank = absl::StrCat(nodes - 1);
    ChildRun killed = RunBinaryWithHookAt(
        kMpirun,
        MpirunArgs(nodes, LinearRegression(),
                   {n, "--epochs=5", "--checkpoint_dir=" + ckpt,
                    "--record_delay_ms=1", incremental}),
        MpiEnv(env), "record done", 50, [&](pid_t mpirun) {
          ASSERT_EQ(RankPids(mpirun).size(), static_cast<size_t>(nodes));
          ASSERT_TRUE(KillRank(mpirun, nodes - 1, SIGKILL));
        });
    EXPECT_FALSE(killed.exited_ok()) << killed.Describe();
    ChildRun resumed = Mpirun(nodes, LinearRegression(),
                              {n, "--epochs=5", "--checkpoint_dir=" + ckpt,
                               "--resume_from_epoch=latest",
                               "--model_out=" + dir + "/resumed", incremental},
                              env);
    EXPECT_EQ(Output(resumed), local.lines) << nodes;
    EXPECT_EQ(Files(dir + "/resumed"), model) << nodes;
    if (nodes == 4) {
      EXPECT_THAT(References(ckpt), ::testing::ContainsRegex("\\[[0-9]"));
    }
  }
}

TEST(MpiTest, SixtyFourRanksOversubscribedThenResumeLatest) {
  if (testing_util::kSanitized) {
    // 64 sanitized processes on two cores take minutes, and they run the
    // code the 4-rank tests here already run under the sanitizer.
    GTEST_SKIP() << "64 ranks: run without --config=asan/tsan (the README's "
                    "test command covers it)";
  }
  const std::string dir = NewTempDir("ranks64");
  std::string expected = "result: epochs=4 totals=145";
  for (int i = 1; i < 64; ++i) expected += ",145";
  EXPECT_EQ(Output(Mpirun(64, SumPipeline(),
                          {"--nodes=64", "--checkpoint_dir=" + dir})),
            std::vector<std::string>{expected});
  ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
  EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
  EXPECT_THAT(verify.log + absl::StrJoin(verify.lines, "\n"),
              HasSubstr("verified 320 databases of 5 committed epochs"));
  ChildRun resumed = Mpirun(
      64, SumPipeline(),
      {"--nodes=64", "--checkpoint_dir=" + dir, "--resume_from_epoch=latest"});
  // Resuming from the last epoch runs one more (Caffe2's rule).
  EXPECT_EQ(Output(resumed), std::vector<std::string>{absl::StrCat(
                                 "result: epochs=5",
                                 expected.substr(strlen("result: epochs=4")))});
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 4"));
}

TEST(MpiTest, PreemptedMidEpochBySigusr1ThroughMpirunThenResumed) {
  // With background saves, the one in flight is agreed on and committed
  // before the mid-epoch state is.
  for (const auto& [at_record, saves] :
       std::vector<std::pair<int, std::string>>{{2, "--async_checkpoint=false"},
                                                {5, "--async_checkpoint=false"},
                                                {5, "--async_checkpoint"}}) {
    const std::string dir = NewTempDir(absl::StrCat(
        "preempt", at_record, saves == "--async_checkpoint" ? "_async" : ""));
    // mpirun forwards SIGUSR1 to every rank; each stops at its next point
    // between nets, the ranks agree, and the mid-epoch state is committed.
    ChildRun run =
        RunBinarySignalledAt(kMpirun,
                             MpirunArgs(2, SumPipeline(),
                                        {"--nodes=2", "--checkpoint_dir=" + dir,
                                         "--record_delay_ms=20", saves}),
                             "record done", at_record, SIGUSR1, MpiEnv());
    EXPECT_EQ(run.exit_code(), 75) << run.Describe();
    EXPECT_THAT(run.log, HasSubstr("preempted by SIGUSR1"));
    ChildRun verify = RunBinary(Ckpt(), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
    // Every epoch before the stop is committed, the one whose save was in
    // flight (async) too, and then the mid-epoch state.
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
    ASSERT_TRUE(log.ok()) << log.status();
    int64_t stopped = -1;  // the epoch of the preemption checkpoint
    for (const CommittedEpoch& entry : log->epoch()) {
      if (entry.has_preemption()) stopped = entry.epoch();
    }
    ASSERT_GE(stopped, 0) << CommittedEpochList(*log);
    std::vector<std::string> all;
    for (int64_t e = 0; e <= stopped; ++e) all.push_back(absl::StrCat(e));
    EXPECT_EQ(CommittedEpochList(*log), absl::StrJoin(all, ", "))
        << at_record << " " << saves;
    ChildRun resumed = Mpirun(2, SumPipeline(),
                              {"--nodes=2", "--checkpoint_dir=" + dir,
                               "--resume_from_epoch=latest", saves});
    EXPECT_EQ(Output(resumed),
              std::vector<std::string>{"result: epochs=4 totals=145,145"})
        << at_record << " " << saves;
  }
}

TEST(MpiTest, Caffe2PortPassesOnEveryRankCount) {
  for (int ranks : {1, 2, 4}) {
    // All of its tests, whichever shard of this test runs it.
    ChildRun run = Mpirun(ranks, RunfilesPath("tests/caffe2_port_mpi"),
                          {"--gtest_color=no"},
                          {"GTEST_TOTAL_SHARDS=1", "GTEST_SHARD_INDEX=0"});
    EXPECT_TRUE(run.exited_ok()) << ranks << ": " << run.Describe();
    // Every rank ran all three tests.
    int passed = 0;
    for (const std::string& line : run.lines) {
      passed += line == "[  PASSED  ] 3 tests.";
    }
    EXPECT_EQ(passed, ranks) << run.Describe();
  }
}

TEST(MpiTest, AllToAllPassesOnEveryRankCount) {
  for (int ranks : {1, 2, 4}) {
    // All of its tests, whichever shard of this test runs it.
    ChildRun run = Mpirun(ranks, RunfilesPath("tests/mpi_all_to_all"),
                          {"--gtest_color=no"},
                          {"GTEST_TOTAL_SHARDS=1", "GTEST_SHARD_INDEX=0"});
    EXPECT_TRUE(run.exited_ok()) << ranks << ": " << run.Describe();
    // Every rank ran all three tests.
    int passed = 0;
    for (const std::string& line : run.lines) {
      passed += line == "[  PASSED  ] 3 tests.";
    }
    EXPECT_EQ(passed, ranks) << run.Describe();
  }
}

TEST(MpiTest, LatestFallsBackWhenOneRanksDatabaseIsDamaged) {
  const std::string dir = NewTempDir("damaged");
  ASSERT_EQ(
      Output(
          Mpirun(4, SumPipeline(), {"--nodes=4", "--checkpoint_dir=" + dir})),
      std::vector<std::string>{"result: epochs=4 totals=145,145,145,145"});
  // Flip a byte of trainer_3's newest table (verified by rank 3 only).
  const std::string db = dir + "/trainer_3.4";
  std::string table;
  for (const auto& entry : std::filesystem::directory_iterator(db)) {
    if (entry.path().extension() == ".ldb") table = entry.path().string();
  }
  ASSERT_FALSE(table.empty());
  {
    std::fstream f(table, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(10);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(10);
    f.write(&c, 1);
  }
  ChildRun resumed = Mpirun(
      4, SumPipeline(),
      {"--nodes=4", "--checkpoint_dir=" + dir, "--resume_from_epoch=latest"});
  EXPECT_EQ(Output(resumed), std::vector<std::string>{
                                 "result: epochs=4 totals=145,145,145,145"});
  EXPECT_THAT(resumed.log, HasSubstr("skipping committed epoch 4: rank 3: "));
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 3"));
}

}  // namespace
}  // namespace testing
}  // namespace jobgraph

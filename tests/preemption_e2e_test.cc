// Preemption of the built example binaries by real signals, as a batch
// system sends them: the run stops, saves a preemption checkpoint, exits 75,
// and `--resume_from_epoch=latest` ends with exactly the result of a run
// that was never stopped. Signals are sent when the child logs an event (a
// record done, an epoch done) or raised by a failpoint inside a save, never
// after a delay; which event is chosen at random, and no assertion depends
// on where the stop lands.

#include <csignal>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;
using ::jobgraph::testing::RunBinary;
using ::jobgraph::testing::RunBinarySignalledAt;
using ::jobgraph::testing::RunfilesPath;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPreempted = 75;

TEST(SumPipeline, SigtermMidEpochSavesAndTheResumeReadsOnlyTheRest) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::string dir = NewTempDir("mid_epoch");
  const std::vector<std::string> args = {"--checkpoint_dir=" + dir,
                                         "--record_delay_ms=20"};
  // Epochs read 3 records each: the 5th is epoch 2's second.
  ChildRun stopped =
      RunBinarySignalledAt(binary, args, "record done", 5, SIGTERM);
  ASSERT_EQ(stopped.exit_code(), kPreempted) << stopped.Describe();
  EXPECT_THAT(stopped.log, HasSubstr("epoch 2 (preempted): "));
  EXPECT_THAT(stopped.log, HasSubstr(", 2 records, preemption checkpoint "));
  EXPECT_THAT(stopped.log,
              HasSubstr("preempted by SIGTERM in epoch 2: checkpoint of epoch "
                        "2 (mid-epoch) committed in " +
                        dir));
  EXPECT_THAT(stopped.log, HasSubstr("exiting with status 75"));
  EXPECT_FALSE(stopped.Result().has_value());

  ChildRun list = RunBinary(RunfilesPath("tools/ckpt"), {"list", dir});
  ASSERT_TRUE(list.exited_ok()) << list.Describe();
  EXPECT_THAT(list.lines[4], HasSubstr("2  preempted mid-epoch (SIGTERM)"));
  ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
  EXPECT_TRUE(verify.exited_ok()) << verify.Describe();

  std::vector<std::string> resume = args;
  resume.push_back("--resume_from_epoch=latest");
  ChildRun resumed = RunBinary(binary, resume);
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 2 of " + dir +
                                     " (in the middle of the epoch)"));
  // The continued epoch reads its one remaining record only.
  EXPECT_THAT(resumed.log, HasSubstr("epoch 2 (continued): "));
  EXPECT_THAT(resumed.log, HasSubstr(", 3 records (1 since the resume), "));
  EXPECT_THAT(resumed.log, Not(HasSubstr("] epoch 1:")));
  EXPECT_EQ(resumed.Result(), "result: epochs=4 totals=145");
  // The epoch's ordinary save replaced the preemption checkpoint.
  list = RunBinary(RunfilesPath("tools/ckpt"), {"list", dir});
  EXPECT_THAT(list.lines[4], HasSubstr("2  committed"));
}

// A lost commit log rebuilt by `ckpt recover` keeps a preemption checkpoint
// one: the resume still continues in the middle of the epoch.
TEST(SumPipeline, RecoverKeepsAPreemptionCheckpointMidEpoch) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::string dir = NewTempDir("recover");
  const std::vector<std::string> args = {"--checkpoint_dir=" + dir,
                                         "--record_delay_ms=20"};
  ChildRun stopped =
      RunBinarySignalledAt(binary, args, "record done", 4, SIGUSR1);
  ASSERT_EQ(stopped.exit_code(), kPreempted) << stopped.Describe();
  ASSERT_TRUE(RemoveRecursively(dir + "/MANIFEST.jobgraph").ok());
  ASSERT_TRUE(RemoveRecursively(dir + "/MANIFEST.jobgraph.prev").ok());
  ChildRun recover = RunBinary(RunfilesPath("tools/ckpt"), {"recover", dir});
  ASSERT_TRUE(recover.exited_ok()) << recover.Describe();
  EXPECT_THAT(recover.lines,
              ::testing::Contains("recovered epoch 2: trainer_0 (1003 bytes, "
                                  "preempted mid-epoch)"));
  std::vector<std::string> resume = args;
  resume.push_back("--resume_from_epoch=latest");
  ChildRun resumed = RunBinary(binary, resume);
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_THAT(resumed.log, HasSubstr("(in the middle of the epoch)"));
  EXPECT_EQ(resumed.Result(), "result: epochs=4 totals=145");
}

TEST(SumPipeline, AnUnhandledSignalStillKillsAndOtherExitCodesWork) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::string dir = NewTempDir("custom");
  // SIGTERM is not in the list: it ends the process as it would any program.
  ChildRun killed =
      RunBinarySignalledAt(binary,
                           {"--checkpoint_dir=" + dir, "--record_delay_ms=20",
                            "--preempt_signals=USR1"},
                           "record done", 2, SIGTERM);
  EXPECT_TRUE(killed.signalled()) << killed.Describe();
  ChildRun usr1 =
      RunBinarySignalledAt(binary,
                           {"--checkpoint_dir=" + dir, "--record_delay_ms=20",
                            "--preempt_signals=USR1", "--preempt_exit_code=99",
                            "--resume_from_epoch=latest"},
                           "record done", 2, SIGUSR1);
  EXPECT_EQ(usr1.exit_code(), 99) << usr1.Describe();
  EXPECT_THAT(usr1.log, HasSubstr("preempted by SIGUSR1"));
  ChildRun bad = RunBinary(binary, {"--preempt_signals=TERM,KILL"});
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_THAT(bad.log, HasSubstr("--preempt_signals=TERM,KILL: 'KILL' is not "
                                 "a signal that can be caught"));
}

// One example program, its arguments, and how many "record done" events a
// whole run logs.
struct Program {
  std::string name;
  std::vector<std::string> args;
  int records;
};

// Runs `program` into a fresh directory, signalled at a random event, then
// resumes from latest (signalled again, at random, at most twice more) until
// a run finishes. Returns the finished run; checks the exit codes on the way.
ChildRun RunSignalledUntilDone(const Program& program, std::mt19937* rng,
                               const std::string& dir, std::string* trace) {
  const std::string binary = RunfilesPath("examples/" + program.name);
  const int signals[] = {SIGTERM, SIGUSR1, SIGINT};
  const bool async = (*rng)() % 2 == 0;
  // Incremental saves, a full one every second epoch: a preemption
  // checkpoint may then refer to the epoch before it.
  const bool incremental = (*rng)() % 2 == 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = program.args;
    args.push_back("--checkpoint_dir=" + dir);
    if (async) args.push_back("--async_checkpoint");
    if (incremental) {
      args.push_back("--incremental_checkpoint");
      args.push_back("--full_every=2");
    }
    if (attempt > 0) args.push_back("--resume_from_epoch=latest");
    if (attempt == 3) return RunBinary(binary, args);
    const int signal = signals[(*rng)() % 3];
    std::vector<std::string> env;
    std::string event;
    int occurrence = 1;
    switch ((*rng)() % 4) {
      case 0:
      case 1:
        event = "record done";
        occurrence = 1 + (*rng)() % program.records;
        break;
      case 2:
        event = "] epoch ";
        occurrence = 1 + (*rng)() % 4;
        break;
      default:
        // Inside a save: the process raises SIGTERM at a step of every save.
        env.push_back(absl::StrCat(
            "JOBGRAPH_FAILPOINT=",
            (*rng)() % 2 ? "save.after_db_write" : "commit.before_commit_log",
            ":sigterm"));
        event = "sleeping";  // never stops the run before the failpoint does
        occurrence = 1 << 30;
        break;
    }
    absl::StrAppend(trace, async ? " async" : "",
                    incremental ? " incremental" : "", " run ", attempt, ": ",
                    strsignal(signal), " at '", event, "' #", occurrence,
                    env.empty() ? "" : " ", env.empty() ? "" : env[0], ";");
    ChildRun run =
        RunBinarySignalledAt(binary, args, event, occurrence, signal, env);
    if (run.exited_ok()) return run;
    EXPECT_EQ(run.exit_code(), kPreempted) << *trace << run.Describe();
    if (run.exit_code() != kPreempted) return run;
    EXPECT_THAT(run.log, HasSubstr("preempted by SIG")) << *trace;
  }
}

TEST(Preemption, SignalsAtRandomEventsThenResumeLatestAreExact) {
  const std::string text_dir = NewTempDir("text_input");
  std::string text;
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
  for (int i = 0; i < 300; ++i) {
    text += absl::StrCat(words[i % 5], " ", words[(i * 7) % 5], " line", i % 13,
                         "\n");
  }
  const std::string input = text_dir + "/input.txt";
  ASSERT_TRUE(WriteFileAtomically(input, text).ok());
  const std::vector<Program> programs = {
      {"sum_pipeline", {"--record_delay_ms=2"}, 10},
      {"sum_pipeline", {"--nodes=3", "--record_delay_ms=2"}, 30},
      {"text_stats",
       // Batches of 4 lines: 15 reads per epoch to stop between, 75 in all.
       {"--input=" + input, "--lines_per_epoch=60", "--batch_size=4",
        "--threads=3", "--record_delay_ms=1"},
       75},
      {"linear_regression", {"--epochs=4", "--record_delay_ms=2"}, 32},
  };
  std::vector<ChildRun> references;
  for (const Program& program : programs) {
    ChildRun reference =
        RunBinary(RunfilesPath("examples/" + program.name), program.args);
    ASSERT_TRUE(reference.exited_ok()) << reference.Describe();
    references.push_back(reference);
  }
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  int preempted_runs = 0;
  for (int trial = 0; trial < 32; ++trial) {
    const size_t p = trial % programs.size();
    const std::string dir = NewTempDir(absl::StrCat("trial", trial));
    std::string trace = absl::StrCat(programs[p].name, " trial ", trial, ":");
    ChildRun done = RunSignalledUntilDone(programs[p], &rng, dir, &trace);
    ASSERT_TRUE(done.exited_ok()) << trace << done.Describe();
    EXPECT_EQ(done.lines, references[p].lines) << trace;
    preempted_runs += absl::StrContains(done.log, "resumed from epoch");
    ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << trace << verify.Describe();
  }
  // Most trials were stopped at least once (an event can come after the
  // run's end only for the last records).
  EXPECT_GT(preempted_runs, 16);
}

// kill -9 with asynchronous saves: a save still in the background when the
// process dies is never committed, so `latest` is the epoch before it (or
// a preemption checkpoint) and the resume is exact, also when the saves
// are incremental.
TEST(Preemption, SigkillWithAsyncSavesThenResumeLatestIsExact) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::vector<std::string> args = {"--nodes=2", "--record_delay_ms=3",
                                         "--async_checkpoint"};
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 1);
  int resumed_runs = 0;
  for (int trial = 0; trial < 10; ++trial) {
    const std::string dir = NewTempDir(absl::StrCat("kill", trial));
    std::vector<std::string> run_args = args;
    run_args.push_back("--checkpoint_dir=" + dir);
    // Every other trial saves incrementally.
    const bool incremental = trial % 2 == 1;
    if (incremental) run_args.push_back("--incremental_checkpoint");
    // Both events come right around a background save: an epoch's log line
    // is written just after its snapshot, a record just after it.
    const bool at_epoch = rng() % 2 == 0;
    const int occurrence = 1 + rng() % (at_epoch ? 4 : 20);
    ChildRun killed = RunBinarySignalledAt(
        binary, run_args, at_epoch ? "] epoch " : "record done", occurrence,
        SIGKILL);
    const std::string trace = absl::StrCat(
        "trial ", trial, incremental ? " (incremental)" : "", ": SIGKILL at '",
        at_epoch ? "epoch" : "record", "' #", occurrence);
    ASSERT_TRUE(killed.killed() || killed.exited_ok())
        << trace << killed.Describe();
    ChildRun list = RunBinary(RunfilesPath("tools/ckpt"), {"list", dir});
    const std::string newest = list.lines.empty() ? "" : list.lines.back();
    run_args.push_back("--resume_from_epoch=latest");
    ChildRun resumed = RunBinary(binary, run_args);
    ASSERT_TRUE(resumed.exited_ok()) << trace << resumed.Describe();
    resumed_runs += absl::StrContains(resumed.log, "resumed from epoch");
    // Resuming from the last epoch runs one more, empty epoch (Caffe2's
    // rule), so the count depends on whether epoch 4 was committed when the
    // kill came; the totals never do.
    const bool last_committed = absl::StrContains(newest, "(newest 4)");
    EXPECT_EQ(resumed.Result(),
              absl::StrCat("result: epochs=", last_committed ? 5 : 4,
                           " totals=145,145"))
        << trace << newest << resumed.Describe();
    ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << trace << verify.Describe();
  }
  EXPECT_GT(resumed_runs, 3);
}

}  // namespace
}  // namespace jobgraph

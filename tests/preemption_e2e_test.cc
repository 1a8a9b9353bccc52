// Preemption of the built example binaries by real signals, as a batch
// system sends them: the run stops, saves a preemption checkpoint, exits 75,
// and `--resume_from_epoch=latest` ends with exactly the result of a run
// that was never stopped. Signals are sent the moment the child logs an
// event (a record done, an epoch done; its output is read through a pipe as
// it comes) or raised by a failpoint inside a save, never after a delay;
// which event is chosen at random (the seed is printed, and
// JOBGRAPH_TEST_SEED replays it). Where the stop lands depends on when the
// signal arrives, but every stopped run says what it committed, and the
// run after it must resume from exactly that.

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/sanitizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;
using ::jobgraph::testing::RunBinary;
using ::jobgraph::testing::RunBinaryWatched;
using ::jobgraph::testing::RunfilesPath;
using ::jobgraph::testing::TestSeed;
using ::jobgraph::testing::WatchedChild;
using ::jobgraph::testing_util::kSweepStride;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPreempted = 75;

// Runs `binary` and sends it `signal` the moment a line of its log (standard
// error) containing `event` has come `occurrence` times; then waits for it
// to end. `*signalled` tells whether the signal was sent to the running
// child (a child that ended first is not signalled). With `hold_stdout` the
// child cannot print its result, and so cannot finish, before the signal
// (WatchOptions::hold_stdout): the event must come.
ChildRun SignalAtEvent(const std::string& binary,
                       const std::vector<std::string>& args,
                       const std::string& event, int occurrence, int signal,
                       const std::vector<std::string>& env = {},
                       bool* signalled = nullptr, bool hold_stdout = false) {
  int seen = 0;
  bool sent = false;
  ChildRun run = RunBinaryWatched(
      binary, args, {.extra_env = env, .hold_stdout = hold_stdout},
      [&](WatchedChild& child, const std::string& line, bool from_stderr) {
        if (!from_stderr || !absl::StrContains(line, event)) return;
        if (++seen == occurrence) sent = child.SignalIfRunning(signal);
      });
  if (signalled != nullptr) *signalled = sent;
  return run;
}

// The first line of `log` that contains `text`, from `text` to its end, or
// "" if none does.
std::string LineAfter(const std::string& log, const std::string& text) {
  const size_t at = log.find(text);
  if (at == std::string::npos) return "";
  const size_t end = log.find('\n', at);
  return log.substr(at,
                    end == std::string::npos ? std::string::npos : end - at);
}

// What a run resumed from latest after `stopped` (a run preempted by a
// signal: exit 75) must log: "resumed from epoch N of DIR" and where in the
// epoch, as the stopped run's own report of what it committed says. "" (and
// a test failure) if the report is none of those.
std::string ExpectedResume(const ChildRun& stopped, const std::string& dir) {
  const std::string report = LineAfter(stopped.log, "preempted by SIG");
  const std::string resumed = "resumed from epoch ";
  std::smatch m;
  if (std::regex_search(
          report, m,
          std::regex("^preempted by SIG[A-Z0-9]+ in epoch ([0-9]+): "
                     "checkpoint of epoch ([0-9]+) \\(mid-epoch\\) "
                     "committed in "))) {
    EXPECT_EQ(m[1].str(), m[2].str()) << report;
    return absl::StrCat(resumed, m[1].str(), " of ", dir,
                        " (in the middle of the epoch)");
  }
  if (std::regex_search(report, m,
                        std::regex("^preempted by SIG[A-Z0-9]+ in init: "
                                   "checkpoint of epoch 0 \\(mid-init\\) "
                                   "committed in "))) {
    return absl::StrCat(resumed, "0 of ", dir, " (in the middle of init)");
  }
  if (std::regex_search(
          report, m,
          std::regex("^preempted by SIG[A-Z0-9]+ after epoch ([0-9]+): epoch "
                     "([0-9]+) is committed; a resume starts after it"))) {
    EXPECT_EQ(m[1].str(), m[2].str()) << report;
    return absl::StrCat(resumed, m[1].str(), " of ", dir);
  }
  if (std::regex_search(
          report, m,
          std::regex("^preempted by SIG[A-Z0-9]+ after the last epoch, epoch "
                     "([0-9]+) is marked as the last; "))) {
    return absl::StrCat(resumed, m[1].str(), " of ", dir,
                        " (after the last epoch: download and exit)");
  }
  ADD_FAILURE() << "no report of what the preempted run committed: "
                << stopped.Describe();
  return "";
}

TEST(SumPipeline, SigtermMidEpochSavesAndTheResumeReadsOnlyTheRest) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::string dir = NewTempDir("mid_epoch");
  const std::vector<std::string> args = {"--checkpoint_dir=" + dir,
                                         "--record_delay_ms=20"};
  // Epochs read 3 records each: the 5th is epoch 2's second.
  ChildRun stopped = SignalAtEvent(binary, args, "record done", 5, SIGTERM);
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
  ChildRun stopped = SignalAtEvent(binary, args, "record done", 4, SIGUSR1);
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
  EXPECT_EQ(LineAfter(resumed.log, "resumed from epoch "),
            "resumed from epoch 2 of " + dir + " (in the middle of the epoch)");
  EXPECT_EQ(resumed.Result(), "result: epochs=4 totals=145");
}

TEST(SumPipeline, AnUnhandledSignalStillKillsAndOtherExitCodesWork) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::string dir = NewTempDir("custom");
  // SIGTERM is not in the list: it ends the process as it would any program.
  ChildRun killed =
      SignalAtEvent(binary,
                    {"--checkpoint_dir=" + dir, "--record_delay_ms=20",
                     "--preempt_signals=USR1"},
                    "record done", 2, SIGTERM);
  EXPECT_TRUE(killed.signalled()) << killed.Describe();
  // Killed in its 2nd record, in epoch 1, before that epoch's save: epoch 0
  // is the newest committed epoch (a synchronous save's epoch line comes
  // once the epoch is committed).
  EXPECT_THAT(killed.log, HasSubstr("] epoch 0 (init): checkpoint "));
  EXPECT_THAT(killed.log, Not(HasSubstr("] epoch 1: "))) << killed.Describe();
  ChildRun usr1 =
      SignalAtEvent(binary,
                    {"--checkpoint_dir=" + dir, "--record_delay_ms=20",
                     "--preempt_signals=USR1", "--preempt_exit_code=99",
                     "--resume_from_epoch=latest"},
                    "record done", 2, SIGUSR1);
  EXPECT_EQ(usr1.exit_code(), 99) << usr1.Describe();
  EXPECT_EQ(LineAfter(usr1.log, "resumed from epoch "),
            "resumed from epoch 0 of " + dir);
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

// Signalled runs of SignalsAtRandomEventsThenResumeLatestAreExact, and how
// many of them the signal stopped (exit 75).
int g_signalled_runs = 0;
int g_preempted_runs = 0;

// Runs `program` into a fresh directory, signalled at a random event, then
// resumes from latest (signalled again, at random, at most twice more) until
// a run finishes. Every run after a preempted one must resume from exactly
// what the preempted run reports it committed. Returns the finished run;
// checks the exit codes on the way.
ChildRun RunSignalledUntilDone(const Program& program, std::mt19937* rng,
                               const std::string& dir, std::string* trace) {
  const std::string binary = RunfilesPath("examples/" + program.name);
  const int signals[] = {SIGTERM, SIGUSR1, SIGINT};
  const bool async = (*rng)() % 2 == 0;
  // Incremental saves, a full one every second epoch: a preemption
  // checkpoint may then refer to the epoch before it.
  const bool incremental = (*rng)() % 2 == 0;
  std::string expected_resume;  // what the next run must log
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = program.args;
    args.push_back("--checkpoint_dir=" + dir);
    if (async) args.push_back("--async_checkpoint");
    if (incremental) {
      args.push_back("--incremental_checkpoint");
      args.push_back("--full_every=2");
    }
    if (attempt > 0) args.push_back("--resume_from_epoch=latest");
    ChildRun run;
    if (attempt == 3) {
      run = RunBinary(binary, args);
    } else {
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
          // Inside a save: the process raises SIGTERM at a step of every
          // save.
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
      bool signalled = false;
      run = SignalAtEvent(binary, args, event, occurrence, signal, env,
                          &signalled);
      // A failpoint raises SIGTERM only in a run that saves.
      signalled |= absl::StrContains(run.log, ": raising SIGTERM");
      if (signalled) {
        ++g_signalled_runs;
        g_preempted_runs += run.exit_code() == kPreempted;
        if (run.exited_ok()) {
          std::printf("%s finished: the signal came after its last epoch\n",
                      trace->c_str());
        }
      }
    }
    // A resumed run loads exactly what the run before it committed.
    if (attempt > 0) {
      EXPECT_EQ(LineAfter(run.log, "resumed from epoch "), expected_resume)
          << *trace << run.Describe();
    }
    if (run.exited_ok() || attempt == 3) return run;
    EXPECT_EQ(run.exit_code(), kPreempted) << *trace << run.Describe();
    if (run.exit_code() != kPreempted) return run;
    EXPECT_THAT(run.log, HasSubstr("preempted by SIG")) << *trace;
    expected_resume = ExpectedResume(run, dir);
    absl::StrAppend(trace, " stopped, to resume: '", expected_resume, "';");
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
  std::mt19937 rng(
      TestSeed(0, "SignalsAtRandomEventsThenResumeLatestAreExact"));
  // Every third trial under a sanitizer (checkpoint/util/sanitizers.h): a
  // stride prime to the number of programs still runs each of them.
  for (int trial = 0; trial < 32; trial += kSweepStride) {
    const size_t p = trial % programs.size();
    const std::string dir = NewTempDir(absl::StrCat("trial", trial));
    std::string trace = absl::StrCat(programs[p].name, " trial ", trial, ":");
    ChildRun done = RunSignalledUntilDone(programs[p], &rng, dir, &trace);
    ASSERT_TRUE(done.exited_ok()) << trace << done.Describe();
    EXPECT_EQ(done.lines, references[p].lines) << trace;
    ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << trace << verify.Describe();
  }
  // A signal sent at one of the last events of a run (a resumed run has
  // fewer than the program's) may come once the run no longer handles it:
  // the run then finishes as if never signalled. So not every signalled run
  // stops; most do (95% on an idle machine).
  std::printf(
      "SignalsAtRandomEventsThenResumeLatestAreExact: interrupted %d of %d "
      "signalled runs\n",
      g_preempted_runs, g_signalled_runs);
  std::fflush(stdout);
  EXPECT_GE(g_preempted_runs * 4, g_signalled_runs * 3);
}

// The newest committed epoch of `dir`, as `ckpt list` reads it (none
// without a commit log).
std::optional<int64_t> NewestCommitted(const std::string& dir) {
  ChildRun list = RunBinary(RunfilesPath("tools/ckpt"), {"list", dir});
  EXPECT_TRUE(list.exited_ok()) << list.Describe();
  // The summary: "5 committed epochs (newest 4), 0 uncommitted, ...".
  for (const std::string& line : list.lines) {
    const size_t at = line.find(" (newest ");
    if (line.find(" committed epoch") == std::string::npos ||
        at == std::string::npos) {
      continue;
    }
    const size_t start = at + strlen(" (newest ");
    int64_t newest = 0;
    EXPECT_TRUE(absl::SimpleAtoi(
        line.substr(start, line.find(')', start) - start), &newest))
        << line;
    return newest;
  }
  return std::nullopt;
}

// The newest epoch whose line `line` of sum_pipeline's log reports (an
// epoch's save, or a background save committed), if any; `*committed` says
// whether the line reports a commit.
std::optional<int64_t> EpochOfLine(const std::string& line, bool* committed) {
  const size_t at = line.find("] epoch ");
  if (at == std::string::npos) return std::nullopt;
  const std::string rest = line.substr(at + strlen("] epoch "));
  const size_t digits = rest.find_first_not_of("0123456789");
  int64_t epoch = 0;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &epoch)) {
    return std::nullopt;
  }
  *committed = absl::StartsWith(rest.substr(digits),
                                ": background checkpoint committed in ");
  return epoch;
}

// kill -9 with asynchronous saves: a save still in the background when the
// process dies is never committed, so `latest` is the epoch before it (or
// a preemption checkpoint) and the resume is exact, also when the saves
// are incremental. The kill comes at a random event (an epoch's log line,
// written just after its snapshot, or a record) and always lands: the child
// cannot print its result before the kill (WatchOptions::hold_stdout). At
// the kill the newest commit the run logged is committed, and nothing after
// the epoch the run had got to: the commit log (`ckpt list`) says which
// epoch of those, and the resume must load exactly that one.
TEST(Preemption, SigkillWithAsyncSavesThenResumeLatestIsExact) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  const std::vector<std::string> args = {"--nodes=2", "--record_delay_ms=3",
                                         "--async_checkpoint"};
  std::mt19937 rng(TestSeed(1, "SigkillWithAsyncSavesThenResumeLatestIsExact"));
  constexpr int kTrials = 10;
  int landed = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string dir = NewTempDir(absl::StrCat("kill", trial));
    std::vector<std::string> run_args = args;
    run_args.push_back("--checkpoint_dir=" + dir);
    // Every other trial saves incrementally.
    const bool incremental = trial % 2 == 1;
    if (incremental) run_args.push_back("--incremental_checkpoint");
    // Both events come right around a background save: an epoch's log line
    // is written just after its snapshot, a record just after it. Every
    // one of them comes in every run: epochs 0..3 are followed by one more,
    // and the two nodes read 10 records each.
    const bool at_epoch = rng() % 2 == 0;
    const int occurrence = 1 + rng() % (at_epoch ? 4 : 20);
    bool signalled = false;
    ChildRun killed =
        SignalAtEvent(binary, run_args, at_epoch ? "] epoch " : "record done",
                      occurrence, SIGKILL, {}, &signalled,
                      /*hold_stdout=*/true);
    const std::string trace = absl::StrCat(
        "trial ", trial, incremental ? " (incremental)" : "", ": SIGKILL at '",
        at_epoch ? "epoch" : "record", "' #", occurrence);
    landed += signalled && killed.killed();
    ASSERT_TRUE(signalled) << trace << killed.Describe();
    ASSERT_TRUE(killed.killed()) << trace << killed.Describe();
    // What the run logged before it died: the newest commit it reported,
    // and the newest epoch it got to the end of.
    int64_t logged_commit = -1;
    int64_t reached = -1;
    for (absl::string_view line : absl::StrSplit(killed.log, '\n')) {
      bool committed = false;
      if (std::optional<int64_t> epoch =
              EpochOfLine(std::string(line), &committed)) {
        reached = std::max(reached, *epoch);
        if (committed) logged_commit = std::max(logged_commit, *epoch);
      }
    }
    const std::optional<int64_t> newest = NewestCommitted(dir);
    // A background save may commit epoch `reached` + 1 before its epoch line
    // is written (the save is handed on first); none goes further.
    EXPECT_GE(newest.value_or(-1), logged_commit) << trace << killed.Describe();
    EXPECT_LE(newest.value_or(-1), std::min<int64_t>(reached + 1, 4))
        << trace << killed.Describe();

    run_args.push_back("--resume_from_epoch=latest");
    ChildRun resumed = RunBinary(binary, run_args);
    ASSERT_TRUE(resumed.exited_ok()) << trace << resumed.Describe();
    EXPECT_EQ(LineAfter(resumed.log, "resumed from epoch "),
              newest.has_value()
                  ? absl::StrCat("resumed from epoch ", *newest, " of ", dir)
                  : "")
        << trace << resumed.Describe();
    // Resuming from the last epoch runs one more, empty epoch (Caffe2's
    // rule); the totals never change.
    EXPECT_EQ(
        resumed.Result(),
        absl::StrCat("result: epochs=", newest == 4 ? 5 : 4, " totals=145,145"))
        << trace << resumed.Describe();
    ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
    EXPECT_TRUE(verify.exited_ok()) << trace << verify.Describe();
    std::printf(
        "%s: newest committed epoch %s (logged commit %lld, reached "
        "%lld)\n",
        trace.c_str(),
        newest.has_value() ? absl::StrCat(*newest).c_str() : "none",
        static_cast<long long>(logged_commit), static_cast<long long>(reached));
  }
  std::printf(
      "SigkillWithAsyncSavesThenResumeLatestIsExact: interrupted %d of %d "
      "runs\n",
      landed, kTrials);
  std::fflush(stdout);
  EXPECT_EQ(landed, kTrials);
}

}  // namespace
}  // namespace jobgraph

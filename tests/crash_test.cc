// Crash tests: the Caffe2 pipeline runs in a child process (crash_child) that
// is killed with SIGKILL, at every failpoint of the save / commit / retention
// path and at random events of its run, and is then resumed with
// --resume_from_epoch=latest. After every kill the checkpoint directory must
// hold only complete, verifying databases for the epochs its commit log lists;
// a resume must start from a committed epoch and end exactly as an
// uninterrupted run does.
//
// A failpoint fires the first time the process reaches it (unless a spec
// says "@<n>"; these cases keep the first), so each one is reached at
// different epochs by starting the failing run from different committed
// states: from scratch, or from a
// directory whose newest committed epoch is S (made by a child that kills
// itself right after committing S). Every case runs with full and with
// incremental saves.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAreArray;

constexpr int kNodes = 2;
constexpr int64_t kLastEpoch = 4;  // the job ends after epoch 4
// What an uninterrupted run prints.
constexpr char kUninterruptedResult[] = "result: epochs=4 totals=145,145";

using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;

// Runs crash_child with `args` and JOBGRAPH_FAILPOINT=`failpoint` (cleared
// if empty). With `kill_after_ms` >= 0 the child is sent SIGKILL that long
// after it started (if it is still running).
ChildRun RunChild(const std::vector<std::string>& args,
                  const std::string& failpoint, int kill_after_ms = -1) {
  return ::jobgraph::testing::RunBinary(
      ::jobgraph::testing::RunfilesPath("tests/crash_child"), args,
      {absl::StrCat(kFailpointEnvVar, "=", failpoint)}, kill_after_ms);
}

std::vector<std::string> ChildArgs(const std::string& dir, int keep_last,
                                   const std::string& resume,
                                   bool incremental) {
  return {absl::StrCat("--checkpoint_dir=", dir),
          absl::StrCat("--nodes=", kNodes),
          absl::StrCat("--keep_last=", keep_last),
          absl::StrCat("--resume_from_epoch=", resume),
          absl::StrCat("--incremental_checkpoint=", incremental)};
}

std::vector<std::string> NodeNames() {
  std::vector<std::string> nodes;
  for (int id = 0; id < kNodes; ++id) {
    nodes.push_back(absl::StrCat("trainer_", id));
  }
  return nodes;
}

// The committed epochs of `dir` (none without a commit log), after checking
// the invariants of the commit protocol: the commit log parses, its epochs are
// increasing, and every epoch it lists has a database for every node in
// place that verifies (checksums, node, epoch).
std::vector<int64_t> CommittedEpochsAndCheck(const std::string& dir) {
  std::vector<int64_t> epochs;
  absl::StatusOr<CommitLog> commit_log = ReadCommitLog(dir);
  if (absl::IsNotFound(commit_log.status())) return epochs;
  EXPECT_TRUE(commit_log.ok()) << commit_log.status();
  if (!commit_log.ok()) return epochs;
  EXPECT_EQ(commit_log->db_type(), "leveldb");
  for (const CommittedEpoch& committed : commit_log->epoch()) {
    if (!epochs.empty()) {
      EXPECT_GT(committed.epoch(), epochs.back()) << "epochs out of order";
    }
    epochs.push_back(committed.epoch());
    EXPECT_THAT(committed.node(), ElementsAreArray(NodeNames()))
        << "epoch " << committed.epoch();
    for (const std::string& node : NodeNames()) {
      const std::string path = CheckpointDbPath(dir, node, committed.epoch());
      absl::StatusOr<CompactBlobIndex> db =
          VerifyCheckpointDb("leveldb", path, node, committed.epoch());
      EXPECT_TRUE(db.ok()) << "committed epoch " << committed.epoch()
                           << " of node " << node << ": " << db.status();
    }
  }
  return epochs;
}

// The epochs a commit log lists after epochs 0..`newest` were committed one
// after the other with retention keep_last=`keep_last` (0 keeps all). With
// incremental saves every epoch refers to epoch 0 for the dataset its init
// made (a run of 5 epochs never reaches full_every), so 0 stays too.
std::vector<int64_t> Retained(int64_t newest, int keep_last, bool incremental) {
  std::vector<int64_t> epochs;
  for (int64_t e = 0; e <= newest; ++e) epochs.push_back(e);
  if (keep_last > 0 && epochs.size() > static_cast<size_t>(keep_last)) {
    epochs.erase(epochs.begin(), epochs.end() - keep_last);
    if (incremental && epochs.front() != 0) epochs.insert(epochs.begin(), 0);
  }
  return epochs;
}

// With incremental saves, what retention leaves: the newest `keep_last`
// epochs in a row (with 0, every epoch from 0), and before them only
// epochs that a later listed one refers to. Which ones those are depends on
// where kills and resumes fell (an epoch after the data ran out changes
// nothing, so the next refers to it).
void ExpectRetainedWithReferences(const std::string& dir, int keep_last) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  ASSERT_TRUE(log.ok()) << log.status();
  const int n = log->epoch_size();
  const int recent = keep_last == 0 ? n : std::min(n, keep_last);
  for (int i = n - recent + 1; i < n; ++i) {
    EXPECT_EQ(log->epoch(i).epoch(), log->epoch(i - 1).epoch() + 1);
  }
  if (keep_last == 0 && n > 0) EXPECT_EQ(log->epoch(0).epoch(), 0);
  for (int i = 0; i < n - recent; ++i) {
    bool referenced = false;
    for (int j = i + 1; j < n; ++j) {
      for (int64_t e : log->epoch(j).referenced_epoch()) {
        referenced |= e == log->epoch(i).epoch();
      }
    }
    EXPECT_TRUE(referenced) << "epoch " << log->epoch(i).epoch()
                            << " is kept but no later epoch refers to it";
  }
}

std::string ResumedFromText(const std::vector<int64_t>& committed) {
  return committed.empty() ? "none" : absl::StrCat(committed.back());
}

// The last epoch of a run that resumes from the newest of `committed`.
// Resuming from epoch 4 or later runs one more epoch, as in Caffe2 (the
// reader is exhausted, so the totals do not change).
int64_t FinalEpoch(const std::vector<int64_t>& committed) {
  return committed.empty() ? kLastEpoch
                           : std::max(kLastEpoch, committed.back() + 1);
}

// The result line of a run that resumes from the newest of `committed`:
// the uninterrupted run's, but for the extra epoch of a resume from the end.
std::string ExpectedResult(const std::vector<int64_t>& committed) {
  return absl::StrCat("result: epochs=", FinalEpoch(committed),
                      " totals=145,145");
}

// Resumes the job in `dir` from the newest committed epoch (`committed` as
// read after the last kill) with no failpoint, and checks that it loads that
// epoch and ends as an uninterrupted run does.
void ResumeAndCheck(const std::string& dir, int keep_last, bool incremental,
                    const std::vector<int64_t>& committed) {
  ChildRun resume =
      RunChild(ChildArgs(dir, keep_last, "latest", incremental), "");
  ASSERT_TRUE(resume.exited_ok()) << resume.Describe();
  // Nothing but the newest committed epoch may be loaded: every committed
  // epoch verifies here, so latest must not fall back.
  EXPECT_EQ(resume.Value("resumed_from"), ResumedFromText(committed))
      << resume.Describe();
  EXPECT_EQ(resume.Result(), ExpectedResult(committed)) << resume.Describe();
  if (FinalEpoch(committed) == kLastEpoch) {
    EXPECT_EQ(resume.Result(), kUninterruptedResult);
  }
  const std::vector<int64_t> now = CommittedEpochsAndCheck(dir);
  if (incremental) {
    ASSERT_FALSE(now.empty());
    EXPECT_EQ(now.back(), FinalEpoch(committed));
    ExpectRetainedWithReferences(dir, keep_last);
  } else {
    EXPECT_EQ(now, Retained(FinalEpoch(committed), keep_last, false));
  }
}

// ---------------------------------------------------------------------------
// Every failpoint, reached at different epochs.

enum class Phase {
  kBeforeCommit,  // the epoch being saved is not committed
  kAfterCommit,   // the commit log lists it, without the epochs it retires
  kRetention,     // the same, and the retired databases are being deleted
};

// By the failpoint's name (kKnownFailpoints documents where each fires). A
// new failpoint is tested automatically; if it fires at another phase than
// its prefix suggests, the exact check of the commit log after the crash fails
// until it is classified here.
Phase PhaseOf(absl::string_view failpoint) {
  if (absl::StartsWith(failpoint, "retention.")) return Phase::kRetention;
  if (failpoint == "commit.after_commit_log") return Phase::kAfterCommit;
  // save.*, commit.before_commit_log, commit.after_commit_log_tmp.
  return Phase::kBeforeCommit;
}

struct FailpointCase {
  std::string failpoint;
  // The newest committed epoch when the failing run starts; -1: from
  // scratch.
  int64_t start = -1;
  bool incremental = false;
};

// For gtest's messages.
void PrintTo(const FailpointCase& c, std::ostream* os) {
  *os << c.failpoint << " from "
      << (c.start < 0 ? std::string("scratch")
                      : absl::StrCat("epoch ", c.start))
      << (c.incremental ? ", incremental" : "");
}

// Retention points fire only when retention drops an epoch; the others are
// run with and without retention, alternately.
int KeepLastFor(const FailpointCase& c) {
  if (PhaseOf(c.failpoint) == Phase::kRetention) return 2;
  return c.start % 2 == 0 ? 2 : 0;
}

// The epoch whose save or commit reaches the failpoint first.
int64_t EpochReached(const FailpointCase& c) {
  if (PhaseOf(c.failpoint) == Phase::kRetention) {
    // keep_last=2 first drops an epoch when epoch 2 is committed; with
    // incremental saves, which keep epoch 0, when epoch 3 is.
    return std::max<int64_t>(c.incremental ? 3 : 2, c.start + 1);
  }
  return c.start + 1;
}

// What the blob index lists after the crash at EpochReached(c).
std::vector<int64_t> CommittedAfterCrash(const FailpointCase& c) {
  const int keep_last = KeepLastFor(c);
  const int64_t epoch = EpochReached(c);
  switch (PhaseOf(c.failpoint)) {
    case Phase::kBeforeCommit:
      return Retained(epoch - 1, keep_last, c.incremental);
    case Phase::kAfterCommit:
    case Phase::kRetention:
      // One write lists the epoch and drops what retention retires.
      return Retained(epoch, keep_last, c.incremental);
  }
  return {};
}

// The flush's failpoints fire only with a local tier: tests/tier_test.cc
// places them. A transfer's fires only when a database moves between
// hosts (checkpoint/ops/copy_db_test.cc places it).
bool FiresWithoutLocalTier(absl::string_view failpoint) {
  return !absl::StartsWith(failpoint, "flush.") &&
         !absl::StartsWith(failpoint, "transfer.");
}

std::vector<FailpointCase> AllFailpointCases() {
  std::vector<FailpointCase> cases;
  for (const std::string& name : Failpoints::KnownNames()) {
    if (!FiresWithoutLocalTier(name)) continue;
    // From scratch the save/commit points fire at epoch 0; from S at S + 1,
    // so every epoch 0..4 is covered, including the last one.
    for (bool incremental : {false, true}) {
      for (int64_t start = -1; start < kLastEpoch; ++start) {
        cases.push_back({name, start, incremental});
      }
    }
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<FailpointCase>& info) {
  return absl::StrCat(
      absl::StrReplaceAll(info.param.failpoint, {{".", "_"}}), "_",
      info.param.start < 0 ? std::string("scratch")
                           : absl::StrCat("from", info.param.start),
      info.param.incremental ? "_incremental" : "");
}

class FailpointCrashTest : public ::testing::TestWithParam<FailpointCase> {};

TEST_P(FailpointCrashTest, CrashThenResumeLatest) {
  const FailpointCase& c = GetParam();
  const int keep_last = KeepLastFor(c);
  const std::string dir = NewTempDir("crash");

  std::vector<int64_t> before;
  if (c.start >= 0) {
    // Leave a directory whose newest committed epoch is c.start, as a job
    // killed between epochs would.
    std::vector<std::string> args =
        ChildArgs(dir, keep_last, "", c.incremental);
    args.push_back(absl::StrCat("--kill_after_epoch=", c.start));
    ChildRun setup = RunChild(args, "");
    ASSERT_TRUE(setup.killed()) << setup.Describe();
    before = CommittedEpochsAndCheck(dir);
    ASSERT_EQ(before, Retained(c.start, keep_last, c.incremental));
  }

  ChildRun crash = RunChild(ChildArgs(dir, keep_last, "latest", c.incremental),
                            absl::StrCat(c.failpoint, ":crash"));
  ASSERT_TRUE(crash.killed())
      << "failpoint " << c.failpoint
      << " did not kill the child: " << crash.Describe();
  ASSERT_THAT(crash.log, ::testing::HasSubstr(absl::StrCat(
                             "failpoint ", c.failpoint, ": killing")));
  // Had the run got as far as ending an epoch, it must have loaded the
  // newest committed epoch of the time.
  if (std::optional<std::string> from = crash.Value("resumed_from")) {
    EXPECT_EQ(*from, ResumedFromText(before));
  }

  const std::vector<int64_t> committed = CommittedEpochsAndCheck(dir);
  EXPECT_EQ(committed, CommittedAfterCrash(c))
      << "after a crash at " << c.failpoint << " in epoch " << EpochReached(c);
  if (PhaseOf(c.failpoint) == Phase::kBeforeCommit) {
    // The epoch the crash interrupted may have complete databases in place
    // (after save.after_rename or commit.*), but it is not committed: asking
    // for it explicitly must not load it.
    ChildRun uncommitted = RunChild(
        ChildArgs(dir, keep_last, absl::StrCat(EpochReached(c)), c.incremental),
        "");
    EXPECT_TRUE(WIFEXITED(uncommitted.wait_status) &&
                WEXITSTATUS(uncommitted.wait_status) == 1)
        << uncommitted.Describe();
    EXPECT_THAT(uncommitted.log,
                ::testing::HasSubstr(absl::StrCat(
                    "NOT_FOUND: cannot resume from epoch ", EpochReached(c))));
    EXPECT_EQ(uncommitted.Value("resumed_from"), std::nullopt);
  }
  ResumeAndCheck(dir, keep_last, c.incremental, committed);
}

INSTANTIATE_TEST_SUITE_P(AllFailpoints, FailpointCrashTest,
                         ::testing::ValuesIn(AllFailpointCases()), CaseName);

// The cases are built from kKnownFailpoints, so a new failpoint is covered
// without touching this file; this pins that nothing was skipped.
TEST(FailpointCrashCoverage, EveryKnownFailpointHasCases) {
  const std::vector<FailpointCase> cases = AllFailpointCases();
  size_t covered = 0;
  for (const FailpointInfo& info : kKnownFailpoints) {
    if (!FiresWithoutLocalTier(info.name)) continue;
    ++covered;
    EXPECT_EQ(std::count_if(cases.begin(), cases.end(),
                            [&](const FailpointCase& c) {
                              return c.failpoint == info.name;
                            }),
              2 * (kLastEpoch + 1))
        << info.name;
  }
  EXPECT_EQ(covered,
            std::size(kKnownFailpoints) - 3);  // but flush.*, transfer.*
  EXPECT_EQ(cases.size(), covered * 2 * (kLastEpoch + 1));
}

// ---------------------------------------------------------------------------
// SIGKILL at random events.
//
// crash_child --wait_at_events stops at each of its events (a node in init,
// a node in an epoch, an epoch committed) until the test answers; the test
// answers every event but one, chosen at random, and kills the child there.
// So every kill lands in a running child, at a known point: the newest
// committed epoch is exactly the last one whose "epoch_end=" the child
// printed (a line printed after the commit, and the child does nothing more
// of the job until the answer: the next commit needs the group in which it
// waits to finish).

constexpr int kKillsPerTrial = 4;
constexpr uint32_t kSeed = 20240611;

// The events of a crash_child run that starts from `newest` (the newest
// committed epoch; none: from scratch) and is not killed: per node one in
// init, then per epoch one per node and its epoch_end.
int EventsInRun(std::optional<int64_t> newest) {
  const int per_epoch = kNodes + 1;
  if (!newest.has_value()) return kNodes + 1 + kLastEpoch * per_epoch;
  const int64_t last = std::max(kLastEpoch, *newest + 1);
  return static_cast<int>(last - *newest) * per_epoch;
}

// The epoch a run resumed from, as its log says ("resumed from epoch N of
// DIR"), or "none" if it says nothing of the kind.
std::string ResumedFromLog(const ChildRun& run, const std::string& dir) {
  const std::string prefix = "resumed from epoch ";
  const size_t at = run.log.find(prefix);
  if (at == std::string::npos) return "none";
  const size_t end = run.log.find('\n', at);
  const std::string line = run.log.substr(
      at + prefix.size(),
      end == std::string::npos ? std::string::npos : end - at - prefix.size());
  const std::string suffix = absl::StrCat(" of ", dir);
  return absl::EndsWith(line, suffix)
             ? line.substr(0, line.size() - suffix.size())
             : absl::StrCat("(unexpected: ", line, ")");
}

std::string EpochText(std::optional<int64_t> epoch) {
  return epoch.has_value() ? absl::StrCat(*epoch) : "none";
}

// How many of this process's kills landed in a running child, of how many.
int g_kills_landed = 0;
int g_kills_sent = 0;

class RandomKillTest : public ::testing::TestWithParam<int> {
 public:
  static void TearDownTestSuite() {
    // Every kill lands by construction: the child waits for the test.
    std::printf("RandomKillTest: interrupted %d of %d runs\n", g_kills_landed,
                g_kills_sent);
    std::fflush(stdout);
  }
};

TEST_P(RandomKillTest, KillAtRandomEventsThenResumeLatest) {
  const int trial = GetParam();
  // Each trial's seed is the test's plus the trial's number.
  const uint32_t seed = ::jobgraph::testing::TestSeed(
                            kSeed, absl::StrCat("RandomKillTest (trial ", trial,
                                                ": + ", trial, ")")) +
                        trial;
  std::mt19937 rng(seed);
  const int keep_last = trial % 2 == 0 ? 0 : 2;
  const bool incremental = trial % 4 >= 2;
  const std::string dir = NewTempDir("random");
  SCOPED_TRACE(absl::StrCat("trial ", trial, " (seed ", seed, "): keep_last=",
                            keep_last, incremental ? ", incremental" : ""));

  std::optional<int64_t> newest;  // the newest committed epoch
  int interrupted = 0;
  for (int kill = 0; kill < kKillsPerTrial; ++kill) {
    const int events = EventsInRun(newest);
    const int kill_at = std::uniform_int_distribution<int>(1, events)(rng);
    SCOPED_TRACE(absl::StrCat("kill ", kill, " at event ", kill_at, " of ",
                              events, ", resuming from ", EpochText(newest)));
    std::vector<std::string> args =
        ChildArgs(dir, keep_last, "latest", incremental);
    args.push_back("--wait_at_events");
    int seen = 0;
    bool landed = false;
    std::string killed_at;
    std::optional<int64_t> logged = newest;  // by the epoch_end lines
    ChildRun run = ::jobgraph::testing::RunBinaryWatched(
        ::jobgraph::testing::RunfilesPath("tests/crash_child"), args,
        {.extra_env = {absl::StrCat(kFailpointEnvVar, "=")},
         .stdin_pipe = true},
        [&](::jobgraph::testing::WatchedChild& child, const std::string& line,
            bool from_stderr) {
          if (from_stderr) return;
          int64_t epoch = 0;
          if (absl::StartsWith(line, "epoch_end=") &&
              absl::SimpleAtoi(absl::StripPrefix(line, "epoch_end="), &epoch)) {
            logged = epoch;
          } else if (!absl::StartsWith(line, "event=")) {
            return;  // not an event: the child does not wait
          }
          if (++seen == kill_at) {
            killed_at = line;
            landed = child.SignalIfRunning(SIGKILL);
          } else if (seen < kill_at) {
            child.WriteStdin("x");
          }
        });
    ++g_kills_sent;
    g_kills_landed += landed && run.killed();
    interrupted += landed && run.killed();
    // The child waited at the chosen event, so it was running when killed
    // and it died of the kill; nothing ran after the event.
    ASSERT_TRUE(landed) << "the child was not running at event " << kill_at
                        << ": " << run.Describe();
    ASSERT_TRUE(run.killed()) << run.Describe();
    EXPECT_EQ(seen, kill_at) << run.Describe();
    EXPECT_FALSE(run.Result().has_value()) << run.Describe();
    // It loaded the newest committed epoch of the time.
    EXPECT_EQ(ResumedFromLog(run, dir), EpochText(newest)) << run.Describe();
    if (std::optional<std::string> from = run.Value("resumed_from")) {
      EXPECT_EQ(*from, EpochText(newest)) << run.Describe();
    }

    // Exactly the epochs committed by the end of the event: the newest is
    // the last "epoch_end" the child printed.
    const std::vector<int64_t> now = CommittedEpochsAndCheck(dir);
    LOG(INFO) << "trial " << trial << ": killed at event " << kill_at << " of "
              << events << " ('" << killed_at
              << "'); committed epochs now: " << absl::StrJoin(now, ",");
    if (logged.has_value()) {
      ASSERT_FALSE(now.empty()) << "expected " << *logged;
      EXPECT_EQ(now.back(), *logged) << absl::StrJoin(now, ",");
    } else {
      EXPECT_TRUE(now.empty()) << absl::StrJoin(now, ",");
    }
    // The committed epochs form a run of consecutive epochs ending at the
    // newest: all of them without retention, else at most keep_last of them
    // (the commit that lists an epoch drops the ones it retires in the same
    // write, so no kill leaves more). With incremental saves the epochs later
    // ones refer to stay before them.
    if (incremental) {
      ExpectRetainedWithReferences(dir, keep_last);
    } else {
      for (size_t i = 1; i < now.size(); ++i) {
        EXPECT_EQ(now[i], now[i - 1] + 1) << absl::StrJoin(now, ",");
      }
      if (!now.empty() && keep_last == 0) {
        EXPECT_EQ(now.front(), 0);
      }
      if (keep_last > 0) {
        EXPECT_LE(now.size(), static_cast<size_t>(keep_last));
      }
    }
    newest = logged;
  }
  std::printf("RandomKillTest trial %d: interrupted %d of %d runs\n", trial,
              interrupted, kKillsPerTrial);
  // The last resume loads the newest epoch the last killed run committed,
  // and ends exactly as an uninterrupted run does.
  const std::vector<int64_t> committed = CommittedEpochsAndCheck(dir);
  ASSERT_EQ(ResumedFromText(committed), EpochText(newest));
  ResumeAndCheck(dir, keep_last, incremental, committed);
}

INSTANTIATE_TEST_SUITE_P(Trials, RandomKillTest, ::testing::Range(0, 8));

}  // namespace
}  // namespace jobgraph

// The local tier from outside, with the example binary as users run it
// (sum_pipeline --local_checkpoint_dir): a preempted run exits 75 only once
// its checkpoint is in the shared directory, and a requeue on another host
// (an empty local tier) resumes exactly; kill -9 at random logged events
// and inside a flush leaves a shared commit log that lists only complete
// epochs, and both a resume on the same host (the local tier) and one on
// another host (the shared directory only) load exactly the newest epoch
// committed there and end with the uninterrupted result. Kills come the
// moment the child logs the chosen event (seeded: the seed is printed,
// JOBGRAPH_TEST_SEED replays it), never after a delay.

#include <csignal>
#include <cstdint>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/file_util.h"
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
using ::testing::HasSubstr;

// sum_pipeline's result, with one node and with two.
constexpr char kResult[] = "result: epochs=4 totals=145";
constexpr char kResult2[] = "result: epochs=4 totals=145,145";

// Runs sum_pipeline with `args` and sends `signal` the moment its log has
// shown `event` `occurrence` times; the child cannot print its result first
// (hold_stdout), so a signal always reaches a running child.
ChildRun SignalAtEvent(const std::vector<std::string>& args,
                       const std::string& event, int occurrence, int signal,
                       const std::vector<std::string>& env = {}) {
  int seen = 0;
  return RunBinaryWatched(
      RunfilesPath("examples/sum_pipeline"), args,
      {.extra_env = env, .hold_stdout = true},
      [&](WatchedChild& child, const std::string& line, bool from_stderr) {
        if (from_stderr && absl::StrContains(line, event) &&
            ++seen == occurrence) {
          EXPECT_TRUE(child.SignalIfRunning(signal)) << line;
        }
      });
}

ChildRun RunSum(const std::vector<std::string>& args) {
  return RunBinary(RunfilesPath("examples/sum_pipeline"), args);
}

// The epochs the commit log of `dir` lists (none without a log).
std::vector<int64_t> Listed(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (absl::IsNotFound(log.status())) return {};
  EXPECT_TRUE(log.ok()) << log.status();
  std::vector<int64_t> epochs;
  if (log.ok()) {
    for (const CommittedEpoch& e : log->epoch()) epochs.push_back(e.epoch());
  }
  return epochs;
}

// "resumed from epoch N of DIR..." of `run`'s log: N, or -1.
int64_t ResumedEpoch(const ChildRun& run, std::string* from = nullptr) {
  std::smatch m;
  static const std::regex kResumed("resumed from epoch ([0-9]+) of (\\S+)");
  if (!std::regex_search(run.log, m, kResumed)) return -1;
  if (from != nullptr) *from = m[2].str();
  return std::stoll(m[1].str());
}

void ExpectVerifies(const std::string& dir) {
  ChildRun verify = RunBinary(RunfilesPath("tools/ckpt"), {"verify", dir});
  EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
}

TEST(TierE2E, PreemptionFlushesBeforeExit75AndARequeueElsewhereResumes) {
  const std::string shared = NewTempDir("shared");
  const std::string host_a = NewTempDir("host_a");
  const std::vector<std::string> common = {"--checkpoint_dir=" + shared,
                                           "--record_delay_ms=20",
                                           "--shared_every=100"};
  std::vector<std::string> args = common;
  args.push_back("--local_checkpoint_dir=" + host_a);
  // Epochs read 3 records each: the 5th is epoch 2's second.
  ChildRun stopped = SignalAtEvent(args, "record done", 5, SIGTERM);
  ASSERT_EQ(stopped.exit_code(), 75) << stopped.Describe();
  // shared_every=100 flushes nothing in the background but epoch 0; the
  // preemption checkpoint reached the shared directory before the exit.
  const size_t flushed = stopped.log.find("epoch 2 flushed to " + shared);
  ASSERT_NE(flushed, std::string::npos) << stopped.Describe();
  EXPECT_LT(flushed, stopped.log.find("exiting with status 75"));
  EXPECT_THAT(stopped.log, HasSubstr("preempted by SIGTERM in epoch 2: "
                                     "checkpoint of epoch 2 (mid-epoch) "));
  EXPECT_EQ(Listed(shared), (std::vector<int64_t>{0, 2}));
  ExpectVerifies(shared);
  ExpectVerifies(host_a);

  // Requeued on another host: its local tier is empty.
  args = common;
  args.push_back("--local_checkpoint_dir=" + NewTempDir("host_b"));
  args.push_back("--resume_from_epoch=latest");
  ChildRun elsewhere = RunSum(args);
  ASSERT_TRUE(elsewhere.exited_ok()) << elsewhere.Describe();
  EXPECT_THAT(elsewhere.log, HasSubstr("resumed from epoch 2 of " + shared +
                                       " (in the middle of the epoch)"));
  EXPECT_THAT(elsewhere.log, HasSubstr(", 3 records (1 since the resume), "));
  EXPECT_EQ(elsewhere.Result(), kResult);

  // Back on the first host, resumed from epoch 2 again: its local copy is
  // the preemption checkpoint, which the requeued run replaced with epoch
  // 2's ordinary save in the shared directory. That is the history now:
  // the local copy is ignored (and dropped), epoch 2 read from there.
  args = common;
  args.push_back("--local_checkpoint_dir=" + host_a);
  args.push_back("--resume_from_epoch=2");
  ChildRun again = RunSum(args);
  ASSERT_TRUE(again.exited_ok()) << again.Describe();
  EXPECT_THAT(again.log, HasSubstr(" of the local tier " + host_a +
                                   ": they are not the history of the "
                                   "shared directory " +
                                   shared));
  EXPECT_THAT(again.log, HasSubstr("resumed from epoch 2 of " + shared + "\n"))
      << again.Describe();
  EXPECT_EQ(again.Result(), kResult);
}

// After a kill: the shared log lists only epochs that verify; a resume on
// the same host loads the newest epoch its local log lists (it continues
// the shared history), one on another host the newest the shared log
// lists; both end exactly. Each resume runs on its own copy of the
// directories, since a resume commits (and flushes) new epochs.
void CheckAfterKill(const std::string& shared, const std::string& local,
                    const std::vector<std::string>& flags,
                    const std::string& trace) {
  ExpectVerifies(shared);
  for (const bool same_host : {true, false}) {
    const std::string where = same_host ? "same host" : "another host";
    const std::string shared_copy = NewTempDir("shared_copy");
    const std::string local_copy = NewTempDir("local_copy");
    ASSERT_TRUE(
        RunBinary("/bin/cp", {"-a", shared + "/.", shared_copy}).exited_ok());
    if (same_host) {
      ASSERT_TRUE(
          RunBinary("/bin/cp", {"-a", local + "/.", local_copy}).exited_ok());
    }
    const std::vector<int64_t> epochs =
        Listed(same_host ? local_copy : shared_copy);
    std::vector<std::string> args = flags;
    args.push_back("--checkpoint_dir=" + shared_copy);
    args.push_back("--local_checkpoint_dir=" + local_copy);
    args.push_back("--resume_from_epoch=latest");
    ChildRun resumed = RunSum(args);
    ASSERT_TRUE(resumed.exited_ok()) << trace << where << resumed.Describe();
    std::string from;
    EXPECT_EQ(ResumedEpoch(resumed, &from), epochs.empty() ? -1 : epochs.back())
        << trace << where << resumed.Describe();
    if (!epochs.empty()) {
      EXPECT_EQ(from, same_host ? local_copy : shared_copy) << trace << where;
    }
    // A resume from the last epoch runs one more, empty, as in Caffe2.
    EXPECT_EQ(resumed.Result(), !epochs.empty() && epochs.back() == 4
                                    ? "result: epochs=5 totals=145,145"
                                    : kResult2)
        << trace << where;
  }
}

TEST(TierE2E, SigkillAtRandomEventsIsExactOnTheSameHostAndElsewhere) {
  std::mt19937 rng(
      TestSeed(0, "SigkillAtRandomEventsIsExactOnTheSameHostAndElsewhere"));
  for (int trial = 0; trial < 6; ++trial) {
    const bool async = trial % 2 == 1;
    // Two nodes log 10 records each; the kill comes at one of the first 19.
    const int record = std::uniform_int_distribution<int>(1, 19)(rng);
    const std::string trace =
        absl::StrCat("trial ", trial, (async ? " (async)" : ""),
                     ": SIGKILL at record ", record, "; ");
    const std::string shared = NewTempDir("shared");
    const std::string local = NewTempDir("local");
    std::vector<std::string> flags = {"--nodes=2", "--record_delay_ms=5",
                                      "--shared_every=2"};
    if (async) flags.push_back("--async_checkpoint");
    std::vector<std::string> args = flags;
    args.push_back("--checkpoint_dir=" + shared);
    args.push_back("--local_checkpoint_dir=" + local);
    ChildRun killed = SignalAtEvent(args, "record done", record, SIGKILL);
    ASSERT_TRUE(killed.killed()) << trace << killed.Describe();
    CheckAfterKill(shared, local, flags, trace);
  }
}

TEST(TierE2E, SigkillInsideAFlushListsNothingIncomplete) {
  for (const char* failpoint : {"flush.after_copy", "flush.before_commit"}) {
    for (int hit : {1, 2, 3}) {
      const std::string trace = absl::StrCat(failpoint, ":crash@", hit, "; ");
      const std::string shared = NewTempDir("shared");
      const std::string local = NewTempDir("local");
      const std::vector<std::string> flags = {"--nodes=2",
                                              "--record_delay_ms=2"};
      std::vector<std::string> args = flags;
      args.push_back("--checkpoint_dir=" + shared);
      args.push_back("--local_checkpoint_dir=" + local);
      ChildRun killed = RunBinary(
          RunfilesPath("examples/sum_pipeline"), args,
          {absl::StrCat("JOBGRAPH_FAILPOINT=", failpoint, ":crash@", hit)});
      ASSERT_TRUE(killed.killed()) << trace << killed.Describe();
      ASSERT_THAT(killed.log,
                  HasSubstr(absl::StrCat("failpoint ", failpoint, ": killing")))
          << trace;
      // The epoch being flushed is not listed in the shared directory.
      // flush.after_copy fires per node (2 per epoch), flush.before_commit
      // once per epoch: epochs 0, 1, ... are flushed in turn or skipped
      // when the flush falls behind, so only the count is known: fewer
      // shared epochs than flushes reached.
      const std::vector<int64_t> shared_epochs = Listed(shared);
      EXPECT_LT(static_cast<int>(shared_epochs.size()),
                absl::StrContains(failpoint, "copy") ? (hit + 1) / 2 : hit)
          << trace;
      CheckAfterKill(shared, local, flags, trace);
    }
  }
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/util/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>  // NOLINT(build/c++11)
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::KilledBySignal;

class FailpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv(kFailpointEnvVar);
    Failpoints::DisableAll();
  }
  void TearDown() override {
    ::unsetenv(kFailpointEnvVar);
    Failpoints::DisableAll();
  }
};

TEST_F(FailpointTest, KnownNamesListEveryFailpointInPathOrder) {
  EXPECT_THAT(
      Failpoints::KnownNames(),
      ElementsAre("save.after_snapshot", "save.after_db_write",
                  "save.after_rename", "commit.before_commit_log",
                  "commit.after_commit_log_tmp", "commit.after_commit_log",
                  "retention.after_commit_log", "retention.mid_delete",
                  "flush.after_copy", "flush.before_commit",
                  "transfer.before_install"));
  for (const FailpointInfo& info : kKnownFailpoints) {
    EXPECT_TRUE(Failpoints::IsKnown(info.name)) << info.name;
    EXPECT_FALSE(info.where.empty()) << info.name;
  }
  EXPECT_FALSE(Failpoints::IsKnown("save.before_rename"));
}

TEST_F(FailpointTest, NothingFiresWhenNothingIsEnabled) {
  for (const std::string& name : Failpoints::KnownNames()) {
    EXPECT_TRUE(Failpoint(name).ok()) << name;
  }
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, ErrorActionReturnsAbortedForThatFailpointOnly) {
  ASSERT_TRUE(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError).ok());
  absl::Status status = Failpoint("save.after_db_write");
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "failpoint save.after_db_write");
  EXPECT_TRUE(Failpoint("save.after_rename").ok());
  EXPECT_EQ(Failpoints::EnabledSpec(), "save.after_db_write:error");

  ASSERT_TRUE(Failpoints::Disable("save.after_db_write").ok());
  EXPECT_TRUE(Failpoint("save.after_db_write").ok());
  // Disabling what is not enabled is fine.
  EXPECT_TRUE(Failpoints::Disable("save.after_db_write").ok());
}

TEST_F(FailpointTest, EveryKnownFailpointCanReturnAnError) {
  for (const std::string& name : Failpoints::KnownNames()) {
    ASSERT_TRUE(Failpoints::Enable(name, FailpointAction::kError).ok());
    EXPECT_EQ(Failpoint(name).code(), absl::StatusCode::kAborted) << name;
    Failpoints::DisableAll();
    EXPECT_TRUE(Failpoint(name).ok()) << name;
  }
}

TEST_F(FailpointTest, UnknownNamesAreRejectedWithTheKnownList) {
  absl::Status status =
      Failpoints::Enable("save.before_rename", FailpointAction::kError);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "unknown failpoint 'save.before_rename'; known failpoints: "
            "save.after_snapshot, save.after_db_write, save.after_rename, "
            "commit.before_commit_log, "
            "commit.after_commit_log_tmp, commit.after_commit_log, "
            "retention.after_commit_log, retention.mid_delete, "
            "flush.after_copy, flush.before_commit, transfer.before_install");
  EXPECT_EQ(Failpoints::Disable("nope").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, SpecSyntax) {
  ASSERT_TRUE(Failpoints::EnableFromSpec(
                  " save.after_db_write:error , commit.after_commit_log ,"
                  "retention.mid_delete:crash")
                  .ok());
  EXPECT_EQ(Failpoints::EnabledSpec(),
            "commit.after_commit_log:crash,retention.mid_delete:crash,"
            "save.after_db_write:error");
  Failpoints::DisableAll();
  ASSERT_TRUE(Failpoints::EnableFromSpec(
                  "save.after_snapshot:hold@3, save.after_rename @ 2,"
                  "commit.after_commit_log:sigterm@1")
                  .ok());
  EXPECT_EQ(Failpoints::EnabledSpec(),
            "commit.after_commit_log:sigterm,save.after_rename:crash@2,"
            "save.after_snapshot:hold@3");
  Failpoints::DisableAll();
  EXPECT_TRUE(Failpoints::EnableFromSpec("").ok());
  EXPECT_TRUE(Failpoints::EnableFromSpec("  ").ok());
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, BadSpecsEnableNothing) {
  absl::Status status =
      Failpoints::EnableFromSpec("save.after_db_write:error,bogus");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("unknown failpoint 'bogus'"));
  EXPECT_EQ(Failpoints::EnabledSpec(), "");

  status = Failpoints::EnableFromSpec("save.after_db_write:explode");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "failpoint 'save.after_db_write': unknown action 'explode'; "
            "expected crash, error, sigterm or hold");

  for (const char* spec :
       {"save.after_db_write:error@0", "save.after_db_write@-1",
        "save.after_db_write:hold@", "save.after_db_write@2x"}) {
    status = Failpoints::EnableFromSpec(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(status.message(),
                HasSubstr("failpoint 'save.after_db_write': bad first hit"))
        << spec;
  }
  EXPECT_EQ(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError, 0)
          .code(),
      absl::StatusCode::kInvalidArgument);

  status = Failpoints::EnableFromSpec("save.after_db_write,,");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("has an empty entry"));
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, EnvironmentVariableIsParsed) {
  ASSERT_EQ(
      ::setenv(kFailpointEnvVar,
               "retention.mid_delete:error,commit.before_commit_log:crash", 1),
      0);
  ASSERT_TRUE(Failpoints::ReloadFromEnvironment().ok());
  EXPECT_EQ(Failpoints::EnabledSpec(),
            "commit.before_commit_log:crash,retention.mid_delete:error");
  EXPECT_EQ(Failpoint("retention.mid_delete").code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(Failpoint("save.after_rename").ok());

  // The API overrides what the environment said.
  ASSERT_TRUE(Failpoints::Disable("retention.mid_delete").ok());
  EXPECT_TRUE(Failpoint("retention.mid_delete").ok());

  // Reloading replaces everything with the variable as it is now.
  ASSERT_TRUE(
      Failpoints::Enable("save.after_rename", FailpointAction::kError).ok());
  ASSERT_EQ(::unsetenv(kFailpointEnvVar), 0);
  ASSERT_TRUE(Failpoints::ReloadFromEnvironment().ok());
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, BadEnvironmentFailsEveryFailpointUntilCleared) {
  ASSERT_EQ(::setenv(kFailpointEnvVar, "save.after_db_wirte", 1), 0);
  absl::Status status = Failpoints::ReloadFromEnvironment();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("JOBGRAPH_FAILPOINT=save.after_db_wirte: unknown "
                        "failpoint 'save.after_db_wirte'; known failpoints: "));
  // A typo must not silently test nothing: every evaluation reports it.
  EXPECT_EQ(Failpoint("save.after_rename"), status);
  EXPECT_EQ(Failpoint("commit.after_commit_log"), status);
  Failpoints::DisableAll();
  EXPECT_TRUE(Failpoint("save.after_rename").ok());
}

TEST_F(FailpointTest, FirstHitLetsTheEarlierEvaluationsPass) {
  ASSERT_TRUE(Failpoints::Enable("save.after_rename", FailpointAction::kError,
                                 /*first_hit=*/3)
                  .ok());
  EXPECT_EQ(Failpoints::EnabledSpec(), "save.after_rename:error@3");
  // Other failpoints' evaluations do not count.
  EXPECT_TRUE(Failpoint("save.after_db_write").ok());
  EXPECT_TRUE(Failpoint("save.after_rename").ok());
  EXPECT_TRUE(Failpoint("save.after_rename").ok());
  EXPECT_EQ(Failpoint("save.after_rename").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Failpoint("save.after_rename").code(), absl::StatusCode::kAborted);
  // Enabling anew counts from zero again.
  ASSERT_TRUE(Failpoints::Enable("save.after_rename", FailpointAction::kError,
                                 /*first_hit=*/2)
                  .ok());
  EXPECT_TRUE(Failpoint("save.after_rename").ok());
  EXPECT_EQ(Failpoint("save.after_rename").code(), absl::StatusCode::kAborted);
}

// A thread that evaluates `name` on a thread of its own, and whether it
// has come back, and with what.
class Evaluator {
 public:
  explicit Evaluator(std::string name)
      : thread_([this, name = std::move(name)] {
          status_ = Failpoint(name);
          done_.store(true);
        }) {}
  ~Evaluator() { Join().IgnoreError(); }
  bool done() const { return done_.load(); }
  absl::Status Join() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  absl::Status status_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

constexpr absl::Duration kHoldTimeout = absl::Seconds(30);

TEST_F(FailpointTest, HoldBlocksTheThreadUntilReleasedThenPasses) {
  EXPECT_FALSE(
      Failpoints::WaitForHold("save.after_snapshot", absl::ZeroDuration()));
  ASSERT_TRUE(
      Failpoints::Enable("save.after_snapshot", FailpointAction::kHold).ok());
  // Its line goes to the test's log (the death test below checks it).
  Evaluator held("save.after_snapshot");
  ASSERT_TRUE(Failpoints::WaitForHold("save.after_snapshot", kHoldTimeout));
  // Held, not merely slow: it stays held while other failpoints work.
  EXPECT_TRUE(Failpoint("save.after_db_write").ok());
  EXPECT_FALSE(held.done());
  EXPECT_FALSE(
      Failpoints::WaitForHold("save.after_db_write", absl::ZeroDuration()));
  ASSERT_TRUE(Failpoints::Release("save.after_snapshot").ok());
  EXPECT_TRUE(held.Join().ok());
  EXPECT_TRUE(held.done());
  // Released means disabled: the next evaluation passes.
  EXPECT_TRUE(Failpoint("save.after_snapshot").ok());
  EXPECT_FALSE(
      Failpoints::WaitForHold("save.after_snapshot", absl::ZeroDuration()));
  EXPECT_EQ(Failpoints::EnabledSpec(), "");
}

TEST_F(FailpointTest, EveryWayOfEndingAHoldReleasesIt) {
  struct Ending {
    const char* what;
    void (*end)();
  };
  const Ending endings[] = {
      {"Disable",
       [] { CHECK(Failpoints::Disable("retention.mid_delete").ok()); }},
      {"DisableAll", [] { Failpoints::DisableAll(); }},
      {"Enable anew",
       [] {
         CHECK(
             Failpoints::Enable("retention.mid_delete", FailpointAction::kError)
                 .ok());
       }},
      {"ReloadFromEnvironment",
       [] { Failpoints::ReloadFromEnvironment().IgnoreError(); }},
  };
  for (const Ending& ending : endings) {
    SCOPED_TRACE(ending.what);
    Failpoints::DisableAll();
    ASSERT_TRUE(Failpoints::EnableFromSpec("retention.mid_delete:hold@2").ok());
    // The first evaluation passes, the second holds.
    EXPECT_TRUE(Failpoint("retention.mid_delete").ok());
    Evaluator held("retention.mid_delete");
    ASSERT_TRUE(Failpoints::WaitForHold("retention.mid_delete", kHoldTimeout));
    EXPECT_FALSE(held.done());
    ending.end();
    EXPECT_TRUE(held.Join().ok());
  }
}

// A hold holds every thread that reaches it, and one release lets them all
// go (the second thread may also come after the release: it passes then).
TEST_F(FailpointTest, AReleaseLetsEveryThreadAtTheHoldGo) {
  ASSERT_TRUE(
      Failpoints::Enable("save.after_snapshot", FailpointAction::kHold).ok());
  Evaluator first("save.after_snapshot");
  ASSERT_TRUE(Failpoints::WaitForHold("save.after_snapshot", kHoldTimeout));
  Evaluator second("save.after_snapshot");
  ASSERT_TRUE(Failpoints::Release("save.after_snapshot").ok());
  EXPECT_TRUE(first.Join().ok());
  EXPECT_TRUE(second.Join().ok());
}

using FailpointDeathTest = FailpointTest;

// Enables `name` to crash and evaluates it; returns only if it did not.
void CrashAt(const std::string& name) {
  CHECK(Failpoints::Enable(name, FailpointAction::kCrash).ok());
  Failpoint(name).IgnoreError();
}

TEST_F(FailpointDeathTest, CrashActionKillsTheProcessWithSigkill) {
  for (const std::string& name : Failpoints::KnownNames()) {
    EXPECT_EXIT(
        {
          CrashAt(name);
          ::exit(0);
        },
        KilledBySignal(SIGKILL), "")
        << name;
  }
}

// Not a fixture test: the child must not touch failpoints before the
// statement under test.
TEST(FailpointEnvDeathTest, EnvironmentIsReadAtTheFirstEvaluation) {
  // "threadsafe" re-executes the test binary for the child, so the child's
  // first Failpoint() is the first use of failpoints in its process.
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  ASSERT_EQ(::setenv(kFailpointEnvVar, "save.after_rename", 1), 0);
  EXPECT_EXIT(
      {
        Failpoint("save.after_db_write").IgnoreError();
        Failpoint("save.after_rename").IgnoreError();
        ::exit(0);
      },
      KilledBySignal(SIGKILL), "save.after_rename");
  ASSERT_EQ(::setenv(kFailpointEnvVar, "save.after_rename:error", 1), 0);
  EXPECT_EXIT(
      {
        ::exit(Failpoint("save.after_rename").code() ==
                       absl::StatusCode::kAborted
                   ? 3
                   : 4);
      },
      ::testing::ExitedWithCode(3), "");
  ::testing::FLAGS_gtest_death_test_style = "fast";
  ASSERT_EQ(::unsetenv(kFailpointEnvVar), 0);
}

// From the environment a hold prints its line and holds until the process
// is killed; the rest of the process goes on meanwhile.
TEST(FailpointEnvDeathTest, AnEnvironmentHoldPrintsItsLineAndHoldsTheThread) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  ASSERT_EQ(::setenv(kFailpointEnvVar, "save.after_snapshot:hold@2", 1), 0);
  EXPECT_EXIT(
      {
        // The first evaluation passes.
        if (!Failpoint("save.after_snapshot").ok()) ::exit(4);
        std::thread held(
            [] { Failpoint("save.after_snapshot").IgnoreError(); });
        if (!Failpoints::WaitForHold("save.after_snapshot", kHoldTimeout)) {
          ::exit(5);
        }
        // The thread stays held; only the kill ends the process, as a
        // parent's kill ends a child held so.
        ::kill(::getpid(), SIGKILL);
        held.join();
        ::exit(6);
      },
      KilledBySignal(SIGKILL), "failpoint_hold=save.after_snapshot\n");
  ::testing::FLAGS_gtest_death_test_style = "fast";
  ASSERT_EQ(::unsetenv(kFailpointEnvVar), 0);
}

}  // namespace
}  // namespace jobgraph

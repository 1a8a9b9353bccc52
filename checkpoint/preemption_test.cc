#include "checkpoint/preemption.h"

#include <csignal>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseSignalListTest, NamesWithOrWithoutSigAndNumbers) {
  EXPECT_THAT(*ParseSignalList("TERM,USR1,INT"),
              ElementsAre(SIGTERM, SIGUSR1, SIGINT));
  EXPECT_THAT(*ParseSignalList(" sigterm , Usr2 ,10"),
              ElementsAre(SIGTERM, SIGUSR2, 10));
  EXPECT_THAT(*ParseSignalList(""), IsEmpty());
  EXPECT_THAT(*ParseSignalList("none"), IsEmpty());
}

TEST(ParseSignalListTest, RefusesUnknownAndUncatchableSignals) {
  for (const char* bad :
       {"TERM,FOO", "KILL", "SIGSTOP", "0", "TERM,,INT", "11", "7"}) {
    absl::StatusOr<std::vector<int>> parsed = ParseSignalList(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("not a signal"));
  }
}

TEST(SignalNameTest, Names) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGRTMIN + 1), absl::StrCat("signal ", SIGRTMIN + 1));
}

TEST(PreemptionSignalsTest, ASignalRequestsAStopAndHandlersAreRestored) {
  RunControl control;
  {
    absl::StatusOr<std::unique_ptr<PreemptionSignals>> signals =
        PreemptionSignals::Install({SIGUSR1, SIGUSR2}, &control);
    ASSERT_TRUE(signals.ok()) << signals.status();
    EXPECT_EQ((*signals)->received(), 0);
    EXPECT_FALSE(control.StopRequested());
    // A second set while one is installed is refused.
    RunControl other;
    absl::StatusOr<std::unique_ptr<PreemptionSignals>> second =
        PreemptionSignals::Install({SIGUSR1}, &other);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);

    ASSERT_EQ(raise(SIGUSR2), 0);
    EXPECT_TRUE(control.StopRequested());
    EXPECT_EQ((*signals)->received(), SIGUSR2);
    // A second signal keeps the first one's number.
    ASSERT_EQ(raise(SIGUSR1), 0);
    EXPECT_EQ((*signals)->received(), SIGUSR2);
  }
  // The default disposition is back: SIGUSR1 would end the process.
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGUSR1, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  // And a new set can be installed.
  RunControl again;
  EXPECT_TRUE(PreemptionSignals::Install({SIGUSR1}, &again).ok());
}

TEST(PreemptedStatusTest, IsRecognisedAndOthersAreNot) {
  absl::Status preempted = PreemptedStatus("preempted by SIGTERM in epoch 3");
  EXPECT_TRUE(IsPreempted(preempted));
  EXPECT_EQ(preempted.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(IsPreempted(absl::UnavailableError("disk gone")));
  EXPECT_FALSE(IsPreempted(absl::OkStatus()));
}

}  // namespace
}  // namespace jobgraph

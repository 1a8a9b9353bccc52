#include "checkpoint/util/pause_gate.h"

#include <atomic>
#include <optional>
#include <thread>
#include <utility>

#include "absl/time/time.h"
#include "checkpoint/util/test_util.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using testing_util::AwaitPauseWaiters;

TEST(PauseGateTest, AnOpenGateLetsThrough) {
  PauseGate gate;
  EXPECT_FALSE(gate.held());
  gate.WaitWhileHeld();
  EXPECT_EQ(gate.waiting(), 0);
  EXPECT_EQ(gate.checks(), 1);
  EXPECT_EQ(gate.blocked(), 0);
  EXPECT_EQ(gate.waited(), absl::ZeroDuration());
}

TEST(PauseGateTest, AWaiterGoesOnWhenTheHoldEnds) {
  PauseGate gate;
  std::optional<PauseGate::Hold> hold(gate.Pause());
  EXPECT_TRUE(gate.held());
  std::atomic<bool> through{false};
  std::thread waiter([&] {
    gate.WaitWhileHeld();
    through = true;
  });
  const bool stopped = AwaitPauseWaiters(gate, 1, through);
  EXPECT_FALSE(through);
  hold.reset();
  waiter.join();
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(through);
  EXPECT_FALSE(gate.held());
  EXPECT_EQ(gate.waiting(), 0);
  EXPECT_EQ(gate.checks(), 1);
  EXPECT_EQ(gate.blocked(), 1);
}

TEST(PauseGateTest, TheGateOpensWhenTheLastHoldEnds) {
  PauseGate gate;
  std::optional<PauseGate::Hold> first(gate.Pause());
  std::optional<PauseGate::Hold> second(gate.Pause());
  std::atomic<int> through{0};
  std::atomic<bool> any_through{false};
  auto wait = [&] {
    gate.WaitWhileHeld();
    ++through;
    any_through = true;
  };
  std::thread a(wait);
  std::thread b(wait);
  const bool stopped = AwaitPauseWaiters(gate, 2, any_through);
  first.reset();
  // Still held: nobody was woken (the gate signals only when it opens).
  EXPECT_TRUE(gate.held());
  EXPECT_EQ(gate.waiting(), 2);
  EXPECT_EQ(through, 0);
  second.reset();
  a.join();
  b.join();
  EXPECT_TRUE(stopped);
  EXPECT_EQ(through, 2);
  EXPECT_EQ(gate.blocked(), 2);
  EXPECT_FALSE(gate.held());
}

TEST(PauseGateTest, AMovedHoldReleasesOnce) {
  PauseGate gate;
  {
    std::optional<PauseGate::Hold> moved_to;
    {
      PauseGate::Hold hold = gate.Pause();
      moved_to.emplace(std::move(hold));
    }
    // The moved-from hold is gone; the gate is held by the one moved to.
    EXPECT_TRUE(gate.held());
    { PauseGate::Hold other = gate.Pause(); }
    EXPECT_TRUE(gate.held());
  }
  EXPECT_FALSE(gate.held());
  // Released exactly once: a new hold closes the gate again, and its end
  // opens it.
  {
    PauseGate::Hold again = gate.Pause();
    EXPECT_TRUE(gate.held());
  }
  EXPECT_FALSE(gate.held());
}

}  // namespace
}  // namespace jobgraph

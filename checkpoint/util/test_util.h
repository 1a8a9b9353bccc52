// Helpers for the checkpoint package's tests: fresh temporary directories
// under the test's TEST_TMPDIR. Not thread-safe to share one TempDir between
// threads that delete it; each test makes its own.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_
#define JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_

#include <stdlib.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/pause_gate.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace testing_util {

// Waits until `gate` has `n` blocked waiters (inside WaitWhileHeld, past
// its check of the holds) and returns true; returns false as soon as `done`
// is set instead (the work that should have stopped at the gate ended). No
// clock: a test that holds the gate knows the waiters stopped there.
inline bool AwaitPauseWaiters(const PauseGate& gate, int n,
                              const std::atomic<bool>& done) {
  while (gate.waiting() != n) {
    if (done.load()) return gate.waiting() == n;
    std::this_thread::yield();
  }
  return true;
}

// Runs `work` on a thread of its own while `gate` is held; once it waits at
// the gate (or has ended without waiting there, which fails the test), calls
// `while_stopped`, then opens the gate and joins. Returns whether `work`
// stopped at the gate.
inline bool RunStoppedAtGate(PauseGate& gate, const std::function<void()>& work,
                             const std::function<void()>& while_stopped) {
  std::optional<PauseGate::Hold> hold(gate.Pause());
  std::atomic<bool> done{false};
  std::thread worker([&] {
    work();
    done = true;
  });
  const bool stopped = AwaitPauseWaiters(gate, 1, done);
  EXPECT_FALSE(done) << "the work ended without stopping at the gate";
  while_stopped();
  hold.reset();
  worker.join();
  return stopped;
}

// A new, empty directory that is deleted (with its contents) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = JoinPath(::testing::TempDir(), "ckpt_test.XXXXXX");
    CHECK(::mkdtemp(pattern.data()) != nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    absl::Status status = RemoveRecursively(path_);
    if (!status.ok()) LOG(WARNING) << status;
  }

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const {
    return JoinPath(path_, name);
  }

 private:
  std::string path_;
};

}  // namespace testing_util
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_

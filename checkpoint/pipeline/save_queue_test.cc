#include "checkpoint/pipeline/save_queue.h"

#include <condition_variable>
#include <mutex>
#include <thread>  // NOLINT(build/c++11)
#include <vector>

#include "gtest/gtest.h"

namespace jobgraph {
namespace {

TEST(SaveQueueTest, InlineRunsTheWorkBeforeRunReturns) {
  std::unique_ptr<SaveQueue> queue = NewInlineSaveQueue();
  EXPECT_TRUE(queue->runs_inline());
  std::vector<int> ran;
  queue->Run([&] { ran.push_back(1); });
  EXPECT_EQ(ran, std::vector<int>({1}));
  queue->Run([&] { ran.push_back(2); });
  EXPECT_EQ(ran, std::vector<int>({1, 2}));
  EXPECT_TRUE(queue->Idle());
}

// The background queue runs its work on one thread, in order, while the
// caller goes on; the caller sees the work's effects after Wait.
TEST(SaveQueueTest, BackgroundRunsInOrderOnOneThreadOfItsOwn) {
  std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
  EXPECT_FALSE(queue->runs_inline());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  // The first piece blocks until the caller releases it: the caller is not
  // waiting for it, and the queue is not idle meanwhile.
  queue->Run([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    ran.push_back(1);
    threads.push_back(std::this_thread::get_id());
  });
  for (int i = 2; i <= 4; ++i) {
    queue->Run([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  }
  EXPECT_FALSE(queue->Idle());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(ran.empty());
    release = true;
  }
  cv.notify_all();
  queue->Wait();
  EXPECT_TRUE(queue->Idle());
  EXPECT_EQ(ran, std::vector<int>({1, 2, 3, 4}));
  ASSERT_EQ(threads.size(), 4u);
  for (const std::thread::id& id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(SaveQueueTest, TheDestructorRunsWhatIsQueued) {
  std::vector<int> ran;
  {
    std::unique_ptr<SaveQueue> queue = NewBackgroundSaveQueue();
    for (int i = 0; i < 3; ++i) queue->Run([&, i] { ran.push_back(i); });
  }
  EXPECT_EQ(ran, std::vector<int>({0, 1, 2}));
}

}  // namespace
}  // namespace jobgraph

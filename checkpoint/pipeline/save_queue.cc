#include "checkpoint/pipeline/save_queue.h"

#include <malloc.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>  // NOLINT(build/c++11)
#include <utility>

namespace jobgraph {
namespace {

class InlineSaveQueue : public SaveQueue {
 public:
  bool runs_inline() const override { return true; }
  void Run(std::function<void()> work) override { work(); }
  void Wait() override {}
  bool Idle() override { return true; }
};

// std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
// system Abseil's mutex, and would report the hand-offs as races.
class BackgroundSaveQueue : public SaveQueue {
 public:
  BackgroundSaveQueue() : thread_([this] { Loop(); }) {}
  ~BackgroundSaveQueue() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  bool runs_inline() const override { return false; }

  void Run(std::function<void()> work) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

  void Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return queued_.empty() && !running_; });
  }

  bool Idle() override {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_.empty() && !running_;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return quit_ || !queued_.empty(); });
      if (queued_.empty()) return;  // quit_, and nothing left to run
      std::function<void()> work = std::move(queued_.front());
      queued_.pop_front();
      running_ = true;
      lock.unlock();
      work();
      // Whatever the work held (a snapshot) is freed here, on this thread.
      work = nullptr;
      lock.lock();
      running_ = false;
      cv_.notify_all();
      if (queued_.empty()) {
        // The save's serialized values (a copy of each tensor chunk, up to
        // 64 MiB each) came from this thread's own malloc arena, which glibc
        // keeps once they are freed: up to 64 MiB that the process would
        // hold between saves, beyond the copy-on-write copies. Give it
        // back, once nothing waits for this thread.
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queued_;
  bool running_ = false;
  bool quit_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

std::unique_ptr<SaveQueue> NewInlineSaveQueue() {
  return std::make_unique<InlineSaveQueue>();
}

std::unique_ptr<SaveQueue> NewBackgroundSaveQueue() {
  return std::make_unique<BackgroundSaveQueue>();
}

}  // namespace jobgraph

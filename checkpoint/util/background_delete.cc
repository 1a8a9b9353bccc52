#include "checkpoint/util/background_delete.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

class Deleter {
 public:
  // Never destroyed: the thread may still be deleting at exit, and must not
  // find its queue freed under it.
  static Deleter& Get() {
    static Deleter* deleter = new Deleter;
    return *deleter;
  }

  void Enqueue(std::string path) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    queue_.push_back(std::move(path));
    ++enqueued_;
    work_.notify_one();
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t target = enqueued_;
    progress_.wait(lock, [&] { return finished_ >= target; });
  }

  int64_t failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

 private:
  Deleter() = default;

  void Loop() {
    for (;;) {
      std::string path;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [&] { return !queue_.empty(); });
        path = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status status = RemoveRecursively(path);
      const bool failed = !status.ok() && !absl::IsNotFound(status);
      // Logs only failures: this thread may still run while the process
      // exits and tears down glog.
      if (failed) {
        LOG(ERROR) << "background delete of " << path << " failed: " << status;
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++finished_;
      if (failed) ++failures_;
      progress_.notify_all();
    }
  }

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for
  // ThreadSanitizer, which then cannot see std::mutex ordering the queue
  // between the two threads; libstdc++'s mutex is pthreads, which it sees.
  std::mutex mu_;
  std::condition_variable work_;      // notified when the queue gets a path
  std::condition_variable progress_;  // notified when a deletion finishes
  // The fields below are guarded by mu_.
  bool started_ = false;
  std::deque<std::string> queue_;
  // Deletions queued and finished (successfully or not) so far; Wait()
  // waits for `finished_` to reach the `enqueued_` it saw.
  int64_t enqueued_ = 0;
  int64_t finished_ = 0;
  int64_t failures_ = 0;
};

}  // namespace

absl::Status DeleteInBackground(std::string path) {
  if (path.empty() || path.find_first_not_of('/') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to delete '", path, "' in the background"));
  }
  Deleter::Get().Enqueue(std::move(path));
  return absl::OkStatus();
}

void WaitForBackgroundDeletes() { Deleter::Get().Wait(); }

int64_t BackgroundDeleteFailures() { return Deleter::Get().failures(); }

}  // namespace jobgraph

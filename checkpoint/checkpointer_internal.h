// Internal to the Checkpointer (checkpointer.cc, checkpointer_save.cc,
// checkpointer_restore.cc): the helpers its parts share, and the thread that
// runs background saves. Not for other users.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINTER_INTERNAL_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINTER_INTERNAL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>  // NOLINT(build/c++11)
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "glog/logging.h"

namespace jobgraph {
namespace checkpointer_internal {

int64_t MicrosSince(absl::Time start);

// Whether the committed `entry` (may be null) is a preemption checkpoint
// taken in the middle of init, whose blob list is fixed only when init ends.
bool StoppedInInit(const CommittedEpoch* entry);

// `s` with "<what>: " before its message (OK stays OK).
absl::Status Annotate(const absl::Status& s, absl::string_view what);

// The directory exists (created if needed) and this process may create
// databases in it. Unavailable either way, as Caffe2's cp_accessible()
// answers: the save cannot happen now, and a later one may.
absl::Status PrepareDirectory(const std::string& dir);

// One thread that runs one save at a time.
class SaveThread {
 public:
  SaveThread() : thread_([this] { Loop(); }) {}
  SaveThread(const SaveThread&) = delete;
  SaveThread& operator=(const SaveThread&) = delete;
  ~SaveThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Starts `save`; the thread must be idle (Wait() returned).
  void Start(std::function<BackgroundSaveResult()> save) {
    std::lock_guard<std::mutex> lock(mu_);
    CHECK(!pending_ && !result_.has_value()) << "a save is already in flight";
    save_ = std::move(save);
    pending_ = true;
    cv_.notify_all();
  }

  // Blocks until no save runs; the result of the one that ran, if any.
  // Called between groups only (see done_).
  std::optional<BackgroundSaveResult> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !pending_; });
    Retire();
    return std::exchange(result_, std::nullopt);
  }

  // The result if the save has finished; does not block. Called between
  // groups only.
  std::optional<BackgroundSaveResult> TakeIfDone() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_) return std::nullopt;
    Retire();
    return std::exchange(result_, std::nullopt);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return quit_ || pending_; });
      if (pending_) {
        std::function<BackgroundSaveResult()> save = std::move(save_);
        // The snapshot of the save before the previous one: retired at a
        // boundary since, so no operator can point into it (see done_).
        std::function<BackgroundSaveResult()> retired = std::move(retired_);
        lock.unlock();
        retired = nullptr;  // frees it here, off the job's threads
        BackgroundSaveResult result = save();
        lock.lock();
        done_ = std::move(save);
        result_ = std::move(result);
        pending_ = false;
        cv_.notify_all();
        continue;
      }
      if (quit_) return;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Moves done_ to retired_, where the next save frees it.
  void Retire() {
    if (done_) retired_ = std::move(done_);
  }

  std::function<BackgroundSaveResult()> save_;
  // The save that ran; its function holds the snapshot. The snapshot must
  // outlive the epoch during which the save ended: an operator of that
  // epoch that made its own copy of a snapshotted tensor (copy-on-write) may
  // still read the snapshot's storage through a pointer taken before the
  // copy (in-place operators). So it is never freed when the save ends, but
  // retired when a job thread takes the result at the next boundary, and
  // freed by this thread at the start of the next save (or with the
  // SaveThread), when no operator can point into it any more.
  std::function<BackgroundSaveResult()> done_;
  std::function<BackgroundSaveResult()> retired_;
  bool pending_ = false;
  bool quit_ = false;
  std::optional<BackgroundSaveResult> result_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace checkpointer_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINTER_INTERNAL_H_

// TimerInstance: the value of a timer blob, made by TimerBegin and read by
// TimerEnd, TimerGet and TimerGetAndEnd (Caffe2's stats timer ops).
//
// It measures steady-clock time from Begin() to now or to End(). The blob owns
// it; its registered blob type name is Caffe2's "TimerInstance*". It has no
// serializer on purpose: a timer means nothing after a restart, so
// checkpointing a workspace that holds one fails, naming the blob.
//
// Thread-safe: a reporter step may read a timer while its task ends it.

#ifndef JOBGRAPH_ENGINE_OPS_TIMER_OPS_H_
#define JOBGRAPH_ENGINE_OPS_TIMER_OPS_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jobgraph {

class TimerInstance {
 public:
  // A stopped timer. `name` is Caffe2's counter_name: the stat it reports.
  explicit TimerInstance(std::string name = "") : name_(std::move(name)) {}
  TimerInstance(const TimerInstance&) = delete;
  TimerInstance& operator=(const TimerInstance&) = delete;

  const std::string& name() const { return name_; }
  bool running() const;

  // Starts the timer; FailedPrecondition if it is running.
  absl::Status Begin();
  // Stops the timer and returns the nanoseconds since Begin();
  // FailedPrecondition if it is stopped.
  absl::StatusOr<int64_t> End();
  // Nanoseconds since Begin(); FailedPrecondition if the timer is stopped.
  absl::StatusOr<int64_t> ElapsedNanos() const;

 private:
  using Clock = std::chrono::steady_clock;

  int64_t ElapsedNanosLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status NotRunningError() const;

  const std::string name_;
  mutable std::mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point start_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_OPS_TIMER_OPS_H_

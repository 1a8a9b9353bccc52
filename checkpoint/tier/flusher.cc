#include "checkpoint/tier/flusher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {

Flusher::Flusher(FlushRequest request) : request_(std::move(request)) {}

Flusher::~Flusher() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    changed_.notify_all();
    if (waiting_.has_value()) {
      LOG(WARNING) << "epoch " << *waiting_ << " of " << request_.local
                   << " was never flushed to " << request_.shared;
    }
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Flusher::Lock() {
  std::unique_lock<std::mutex> lock(mu_);
  return LockLocked();
}

absl::Status Flusher::LockLocked() {
  if (!locks_.empty()) return absl::OkStatus();
  JG_RETURN_IF_ERROR(PrepareCheckpointDirectory(request_.shared));
  std::vector<std::unique_ptr<NodeLock>> locks;
  for (const std::string& node : request_.nodes) {
    JG_ASSIGN_OR_RETURN(std::unique_ptr<NodeLock> held,
                        NodeLock::Acquire(request_.shared, node));
    locks.push_back(std::move(held));
  }
  locks_ = std::move(locks);
  return absl::OkStatus();
}

void Flusher::Committed(int64_t epoch, bool flush) {
  std::unique_lock<std::mutex> lock(mu_);
  newest_committed_ = epoch;
  ++generation_;
  if (!flush) return;
  waiting_ = epoch;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  changed_.notify_all();
}

void Flusher::Flushed(int64_t epoch) {
  std::unique_lock<std::mutex> lock(mu_);
  stats_.newest_flushed = epoch;
}

void Flusher::FlushNewest() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!newest_committed_.has_value() || clean_generation_ == generation_) {
    return;
  }
  // The copy in progress flushes it already.
  if (copying_ == newest_committed_ && copying_generation_ == generation_) {
    return;
  }
  waiting_ = *newest_committed_;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  changed_.notify_all();
}

absl::Status Flusher::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(
      lock, [this] { return !waiting_.has_value() && !copying_.has_value(); });
  return std::exchange(failure_, absl::OkStatus());
}

std::vector<int64_t> Flusher::Pinned() const {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<int64_t> pinned;
  for (const std::optional<int64_t>& epoch :
       {copying_, waiting_, stats_.newest_flushed}) {
    if (epoch.has_value()) pinned.push_back(*epoch);
  }
  return pinned;
}

absl::Duration Flusher::PausedSoFar() const {
  return request_.pause != nullptr ? request_.pause->waited()
                                   : absl::ZeroDuration();
}

Flusher::Stats Flusher::stats() const {
  std::unique_lock<std::mutex> lock(mu_);
  return stats_;
}

void Flusher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || waiting_.has_value(); });
    if (stop_) return;
    const int64_t epoch = *std::exchange(waiting_, std::nullopt);
    const int64_t generation = generation_;
    copying_ = epoch;
    copying_generation_ = generation;
    FlushRequest request = request_;
    request.epoch = epoch;
    // A run that could not lock the shared directory at its start (it did
    // not exist yet, say) locks it at its first flush.
    const absl::Status locked = LockLocked();
    lock.unlock();
    const absl::Time start = absl::Now();
    const absl::Duration paused_before = PausedSoFar();
    absl::StatusOr<FlushResult> flushed =
        locked.ok() ? FlushEpoch(request) : absl::StatusOr<FlushResult>(locked);
    const absl::Duration took = absl::Now() - start;
    const absl::Duration paused = PausedSoFar() - paused_before;
    lock.lock();
    copying_.reset();
    changed_.notify_all();
    if (!flushed.ok()) {
      const absl::Status failed =
          Annotate(flushed.status(),
                   absl::StrCat("cannot flush epoch ", epoch, " of ",
                                request_.local, " to ", request_.shared));
      LOG(ERROR) << failed.message();
      failure_ = failed;
      continue;
    }
    if (!flushed->already_there) {
      ++stats_.epochs_flushed;
      stats_.bytes_copied += flushed->bytes_copied;
      LOG(INFO) << "epoch " << epoch << " flushed to " << request_.shared
                << ": " << flushed->bytes_copied << " bytes in "
                << absl::FormatDuration(took)
                << (paused > absl::ZeroDuration()
                        ? absl::StrCat(", ", absl::FormatDuration(paused),
                                       " of it waiting for saves")
                        : "");
    }
    stats_.flush_micros += absl::ToInt64Microseconds(took);
    stats_.paused_micros += absl::ToInt64Microseconds(paused);
    // The newest flush is what the shared log's history ends with (a
    // flush commit drops the job's later entries there), even when it is
    // an older epoch than an earlier flush's (a run that resumed further
    // back).
    stats_.newest_flushed = epoch;
    // A failure that a later flush made good is no longer one.
    failure_ = absl::OkStatus();
    if (newest_committed_ == epoch && generation == generation_) {
      clean_generation_ = generation;
    }
  }
}

}  // namespace jobgraph

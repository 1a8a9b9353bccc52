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
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (waiting_.has_value()) {
      LOG(WARNING) << "epoch " << *waiting_ << " of " << request_.local
                   << " was never flushed to " << request_.shared;
    }
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Flusher::Lock() {
  absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
  newest_committed_ = epoch;
  ++generation_;
  if (!flush) return;
  waiting_ = epoch;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void Flusher::Flushed(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  stats_.newest_flushed = epoch;
}

void Flusher::FlushNewest() {
  absl::MutexLock lock(&mu_);
  if (!newest_committed_.has_value() || clean_generation_ == generation_) {
    return;
  }
  waiting_ = *newest_committed_;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

absl::Status Flusher::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Flusher* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
        return !f->waiting_.has_value() && !f->copying_.has_value();
      },
      this));
  return std::exchange(failure_, absl::OkStatus());
}

std::vector<int64_t> Flusher::Pinned() const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> pinned;
  for (const std::optional<int64_t>& epoch :
       {copying_, waiting_, stats_.newest_flushed}) {
    if (epoch.has_value()) pinned.push_back(*epoch);
  }
  return pinned;
}

Flusher::Stats Flusher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Flusher::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](Flusher* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu_) {
          return f->stop_ || f->waiting_.has_value();
        },
        this));
    if (stop_) return;
    const int64_t epoch = *std::exchange(waiting_, std::nullopt);
    const int64_t generation = generation_;
    copying_ = epoch;
    FlushRequest request = request_;
    request.epoch = epoch;
    // A run that could not lock the shared directory at its start (it did
    // not exist yet, say) locks it at its first flush.
    const absl::Status locked = LockLocked();
    mu_.Unlock();
    const absl::Time start = absl::Now();
    absl::StatusOr<FlushResult> flushed =
        locked.ok() ? FlushEpoch(request) : absl::StatusOr<FlushResult>(locked);
    const absl::Duration took = absl::Now() - start;
    mu_.Lock();
    copying_.reset();
    if (!flushed.ok()) {
      const absl::Status failed =
          Annotate(flushed.status(),
                   absl::StrCat("cannot flush epoch ", epoch, " of ",
                                request_.local, " to ", request_.shared));
      LOG(ERROR) << failed.message();
      if (failure_.ok()) failure_ = failed;
      continue;
    }
    if (!flushed->already_there) {
      ++stats_.epochs_flushed;
      stats_.bytes_copied += flushed->bytes_copied;
      LOG(INFO) << "epoch " << epoch << " flushed to " << request_.shared
                << ": " << flushed->bytes_copied << " bytes in "
                << absl::FormatDuration(took);
    }
    stats_.flush_micros += absl::ToInt64Microseconds(took);
    if (!stats_.newest_flushed.has_value() || *stats_.newest_flushed < epoch) {
      stats_.newest_flushed = epoch;
    }
    if (newest_committed_ == epoch && generation == generation_) {
      clean_generation_ = generation;
    }
  }
}

}  // namespace jobgraph

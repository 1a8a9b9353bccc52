#include "checkpoint/util/pause_gate.h"

#include <chrono>

#include "glog/logging.h"

namespace jobgraph {

PauseGate::Hold::~Hold() {
  if (gate_ != nullptr) gate_->Release();
}

PauseGate::Hold PauseGate::Pause() {
  std::lock_guard<std::mutex> lock(mu_);
  holds_.fetch_add(1, std::memory_order_acq_rel);
  return Hold(this);
}

void PauseGate::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  const int holds = holds_.fetch_sub(1, std::memory_order_acq_rel);
  CHECK_GT(holds, 0) << "a PauseGate released more often than held";
  if (holds == 1) {
    opened_.notify_all();
  }
}

void PauseGate::WaitWhileHeld() {
  checks_.fetch_add(1, std::memory_order_relaxed);
  if (holds_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (holds_.load(std::memory_order_acquire) == 0) return;
  const auto start = std::chrono::steady_clock::now();
  blocked_.fetch_add(1, std::memory_order_relaxed);
  waiting_.fetch_add(1, std::memory_order_acq_rel);
  opened_.wait(lock,
               [this] { return holds_.load(std::memory_order_acquire) == 0; });
  waiting_.fetch_sub(1, std::memory_order_acq_rel);
  waited_nanos_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count(),
                          std::memory_order_relaxed);
}

absl::Duration PauseGate::waited() const {
  return absl::Nanoseconds(waited_nanos_.load(std::memory_order_relaxed));
}

}  // namespace jobgraph

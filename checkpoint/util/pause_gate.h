// PauseGate: lets work the job waits on pause background work that would
// share the machine with it. The foreground holds the gate (Pause) while it
// runs; the background calls WaitWhileHeld between its steps, which returns
// at once while nobody holds the gate and otherwise once nobody does.
//
// A Checkpointer with a local tier holds one: its save pipeline holds it
// while a save writes the epoch's databases, and the background flush of the
// local tier (Flusher) waits at the next chunk of its copy (DbType::Copy's
// CopyOptions::pause). On two cores the copy (read(2), CRC-32C, the write)
// beside a save's write slowed the write by about a tenth, 10-12 ms of 120
// (tier_bench part 3); the save is what the job waits for, the flush is
// not.
//
// Whoever holds the gate must not wait for the background work that waits
// on it: the hold ends before anything waits for a flush.
//
// Thread-safe. The gate must outlive its holds and its waiters.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_PAUSE_GATE_H_
#define JOBGRAPH_CHECKPOINT_UTIL_PAUSE_GATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/time/time.h"

namespace jobgraph {

class PauseGate {
 public:
  // A hold of the gate, released when it goes (or is moved from and then
  // goes: only the object moved to releases it).
  class Hold {
   public:
    Hold(Hold&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Hold& operator=(Hold&&) = delete;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

   private:
    friend class PauseGate;
    explicit Hold(PauseGate* gate) : gate_(gate) {}
    PauseGate* gate_;
  };

  PauseGate() = default;
  PauseGate(const PauseGate&) = delete;
  PauseGate& operator=(const PauseGate&) = delete;

  // Holds the gate until the result goes. Holds nest: the gate opens when
  // the last one goes.
  [[nodiscard]] Hold Pause();

  // Returns once nobody holds the gate; at once (an atomic increment and
  // load) while nobody does.
  void WaitWhileHeld();

  // Whether anybody holds the gate now.
  bool held() const { return holds_.load(std::memory_order_acquire) > 0; }
  // The calls of WaitWhileHeld blocked now (a test waits for one).
  int waiting() const { return waiting_.load(std::memory_order_acquire); }
  // Over all calls so far: the calls of WaitWhileHeld (a test counts a
  // copy's chunks by them), those that blocked, and the time they blocked.
  int64_t checks() const { return checks_.load(std::memory_order_relaxed); }
  int64_t blocked() const { return blocked_.load(std::memory_order_relaxed); }
  absl::Duration waited() const;

 private:
  void Release();

  // Read without mu_ by WaitWhileHeld's fast path; written under mu_.
  std::atomic<int> holds_{0};
  std::atomic<int> waiting_{0};
  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex.
  std::mutex mu_;
  std::condition_variable opened_;
  std::atomic<int64_t> checks_{0};
  std::atomic<int64_t> blocked_{0};
  std::atomic<int64_t> waited_nanos_{0};
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_PAUSE_GATE_H_

// Counter: an atomic int64 held in a blob, for CreateCounter / CountDown /
// CountUp and friends. Counters are checkpointed (engine/serialization.h) so
// epoch limiters and reader limits resume exactly.
//
// Thread-safe: every method is atomic.

#ifndef JOBGRAPH_ENGINE_COUNTER_H_
#define JOBGRAPH_ENGINE_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace jobgraph {

class Counter {
 public:
  explicit Counter(int64_t count = 0) : count_(count) {}

  // True iff the value before the decrement was <= 0; always decrements.
  bool CountDown() { return count_.fetch_sub(1) <= 0; }
  // Returns the old value, then increments.
  int64_t CountUp() { return count_.fetch_add(1); }
  // Sets a new value and returns the previous one.
  int64_t Reset(int64_t count) { return count_.exchange(count); }
  int64_t Retrieve() const { return count_.load(); }
  bool IsDone() const { return count_.load() <= 0; }

 private:
  std::atomic<int64_t> count_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_COUNTER_H_

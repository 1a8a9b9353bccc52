#include "checkpoint/util/io_faults.h"

#include <atomic>

namespace jobgraph {
namespace io_faults {
namespace {

std::atomic<bool> armed{false};
std::atomic<int64_t> calls{0};
std::atomic<int64_t> fail_at{0};
std::atomic<int> error{0};

}  // namespace

void Arm(int64_t n, int err) {
  calls.store(0);
  fail_at.store(n);
  error.store(err);
  armed.store(true);
}

void Disarm() { armed.store(false); }

int64_t Calls() { return calls.load(); }

int Next() {
  if (!armed.load(std::memory_order_relaxed)) return 0;
  return calls.fetch_add(1) + 1 == fail_at.load() ? error.load() : 0;
}

}  // namespace io_faults
}  // namespace jobgraph

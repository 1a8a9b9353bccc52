// crc32c_bench: throughput of jobgraph's CRC-32C (hardware three-stream and
// portable slicing-by-8) beside memcpy of the same buffer, in one run.
//
// Run: ./tools/bazel run -c opt //tools/bench:crc32c_bench

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "checkpoint/util/crc32c.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best of `reps` passes over `bytes` (a 16 MiB buffer fits in this VM's L3).
template <typename F>
double BestGBps(size_t bytes, int reps, F&& f) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    f();
    const double s =
        std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, bytes / s / 1e9);
  }
  return best;
}

}  // namespace

int main() {
  constexpr size_t kBytes = size_t{16} << 20;
  constexpr int kReps = 20;
  std::vector<char> src(kBytes), dst(kBytes);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<char>(i * 131);
  std::memset(dst.data(), 0, kBytes);
  volatile uint32_t sink = 0;

  const double memcpy_gbps = BestGBps(
      kBytes, kReps, [&] { std::memcpy(dst.data(), src.data(), kBytes); });
  const double portable = BestGBps(kBytes, kReps, [&] {
    sink = jobgraph::crc32c::ExtendPortable(0, src.data(), kBytes);
  });
  double hardware = 0;
  if (jobgraph::crc32c::HardwareAvailable()) {
    hardware = BestGBps(kBytes, kReps, [&] {
      sink = jobgraph::crc32c::ExtendHardware(0, src.data(), kBytes);
    });
  }
  const double small = BestGBps(kBytes, kReps, [&] {
    // 4 KiB pieces: the per-call overhead and the short-stream path.
    uint32_t crc = 0;
    for (size_t off = 0; off < kBytes; off += 4096) {
      crc = jobgraph::crc32c::Extend(crc, src.data() + off, 4096);
    }
    sink = crc;
  });
  (void)sink;
  std::printf("crc32c_bench: 16 MiB buffer, best of %d (GB = 1e9 bytes)\n",
              kReps);
  std::printf("  memcpy                  %6.1f GB/s\n", memcpy_gbps);
  std::printf("  crc32c hardware (3-way) %6.1f GB/s%s\n", hardware,
              jobgraph::crc32c::HardwareAvailable() ? "" : " (no SSE4.2)");
  std::printf("  crc32c portable         %6.1f GB/s\n", portable);
  std::printf("  crc32c Extend, 4 KiB    %6.1f GB/s\n", small);
  std::printf("crc32c_bench: hardware_vs_memcpy=%.2f portable_vs_memcpy=%.2f\n",
              hardware / memcpy_gbps, portable / memcpy_gbps);
  return 0;
}

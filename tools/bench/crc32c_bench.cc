// crc32c_bench: throughput of jobgraph's CRC-32C (hardware three-stream and
// portable slicing-by-8) beside a plain read of the same buffer, in one run.
// A checksum reads its bytes once and writes nothing, so its baseline is a
// loop that reads every 8-byte word once (summed into four accumulators, so
// that the loop is bound by loads, not by one chain of additions); memcpy,
// which reads and writes every byte, is printed beside it for scale.
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
  volatile uint64_t read_sink = 0;
  const double read_gbps = BestGBps(kBytes, kReps, [&] {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t off = 0; off < kBytes; off += 32) {
      uint64_t w[4];
      std::memcpy(w, src.data() + off, sizeof(w));
      a += w[0];
      b += w[1];
      c += w[2];
      d += w[3];
    }
    read_sink = a + b + c + d;
  });
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
  (void)read_sink;
  std::printf("crc32c_bench: 16 MiB buffer, best of %d (GB = 1e9 bytes)\n",
              kReps);
  std::printf("  read (the baseline)     %6.1f GB/s\n", read_gbps);
  std::printf("  memcpy (reads + writes) %6.1f GB/s\n", memcpy_gbps);
  std::printf("  crc32c hardware (3-way) %6.1f GB/s%s\n", hardware,
              jobgraph::crc32c::HardwareAvailable() ? "" : " (no SSE4.2)");
  std::printf("  crc32c portable         %6.1f GB/s\n", portable);
  std::printf("  crc32c Extend, 4 KiB    %6.1f GB/s\n", small);
  std::printf("crc32c_bench: hardware_vs_read=%.2f portable_vs_read=%.2f\n",
              hardware / read_gbps, portable / read_gbps);
  return 0;
}

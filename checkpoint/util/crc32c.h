// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected, initial and final
// value 0xFFFFFFFF): the checksum of commit logs, blob indexes and values.
//
// Abseil 20220623 has no CRC-32C and Debian's LevelDB does not install its
// own, so this is the project's. On x86-64 CPUs with SSE4.2 (checked at run
// time) it uses the CRC32 instruction on three interleaved streams, which
// hides the instruction's latency; elsewhere a portable slicing-by-8 table
// version. Both give identical results.
//
// All functions are pure and thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_CRC32C_H_
#define JOBGRAPH_CHECKPOINT_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace jobgraph {
namespace crc32c {

// The CRC-32C of A followed by data[0, n), given crc = CRC-32C of A. So
// Extend(0, data, n) is the CRC-32C of data, and a buffer can be checksummed
// piece by piece.
uint32_t Extend(uint32_t crc, const void* data, size_t n);

// The CRC-32C of A followed by B, given crc_a = CRC-32C of A, crc_b = CRC-32C
// of B and len_b = |B|, without reading either (O(log len_b) steps). Lets a
// writer checksum a large buffer once and derive the checksums of the blocks
// and files that contain it.
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// The implementations Extend chooses between, for tests and benchmarks.
// Whether this CPU has the SSE4.2 CRC32 instruction.
bool HardwareAvailable();
// Requires HardwareAvailable().
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n);
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace crc32c

// The CRC-32C of data[0, n). Crc32c("123456789", 9) == 0xE3069283.
inline uint32_t Crc32c(const void* data, size_t n) {
  return crc32c::Extend(0, data, n);
}
inline uint32_t Crc32c(absl::string_view data) {
  return crc32c::Extend(0, data.data(), data.size());
}

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_CRC32C_H_

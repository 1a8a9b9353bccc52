// CRC-32C of a concatenation from the CRC-32Cs of its parts, so `ckpt` can
// print one checksum per blob (the CRC-32C of all its values, in blob index
// order) from the per-value checksums in a blob index, without
// reading the values.
//
// Pure and thread-safe.

#ifndef JOBGRAPH_TOOLS_CKPT_CRC32C_COMBINE_H_
#define JOBGRAPH_TOOLS_CKPT_CRC32C_COMBINE_H_

#include <cstdint>

namespace jobgraph {
namespace ckpt {

// Given crc1 = Crc32c(A) and crc2 = Crc32c(B) with B of `len2` bytes,
// returns Crc32c(A followed by B). Costs O(log len2).
uint32_t Crc32cCombine(uint32_t crc1, uint32_t crc2, uint64_t len2);

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_CRC32C_COMBINE_H_

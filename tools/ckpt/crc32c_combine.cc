#include "tools/ckpt/crc32c_combine.h"

namespace jobgraph {
namespace ckpt {
namespace {

// Appending n zero bits to a message is a linear map on the (reflected) CRC
// register; these are its 32x32 matrices over GF(2), one column per word
// (zlib's crc32_combine, with the Castagnoli polynomial). The pre- and
// post-conditioning by 0xFFFFFFFF cancels out in the final XOR.
constexpr uint32_t kReflectedPolynomial = 0x82f63b78;

uint32_t Gf2MatrixTimes(const uint32_t* matrix, uint32_t vector) {
  uint32_t sum = 0;
  for (; vector != 0; vector >>= 1, ++matrix) {
    if (vector & 1) sum ^= *matrix;
  }
  return sum;
}

void Gf2MatrixSquare(uint32_t* square, const uint32_t* matrix) {
  for (int n = 0; n < 32; ++n) square[n] = Gf2MatrixTimes(matrix, matrix[n]);
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  if (len2 == 0) return crc1;
  uint32_t even[32];              // operator for an even power of two zero bits
  uint32_t odd[32];               // operator for an odd power of two zero bits
  odd[0] = kReflectedPolynomial;  // one zero bit
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) {
    odd[n] = row;
    row <<= 1;
  }
  Gf2MatrixSquare(even, odd);  // two zero bits
  Gf2MatrixSquare(odd, even);  // four zero bits
  // Apply len2 zero bytes to crc1, one bit of len2 at a time.
  while (true) {
    Gf2MatrixSquare(even, odd);
    if (len2 & 1) crc1 = Gf2MatrixTimes(even, crc1);
    len2 >>= 1;
    if (len2 == 0) break;
    Gf2MatrixSquare(odd, even);
    if (len2 & 1) crc1 = Gf2MatrixTimes(odd, crc1);
    len2 >>= 1;
    if (len2 == 0) break;
  }
  return crc1 ^ crc2;
}

}  // namespace ckpt
}  // namespace jobgraph

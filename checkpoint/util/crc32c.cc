#include "checkpoint/util/crc32c.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "glog/logging.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace jobgraph {
namespace crc32c {
namespace {

// The reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82F63B78;

// kTables[k][b] is the CRC register after feeding byte b followed by k zero
// bytes, starting from a zero register: what slicing-by-8 needs.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    }
    tables[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = tables[k - 1][b];
      tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFF];
    }
  }
  return tables;
}

constexpr Tables kTables = MakeTables();

inline uint64_t LoadLittleEndian64(const uint8_t* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));  // One load; GCC does not merge bytes.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  word = __builtin_bswap64(word);
#endif
  return word;
}

// Advances a raw CRC register (no pre- or post-inversion) over n bytes.
uint32_t RawPortable(uint32_t crc, const uint8_t* p, size_t n) {
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = kTables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    --n;
  }
  while (n >= 8) {
    const uint64_t word = LoadLittleEndian64(p);
    const uint32_t lo = static_cast<uint32_t>(word) ^ crc;
    const uint32_t hi = static_cast<uint32_t>(word >> 32);
    crc = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^
          kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
          kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    crc = kTables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    --n;
  }
  return crc;
}

#if defined(__x86_64__)

// Stream lengths for the three-way interleaved hardware loop: long streams for
// the bulk of big buffers, short ones so that buffers of a few hundred bytes
// are interleaved too. Both are multiples of 8.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

// The linear map "advance a raw CRC register over `length` zero bytes", as
// four byte-indexed tables. Because a raw CRC is linear,
//   raw(c, A || B) = Shift_|B|(raw(c, A)) ^ raw(0, B),
// which is how three streams computed independently are joined.
class ZeroShift {
 public:
  explicit ZeroShift(size_t length) {
    uint32_t columns[32];
    for (int bit = 0; bit < 32; ++bit) {
      const uint32_t crc = uint32_t{1} << bit;
      columns[bit] = RawZeros(crc, length);
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t value = 0;
        for (int j = 0; j < 8; ++j) {
          if (b & (1u << j)) value ^= columns[8 * k + j];
        }
        tables_[k][b] = value;
      }
    }
  }

  uint32_t operator()(uint32_t crc) const {
    return tables_[0][crc & 0xFF] ^ tables_[1][(crc >> 8) & 0xFF] ^
           tables_[2][(crc >> 16) & 0xFF] ^ tables_[3][crc >> 24];
  }

 private:
  static uint32_t RawZeros(uint32_t crc, size_t length) {
    for (size_t i = 0; i < length; ++i) {
      crc = kTables[0][crc & 0xFF] ^ (crc >> 8);
    }
    return crc;
  }

  uint32_t tables_[4][256];
};

struct Shifts {
  ZeroShift long_shift{kLong};
  ZeroShift short_shift{kShort};
};

const Shifts& GetShifts() {
  static const Shifts* shifts = new Shifts;  // ~1 ms once; never destroyed.
  return *shifts;
}

// Runs the three streams [p, p+len), [p+len, p+2len), [p+2len, p+3len) and
// joins them into `crc`.
__attribute__((target("sse4.2"))) inline uint64_t ThreeStreams(
    uint64_t crc, const uint8_t* p, size_t len, const ZeroShift& shift) {
  uint64_t crc1 = 0;
  uint64_t crc2 = 0;
  const uint8_t* const end = p + len;
  do {
    uint64_t w0, w1, w2;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + len, 8);
    std::memcpy(&w2, p + 2 * len, 8);
    crc = _mm_crc32_u64(crc, w0);
    crc1 = _mm_crc32_u64(crc1, w1);
    crc2 = _mm_crc32_u64(crc2, w2);
    p += 8;
  } while (p < end);
  crc = shift(static_cast<uint32_t>(crc)) ^ crc1;
  crc = shift(static_cast<uint32_t>(crc)) ^ crc2;
  return crc;
}

#endif  // defined(__x86_64__)

using ExtendFunction = uint32_t (*)(uint32_t, const void*, size_t);

ExtendFunction ChooseExtend() {
  return HardwareAvailable() ? &ExtendHardware : &ExtendPortable;
}

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  return ~RawPortable(~crc, static_cast<const uint8_t*>(data), n);
}

#if defined(__x86_64__)

bool HardwareAvailable() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return available;
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc,
                                                          const void* data,
                                                          size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t raw = ~crc;
  // Aligned 8-byte loads are faster across cache lines.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    raw = _mm_crc32_u8(static_cast<uint32_t>(raw), *p++);
    --n;
  }
  if (n >= 3 * kShort) {
    const Shifts& shifts = GetShifts();
    while (n >= 3 * kLong) {
      raw = ThreeStreams(raw, p, kLong, shifts.long_shift);
      p += 3 * kLong;
      n -= 3 * kLong;
    }
    while (n >= 3 * kShort) {
      raw = ThreeStreams(raw, p, kShort, shifts.short_shift);
      p += 3 * kShort;
      n -= 3 * kShort;
    }
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    raw = _mm_crc32_u64(raw, word);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    raw = _mm_crc32_u8(static_cast<uint32_t>(raw), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(raw);
}

#else  // !defined(__x86_64__)

bool HardwareAvailable() { return false; }

uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n) {
  LOG(FATAL) << "crc32c::ExtendHardware called without hardware support";
}

#endif  // defined(__x86_64__)

namespace {

// a(x) * b(x) modulo the polynomial, both in the reflected bit order of the
// CRC (bit 31 is x^0).
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = uint32_t{1} << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
}

// x^(2^k) modulo the polynomial, k = 0..66: Combine starts at k = 3 (a byte
// is x^8) and a 64-bit length has 64 bits.
struct PowersOfX {
  uint32_t x2k[67];
  PowersOfX() {
    uint32_t p = uint32_t{1} << 30;  // x^1
    for (uint32_t& power : x2k) {
      power = p;
      p = MultiplyModP(p, p);
    }
  }
};

}  // namespace

uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  static const PowersOfX* const powers = new PowersOfX;
  // Appending len_b bytes multiplies A's remainder by x^(8 len_b); the
  // conditioning of the initial and final values cancels out (zlib's
  // crc32_combine, with the Castagnoli polynomial).
  uint32_t shift = uint32_t{1} << 31;  // x^0
  uint64_t n = len_b;
  for (int k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) shift = MultiplyModP(powers->x2k[k], shift);
  }
  return MultiplyModP(shift, crc_a) ^ crc_b;
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  static const ExtendFunction extend = ChooseExtend();
  return extend(crc, data, n);
}

}  // namespace crc32c
}  // namespace jobgraph

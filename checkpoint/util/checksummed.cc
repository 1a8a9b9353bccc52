#include "checkpoint/util/checksummed.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/crc32c.h"

namespace jobgraph {
namespace {

// The first byte of every bare (unframed) record jobgraph ever wrote.
constexpr char kBareFirstByte = 0x08;

void StoreLittleEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(value >> (8 * i));
}

uint64_t LoadLittleEndian(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return value;
}

uint32_t FrameCrc(absl::string_view length_field, absl::string_view payload) {
  return crc32c::Extend(Crc32c(length_field), payload.data(), payload.size());
}

}  // namespace

std::string FrameChecksummed(absl::string_view payload) {
  char length_field[8];
  StoreLittleEndian(payload.size(), 8, length_field);
  char crc_field[4];
  StoreLittleEndian(FrameCrc(absl::string_view(length_field, 8), payload), 4,
                    crc_field);
  std::string framed;
  framed.reserve(kChecksummedHeaderBytes + payload.size());
  framed.append(kChecksummedMagic.data(), kChecksummedMagic.size());
  framed.append(length_field, 8);
  framed.append(crc_field, 4);
  framed.append(payload.data(), payload.size());
  return framed;
}

absl::StatusOr<Unframed> UnframeChecksummed(absl::string_view bytes,
                                            absl::string_view what) {
  if (!bytes.empty() && bytes[0] == kBareFirstByte) {
    return Unframed{std::string(bytes), /*checked=*/false};
  }
  if (bytes.size() < kChecksummedHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        what, " is damaged: ", bytes.size(), " bytes, shorter than the ",
        kChecksummedHeaderBytes, "-byte header of a checksummed record"));
  }
  if (bytes.substr(0, kChecksummedMagic.size()) != kChecksummedMagic) {
    return absl::DataLossError(
        absl::StrCat(what,
                     " is damaged: it does not start with a "
                     "checksummed record's header"));
  }
  const absl::string_view length_field = bytes.substr(8, 8);
  const uint64_t length = LoadLittleEndian(length_field.data(), 8);
  const uint64_t available = bytes.size() - kChecksummedHeaderBytes;
  if (length != available) {
    return absl::DataLossError(
        absl::StrCat(what, " is damaged: its header records ", length,
                     " bytes of payload but ", available, " follow (",
                     length > available ? "truncated" : "trailing bytes", ")"));
  }
  const absl::string_view payload = bytes.substr(kChecksummedHeaderBytes);
  const uint32_t stored =
      static_cast<uint32_t>(LoadLittleEndian(bytes.data() + 16, 4));
  const uint32_t actual = FrameCrc(length_field, payload);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat(
        what, " is damaged: CRC-32C ", absl::Hex(actual, absl::kZeroPad8),
        " does not match the recorded ", absl::Hex(stored, absl::kZeroPad8)));
  }
  return Unframed{std::string(payload), /*checked=*/true};
}

}  // namespace jobgraph

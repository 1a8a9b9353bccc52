// Self-checking records: a payload framed with its length and CRC-32C, so
// that a truncation or a flipped bit anywhere in it is detected.
//
// The commit log file and each database's blob index hold such a record.
// The frame is
//
//   magic   8 bytes  "JGCKSUM\n"
//   length  8 bytes  little-endian, bytes of payload
//   crc     4 bytes  little-endian, CRC-32C of the length field's 8 bytes
//                    followed by the payload
//   payload `length` bytes (a serialized proto)
//
// Files written before framing existed hold the bare proto, whose first byte
// is 0x08 (field 1, the format version, as a varint). The magic's first byte,
// 'J', differs from 0x08 in two bits, so one flipped bit can neither make a
// framed record look bare nor the reverse.
//
// Functions only; pure and thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_CHECKSUMMED_H_
#define JOBGRAPH_CHECKPOINT_UTIL_CHECKSUMMED_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

inline constexpr absl::string_view kChecksummedMagic = "JGCKSUM\n";
inline constexpr size_t kChecksummedHeaderBytes = 8 + 8 + 4;

// `payload` with the frame around it.
std::string FrameChecksummed(absl::string_view payload);

// What UnframeChecksummed found.
struct Unframed {
  // The payload; for a bare record, all of `bytes`.
  std::string payload;
  // False for a record written before framing existed: nothing checks it.
  bool checked = false;
};

// The payload of `bytes`. A record that starts with 0x08 is taken as bare
// (an older file) and returned unchecked; anything else must be a complete
// frame whose length and CRC-32C match, else DataLoss naming `what` (a file
// path or a key) and what is wrong with it.
absl::StatusOr<Unframed> UnframeChecksummed(absl::string_view bytes,
                                            absl::string_view what);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_CHECKSUMMED_H_

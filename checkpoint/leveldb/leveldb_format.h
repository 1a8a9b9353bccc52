// LevelDB 1.23's on-disk encodings (doc/table_format.md, doc/log_format.md
// and its VersionEdit), shared by the reader of finished databases
// (leveldb_tables.cc, leveldb_manifest.cc, leveldb_table_checks.cc) and the
// direct writer (leveldb_direct.cc, leveldb_table_writer.cc), so that both
// sides use one definition of every constant and field. Internal to the
// LevelDB adapter. All functions are pure and thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FORMAT_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace jobgraph {
namespace leveldb_format {

// Log files (a MANIFEST-* file is one): 32 KiB blocks of records, each with
// a header of masked CRC-32C (4), length (2) and type (1).
inline constexpr size_t kLogBlockSize = 32768;
inline constexpr size_t kLogHeaderSize = 7;
enum LogRecordType : uint8_t {
  kZeroType = 0,  // preallocated space
  kFull = 1,
  kFirst = 2,
  kMiddle = 3,
  kLast = 4,
};

// Table files: blocks with a trailer of type (1) and masked CRC-32C (4), then
// a footer of two BlockHandles padded to 40 bytes and the magic number.
inline constexpr uint64_t kBlockTrailerSize = 5;
inline constexpr size_t kFooterHandlesSize = 40;
inline constexpr uint64_t kTableFooterSize = kFooterHandlesSize + 8;
inline constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
inline constexpr uint8_t kNoCompression = 0;

// Internal keys: the user key, then fixed64(sequence << 8 | type).
inline constexpr size_t kTrailerSize = 8;
inline constexpr uint8_t kTypeDeletion = 0;
inline constexpr uint8_t kTypeValue = 1;
inline constexpr uint64_t kMaxSequenceNumber = (uint64_t{1} << 56) - 1;

// VersionEdit tags.
inline constexpr uint32_t kTagComparator = 1;
inline constexpr uint32_t kTagLogNumber = 2;
inline constexpr uint32_t kTagNextFileNumber = 3;
inline constexpr uint32_t kTagLastSequence = 4;
inline constexpr uint32_t kTagCompactPointer = 5;
inline constexpr uint32_t kTagDeletedFile = 6;
inline constexpr uint32_t kTagNewFile = 7;
inline constexpr uint32_t kTagPrevLogNumber = 9;
inline constexpr char kBytewiseComparatorName[] = "leveldb.BytewiseComparator";

// Stored CRCs are masked, since a CRC of data holding CRCs is weak.
inline constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
inline uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}
inline uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

inline uint32_t LoadLE32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  }
  return v;
}
inline uint64_t LoadLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  }
  return v;
}

inline void PutFixed32(std::string* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutVarint64(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}
inline void PutLengthPrefixed(std::string* dst, absl::string_view bytes) {
  PutVarint64(dst, bytes.size());
  dst->append(bytes.data(), bytes.size());
}

// Consume a varint64 / a length-prefixed string from the front of `in`;
// false (with `in` partly consumed) when it is cut off or too long.
inline bool GetVarint64(absl::string_view* in, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    result |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}
inline bool GetLengthPrefixed(absl::string_view* in, absl::string_view* value) {
  uint64_t length = 0;
  if (!GetVarint64(in, &length) || length > in->size()) return false;
  *value = in->substr(0, length);
  in->remove_prefix(length);
  return true;
}

// The internal key of `user_key` at `sequence` with `type`. With
// kMaxSequenceNumber and kTypeValue it sorts before every stored version of
// the key: the target of a seek.
inline std::string InternalKey(absl::string_view user_key, uint64_t sequence,
                               uint8_t type = kTypeValue) {
  std::string key;
  key.reserve(user_key.size() + kTrailerSize);
  key.append(user_key.data(), user_key.size());
  PutFixed64(&key, (sequence << 8) | type);
  return key;
}

}  // namespace leveldb_format
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_FORMAT_H_

#include "checkpoint/leveldb/leveldb_manifest.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

using leveldb_format::GetLengthPrefixed;
using leveldb_format::GetVarint64;
using leveldb_format::kFirst;
using leveldb_format::kFull;
using leveldb_format::kLast;
using leveldb_format::kLogBlockSize;
using leveldb_format::kLogHeaderSize;
using leveldb_format::kMiddle;
using leveldb_format::kZeroType;
using leveldb_format::LoadLE32;
using leveldb_format::UnmaskCrc;

// The records of a LevelDB log file (the MANIFEST-* file is one), each
// checked against its CRC. Any damage, a truncated record included, is
// DataLoss naming `path`.
absl::StatusOr<std::vector<std::string>> ReadLogRecords(
    const std::string& path, absl::string_view file) {
  auto damaged = [&](size_t offset, absl::string_view what) {
    return absl::DataLossError(absl::StrCat(
        "LevelDB file ", path, " is damaged at offset ", offset, ": ", what));
  };
  std::vector<std::string> records;
  std::string pending;
  bool in_record = false;
  size_t offset = 0;
  while (offset < file.size()) {
    const size_t left_in_block = kLogBlockSize - offset % kLogBlockSize;
    if (left_in_block < kLogHeaderSize) {
      offset += left_in_block;  // the block's zero-filled trailer
      continue;
    }
    if (file.size() - offset < kLogHeaderSize) {
      return damaged(offset, "a truncated record header");
    }
    const char* header = file.data() + offset;
    const uint32_t length = static_cast<uint8_t>(header[4]) |
                            (uint32_t{static_cast<uint8_t>(header[5])} << 8);
    const uint8_t type = static_cast<uint8_t>(header[6]);
    if (type == kZeroType && length == 0) {
      // Preallocated space, never written.
      offset += left_in_block;
      continue;
    }
    if (kLogHeaderSize + length > left_in_block ||
        offset + kLogHeaderSize + length > file.size()) {
      return damaged(offset, "a record that overruns its block or the file");
    }
    const char* payload = header + kLogHeaderSize;
    const uint32_t expected = UnmaskCrc(LoadLE32(header));
    const uint32_t actual =
        crc32c::Extend(Crc32c(header + 6, 1), payload, length);
    if (expected != actual) return damaged(offset, "a record fails its CRC");
    switch (type) {
      case kFull:
        if (in_record) return damaged(offset, "an unfinished record");
        records.emplace_back(payload, length);
        break;
      case kFirst:
        if (in_record) return damaged(offset, "an unfinished record");
        pending.assign(payload, length);
        in_record = true;
        break;
      case kMiddle:
      case kLast:
        if (!in_record) return damaged(offset, "a record without its start");
        pending.append(payload, length);
        if (type == kLast) {
          records.push_back(std::move(pending));
          pending.clear();
          in_record = false;
        }
        break;
      default:
        return damaged(offset, absl::StrCat("unknown record type ", type));
    }
    offset += kLogHeaderSize + length;
  }
  if (in_record) return damaged(offset, "the last record is cut off");
  return records;
}

// The live table files of a database, from its MANIFEST-* records
// (LevelDB's VersionEdit encoding), by file number.
absl::StatusOr<std::map<uint64_t, LevelDbTableMeta>> LiveTables(
    const std::string& path, const std::vector<std::string>& records) {
  std::map<uint64_t, LevelDbTableMeta> live;
  for (size_t r = 0; r < records.size(); ++r) {
    absl::string_view in = records[r];
    auto damaged = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB file ", path, " is damaged: record ", r, " ", what));
    };
    while (!in.empty()) {
      uint64_t tag = 0, level = 0, number = 0, size = 0, unused = 0;
      absl::string_view bytes;
      if (!GetVarint64(&in, &tag)) return damaged("has a broken tag");
      switch (tag) {
        case leveldb_format::kTagComparator:
          if (!GetLengthPrefixed(&in, &bytes)) return damaged("is cut off");
          if (bytes != leveldb_format::kBytewiseComparatorName) {
            return absl::FailedPreconditionError(absl::StrCat(
                "LevelDB database of ", path, " uses comparator '", bytes,
                "'; checkpoints use leveldb.BytewiseComparator"));
          }
          break;
        case leveldb_format::kTagLogNumber:
        case leveldb_format::kTagNextFileNumber:
        case leveldb_format::kTagLastSequence:
        case leveldb_format::kTagPrevLogNumber:
          if (!GetVarint64(&in, &unused)) return damaged("is cut off");
          break;
        case leveldb_format::kTagCompactPointer:  // level, internal key
          if (!GetVarint64(&in, &level) || !GetLengthPrefixed(&in, &bytes)) {
            return damaged("is cut off");
          }
          break;
        case leveldb_format::kTagDeletedFile:  // level, number
          if (!GetVarint64(&in, &level) || !GetVarint64(&in, &number)) {
            return damaged("is cut off");
          }
          live.erase(number);
          break;
        case leveldb_format::kTagNewFile: {
          // level, number, size, smallest, largest
          absl::string_view largest;
          if (!GetVarint64(&in, &level) || !GetVarint64(&in, &number) ||
              !GetVarint64(&in, &size) || !GetLengthPrefixed(&in, &bytes) ||
              !GetLengthPrefixed(&in, &largest)) {
            return damaged("is cut off");
          }
          live[number] =
              LevelDbTableMeta{size, std::string(bytes), std::string(largest)};
          break;
        }
        default:
          return damaged(absl::StrCat("has unknown tag ", tag));
      }
    }
  }
  return live;
}

}  // namespace

absl::StatusOr<std::map<uint64_t, LevelDbTableMeta>> ReadLevelDbLiveTables(
    const std::string& path) {
  return ReadLevelDbLiveTables(
      path, [&](const std::string& name) -> absl::StatusOr<std::string> {
        const std::string file = JoinPath(path, name);
        JG_ASSIGN_OR_RETURN(bool exists, PathExists(file));
        if (!exists) {
          return absl::NotFoundError(absl::StrCat(file, " does not exist"));
        }
        return ReadFileToString(file);
      });
}

absl::StatusOr<std::map<uint64_t, LevelDbTableMeta>> ReadLevelDbLiveTables(
    const std::string& path,
    const std::function<absl::StatusOr<std::string>(const std::string& name)>&
        read) {
  // CURRENT names the descriptor.
  const std::string current_path = JoinPath(path, kLevelDbCurrentFile);
  JG_ASSIGN_OR_RETURN(std::string current, read(kLevelDbCurrentFile));
  absl::string_view manifest_name = current;
  if (!absl::ConsumeSuffix(&manifest_name, "\n") ||
      !absl::StartsWith(manifest_name, kLevelDbManifestPrefix) ||
      manifest_name.find('/') != absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat("LevelDB file ", current_path,
                                            " is damaged: it does not name a ",
                                            kLevelDbManifestPrefix, "* file"));
  }
  const std::string manifest_path = JoinPath(path, manifest_name);
  absl::StatusOr<std::string> manifest = read(std::string(manifest_name));
  if (absl::IsNotFound(manifest.status())) {
    return absl::DataLossError(absl::StrCat(
        "LevelDB database ", path, " is damaged: ", kLevelDbCurrentFile,
        " names ", manifest_name, ", which does not exist"));
  }
  JG_RETURN_IF_ERROR(manifest.status());
  JG_ASSIGN_OR_RETURN(std::vector<std::string> records,
                      ReadLogRecords(manifest_path, *manifest));
  return LiveTables(manifest_path, records);
}

}  // namespace jobgraph

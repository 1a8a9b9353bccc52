#include "checkpoint/blob_index.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <system_error>
#include <thread>  // NOLINT(build/c++11)
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/db_registry.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "google/protobuf/io/coded_stream.h"

namespace jobgraph {
namespace {

absl::Status Damaged(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", what,
                                          "; the database is damaged"));
}

// Keys are arbitrary bytes; keep messages printable.
std::string Quote(absl::string_view key) {
  return absl::StrCat("'", absl::CHexEscape(key), "'");
}

// The time a database records: now, or $SOURCE_DATE_EPOCH (seconds) when
// set, the reproducible-builds convention, so that two saves of the same
// blobs are byte-identical (a model file compared across runs).
int64_t CreationTimeMicros() {
  const char* fixed = std::getenv("SOURCE_DATE_EPOCH");
  int64_t seconds = 0;
  if (fixed != nullptr && absl::SimpleAtoi(fixed, &seconds) && seconds >= 0) {
    return seconds * 1000000;
  }
  return absl::ToUnixMicros(absl::Now());
}

// Reads a varint of at most `max_bytes` at *p (before end); false if it is
// cut short or longer. (The project's other varint readers belong to the
// LevelDB adapter and the serialization library, and the protobuf API's
// CodedInputStream takes tags longer than its parser does.)
bool ReadVarint(const char** p, const char* end, uint64_t* value,
                int max_bytes = 10) {
  *value = 0;
  for (int i = 0, shift = 0; i < max_bytes && *p < end; ++i, shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(*(*p)++);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Splits a serialized BlobIndex into the payloads of its `blob` fields and
// the bytes of all its other fields. False for anything but plain varint,
// fixed and length-delimited fields that fit (ParseFromString then decides).
bool SplitBlobEntries(absl::string_view bytes,
                      std::vector<absl::string_view>* entries,
                      std::string* rest) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    const char* const field = p;
    uint64_t tag = 0;
    uint64_t value = 0;
    // As protobuf's parser: a tag is a varint of at most 5 bytes (32 bits)
    // with a field number.
    if (!ReadVarint(&p, end, &tag, 5) || tag > 0xffffffffu || (tag >> 3) == 0) {
      return false;
    }
    switch (tag & 7) {
      case 0:
        if (!ReadVarint(&p, end, &value)) return false;
        break;
      case 1:
      case 5: {
        const size_t size = (tag & 7) == 1 ? 8 : 4;
        if (static_cast<size_t>(end - p) < size) return false;
        p += size;
        break;
      }
      case 2:
        if (!ReadVarint(&p, end, &value, 5) ||
            value > static_cast<uint64_t>(end - p) ||
            value >
                static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          return false;
        }
        if ((tag >> 3) == BlobIndex::kBlobFieldNumber) {
          entries->emplace_back(p, value);
          p += value;
          continue;
        }
        p += value;
        break;
      default:
        return false;
    }
    rest->append(field, p - field);
  }
  return true;
}

// Parses the serialized BlobIndex `bytes` into `index` (cleared). An index
// of many blobs has its entries parsed by two threads into messages of
// index's arena (or the heap), then attached in order: half the serial
// time of a load of 100,000 small blobs is parsing its index.
bool ParseBlobIndex(absl::string_view bytes, BlobIndex* index) {
  // An index under this size (some 8,000 small blobs) is parsed at once.
  constexpr size_t kBytesToSplit = 256 << 10;
  constexpr size_t kEntriesToSplit = 4096;
  std::vector<absl::string_view> entries;
  std::string rest;
  if (bytes.size() < kBytesToSplit ||
      !SplitBlobEntries(bytes, &entries, &rest) ||
      entries.size() < kEntriesToSplit) {
    return index->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  if (!index->ParseFromString(rest)) return false;
  google::protobuf::Arena* const arena = index->GetArena();
  std::vector<CheckpointBlobInfo*> parsed(entries.size(), nullptr);
  auto parse = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      parsed[i] =
          google::protobuf::Arena::CreateMessage<CheckpointBlobInfo>(arena);
      if (!parsed[i]->ParseFromArray(entries[i].data(),
                                     static_cast<int>(entries[i].size()))) {
        return false;
      }
    }
    return true;
  };
  const size_t half = entries.size() / 2;
  bool first_ok = false;
  std::optional<std::thread> helper;
  try {
    helper.emplace([&] { first_ok = parse(0, half); });
  } catch (const std::system_error&) {
    first_ok = parse(0, half);  // no thread to be had: parse it here
  }
  const bool second_ok = parse(half, entries.size());
  if (helper.has_value()) helper->join();
  if (!first_ok || !second_ok) {
    if (arena == nullptr) {
      for (CheckpointBlobInfo* info : parsed) delete info;
    }
    return false;
  }
  auto* blobs = index->mutable_blob();
  blobs->Reserve(static_cast<int>(parsed.size()));
  for (CheckpointBlobInfo* info : parsed) {
    if (arena != nullptr) {
      blobs->UnsafeArenaAddAllocated(info);  // already on index's arena
    } else {
      blobs->AddAllocated(info);
    }
  }
  return true;
}

}  // namespace

BlobIndexBuilder::BlobIndexBuilder(absl::string_view node, int64_t epoch)
    : created_unix_micros_(CreationTimeMicros()) {
  // A message serializes its fields in number order, so the fields before
  // `blob` (1-3), the entries (4) and the fields after it (5-7), each
  // serialized alone, concatenate to the whole message's bytes.
  BlobIndex head;
  head.set_format_version(kBlobIndexFormatVersion);
  head.set_node(std::string(node));
  head.set_epoch(epoch);
  CHECK(head.AppendToString(&encoded_));
}

CheckpointBlobInfo* BlobIndexBuilder::StartBlob() {
  CHECK(!finished_) << "StartBlob after Finish";
  if (has_current_) EncodeCurrent();
  current_.Clear();
  has_current_ = true;
  return &current_;
}

uint32_t BlobIndexBuilder::AddValue(absl::string_view key,
                                    absl::string_view value) {
  CHECK(has_current_) << "AddValue before StartBlob";
  const uint32_t crc = Crc32c(value);
  current_.add_key(key.data(), key.size());
  current_.add_value_bytes(static_cast<int64_t>(value.size()));
  current_.add_value_crc32c(crc);
  total_bytes_ += static_cast<int64_t>(value.size());
  return crc;
}

void BlobIndexBuilder::EncodeCurrent() {
  const size_t size = current_.ByteSizeLong();
  if (too_large_ ||
      size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    too_large_ = true;  // protobuf serializes at most 2 GiB
    return;
  }
  // Field `blob`, length-delimited: tag, length, message.
  uint8_t head[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteTagToArray(
      (BlobIndex::kBlobFieldNumber << 3) | 2, head);
  end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(size), end);
  const size_t entry = (end - head) + size;
  if (!reserved_ && expected_blobs_ > 1) {
    // Capped: a first blob of many chunks (a long entry) must not reserve
    // gigabytes for 100,000 small ones after it; past the cap the bytes
    // grow as a string does.
    constexpr size_t kMaxReserve = size_t{256} << 20;
    encoded_.reserve(encoded_.size() +
                     std::min(kMaxReserve, expected_blobs_ * 2 * entry));
    reserved_ = true;
  }
  encoded_.append(reinterpret_cast<const char*>(head), end - head);
  // Under 2 GiB (checked above), serialization cannot fail.
  CHECK(current_.AppendPartialToString(&encoded_));
}

absl::StatusOr<std::string> BlobIndexBuilder::Finish() {
  CHECK(!finished_) << "Finish called twice";
  finished_ = true;
  if (has_current_) EncodeCurrent();
  has_current_ = false;
  if (too_large_) {
    return absl::InternalError(
        "cannot serialize the database's blob index: a blob's entry is over "
        "2 GiB (too many chunks; raise chunk_bytes)");
  }
  BlobIndex tail;
  tail.set_total_bytes(total_bytes_);
  tail.set_created_unix_micros(created_unix_micros_);
  tail.set_files_listed(files_listed_);
  CHECK(tail.AppendToString(&encoded_));
  return std::move(encoded_);
}

absl::Status ValidateBlobIndex(const BlobIndex& index, absl::string_view path) {
  if (index.format_version() != kBlobIndexFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " has format version ", index.format_version(),
        "; this build reads version ", kBlobIndexFormatVersion));
  }
  // Save writes blobs sorted by name; strictly increasing names are unique
  // without a set of 100,000 of them.
  bool sorted = true;
  for (int b = 1; b < index.blob_size() && sorted; ++b) {
    sorted = index.blob(b - 1).name() < index.blob(b).name();
  }
  absl::flat_hash_set<absl::string_view> names;
  if (!sorted) names.reserve(index.blob_size());
  // Keys are unique across blobs once each belongs to its blob (ParseBlobKey)
  // and names are unique; within a blob they are checked here.
  absl::flat_hash_set<absl::string_view> keys;
  int64_t total = 0;
  for (const CheckpointBlobInfo& blob : index.blob()) {
    if (blob.name().empty()) {
      return Damaged(path, "the blob index lists a blob without a name");
    }
    auto where = [&blob] {
      return absl::StrCat("the blob index's entry of blob '", blob.name(), "'");
    };
    if (!sorted && !names.insert(blob.name()).second) {
      return Damaged(path, absl::StrCat("the blob index lists blob '",
                                        blob.name(), "' twice"));
    }
    if (blob.key_size() == 0 || blob.value_bytes_size() != blob.key_size() ||
        blob.value_crc32c_size() != blob.key_size()) {
      return Damaged(path,
                     absl::StrCat(where(), " has ", blob.key_size(), " keys, ",
                                  blob.value_bytes_size(), " sizes and ",
                                  blob.value_crc32c_size(), " checksums"));
    }
    keys.clear();
    for (int i = 0; i < blob.key_size(); ++i) {
      const std::string& key = blob.key(i);
      absl::StatusOr<BlobKey> parsed = ParseBlobKey(key);
      if (!parsed.ok() || parsed->blob_name != blob.name() ||
          key == kBlobIndexKey) {
        return Damaged(path, absl::StrCat(where(), " lists key ", Quote(key),
                                          ", which is not one of its keys"));
      }
      if (blob.key_size() > 1 && !keys.insert(key).second) {
        return Damaged(path, absl::StrCat("the blob index lists key ",
                                          Quote(key), " twice"));
      }
      if (blob.value_bytes(i) < 0) {
        return Damaged(path, absl::StrCat(where(), " gives key ", Quote(key),
                                          " a negative size"));
      }
      if (blob.value_bytes(i) > std::numeric_limits<int64_t>::max() - total) {
        return Damaged(path, absl::StrCat(where(), " gives key ", Quote(key),
                                          " a size that makes the total "
                                          "overflow"));
      }
      total += blob.value_bytes(i);
    }
  }
  if (total != index.total_bytes()) {
    return Damaged(path, absl::StrCat("the blob index's total_bytes is ",
                                      index.total_bytes(),
                                      " but its values add up to ", total));
  }
  return absl::OkStatus();
}

absl::StatusOr<BlobIndex> ReadBlobIndex(DB* db) {
  BlobIndex index;
  JG_RETURN_IF_ERROR(ReadBlobIndex(db, &index));
  return index;
}

absl::Status ReadBlobIndex(DB* db, BlobIndex* index) {
  index->Clear();
  // The index has no checksum of its own (it holds the values'): the
  // database's block checksums are checked even where values are read
  // without them.
  absl::StatusOr<std::string> bytes = db->GetVerified(kBlobIndexKey);
  if (absl::IsNotFound(bytes.status())) {
    return absl::DataLossError(
        absl::StrCat(db->path(),
                     " has no blob index: it was not written completely by "
                     "jobgraph's Save"));
  }
  if (!bytes.ok()) return bytes.status();
  if (!ParseBlobIndex(*bytes, index)) {
    return Damaged(db->path(), "its blob index does not parse");
  }
  return ValidateBlobIndex(*index, db->path());
}

absl::StatusOr<BlobIndex> ReadBlobIndexAt(absl::string_view db_type,
                                          const std::string& path) {
  JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
                      DbRegistry::Global().Open(db_type, path, DbMode::kRead));
  return ReadBlobIndex(db.get());
}

absl::Status ScanDbValues(DB* db, const BlobIndex& index,
                          absl::Span<const int> blob_indices, bool verify_crc,
                          const DbValueVisitor& visit) {
  struct Wanted {
    absl::string_view key;
    int blob_index;
    int key_index;
  };
  std::vector<Wanted> wanted;
  wanted.reserve(blob_indices.size());
  for (int b : blob_indices) {
    CHECK(b >= 0 && b < index.blob_size()) << "blob index " << b;
    const CheckpointBlobInfo& blob = index.blob(b);
    for (int k = 0; k < blob.key_size(); ++k) {
      wanted.push_back({blob.key(k), b, k});
    }
  }
  if (wanted.empty()) return absl::OkStatus();
  // The cursor yields keys in bytewise order; string_view compares bytes as
  // unsigned, as the DB does.
  // Usually sorted already: Save writes blobs in name order.
  auto by_key = [](const Wanted& a, const Wanted& b) { return a.key < b.key; };
  if (!std::is_sorted(wanted.begin(), wanted.end(), by_key)) {
    std::sort(wanted.begin(), wanted.end(), by_key);
  }

  std::unique_ptr<Cursor> cursor = db->NewCursor();
  cursor->Seek(wanted[0].key);
  size_t next = 0;
  while (next < wanted.size() && cursor->Valid()) {
    const absl::string_view key = cursor->key();
    const Wanted& w = wanted[next];
    const int order = key.compare(w.key);
    if (order < 0) {
      // A key that is not needed: jump over it and whatever else lies
      // before the next needed key, without reading those values.
      cursor->Seek(w.key);
      continue;
    }
    if (order > 0) break;  // w.key is missing.
    const CheckpointBlobInfo& blob = index.blob(w.blob_index);
    const absl::string_view value = cursor->value();
    if (static_cast<int64_t>(value.size()) != blob.value_bytes(w.key_index)) {
      return Damaged(db->path(),
                     absl::StrCat("value of key ", Quote(key), " (blob '",
                                  blob.name(), "') has ", value.size(),
                                  " bytes, but the blob index says ",
                                  blob.value_bytes(w.key_index)));
    }
    if (verify_crc && Crc32c(value) != blob.value_crc32c(w.key_index)) {
      return Damaged(db->path(),
                     absl::StrCat("value of key ", Quote(key), " (blob '",
                                  blob.name(), "') fails its CRC-32C check"));
    }
    JG_RETURN_IF_ERROR(visit(w.blob_index, w.key_index, value));
    ++next;
    cursor->Next();
  }
  // An error ends the iteration like the end of the data: tell them apart.
  JG_RETURN_IF_ERROR(cursor->status());
  if (next < wanted.size()) {
    const Wanted& w = wanted[next];
    return Damaged(db->path(),
                   absl::StrCat("key ", Quote(w.key), " of blob '",
                                index.blob(w.blob_index).name(),
                                "' is listed in the blob index but missing"));
  }
  return absl::OkStatus();
}

absl::Status CheckIndexOwner(const std::string& path, const BlobIndex& index,
                             const std::optional<std::string>& node,
                             const std::optional<int64_t>& epoch) {
  if (node.has_value() && index.node() != *node) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path,
                                            " belongs to node '", index.node(),
                                            "', not '", *node, "'"));
  }
  if (epoch.has_value() && index.epoch() != *epoch) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " holds epoch ", index.epoch(), ", not ", *epoch));
  }
  return absl::OkStatus();
}

absl::StatusOr<BlobIndex> VerifyDb(DB* db, VerifyDepth depth) {
  JG_ASSIGN_OR_RETURN(BlobIndex index, ReadBlobIndex(db));
  std::vector<int> all(index.blob_size());
  std::iota(all.begin(), all.end(), 0);
  JG_RETURN_IF_ERROR(ScanDbValues(
      db, index, all, /*verify_crc=*/true,
      [](int, int, absl::string_view) { return absl::OkStatus(); }));
  // After the values, whose damage is reported naming the blob: the files'
  // own checksums catch the rest (indexes, the backend's metadata).
  JG_RETURN_IF_ERROR(VerifyRecordedFiles(db, index, depth));
  return index;
}

absl::Status VerifyRecordedFiles(DB* db, const BlobIndex& index,
                                 VerifyDepth depth) {
  DB::FileCheck check;
  check.record_required = index.files_listed();
  check.read_contents = depth == VerifyDepth::kValuesAndFiles;
  return db->VerifyFiles(check);
}

absl::StatusOr<BlobIndex> VerifyDbAt(absl::string_view db_type,
                                     const std::string& path,
                                     VerifyDepth depth) {
  DbOptions options;
  // VerifyDb checks every value's CRC-32C itself.
  options.verify_checksums = false;
  JG_ASSIGN_OR_RETURN(
      std::unique_ptr<DB> db,
      DbRegistry::Global().Open(db_type, path, DbMode::kRead, options));
  return VerifyDb(db.get(), depth);
}

}  // namespace jobgraph

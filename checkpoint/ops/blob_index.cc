#include "checkpoint/ops/blob_index.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
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
#include "checkpoint/db/db_registry.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
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
  const uint32_t crc = Crc32c(value);
  AddValueWithCrc(key, value.size(), crc);
  return crc;
}

void BlobIndexBuilder::AddValueWithCrc(absl::string_view key,
                                       size_t value_bytes,
                                       uint32_t value_crc32c) {
  CHECK(has_current_) << "AddValue before StartBlob";
  current_.add_key(key.data(), key.size());
  current_.add_value_bytes(static_cast<int64_t>(value_bytes));
  current_.add_value_crc32c(value_crc32c);
  total_bytes_ += static_cast<int64_t>(value_bytes);
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

void BlobIndexBuilder::AddReferenced(const CheckpointBlobInfo& info) {
  CHECK(!finished_) << "AddReferenced after Finish";
  CHECK(info.has_stored_in_epoch()) << "blob '" << info.name() << "'";
  StartBlob(info);
  int64_t bytes = 0;
  for (int64_t b : info.value_bytes()) bytes += b;
  total_bytes_ += bytes;
  referenced_bytes_ += bytes;
  auto at = std::lower_bound(referenced_epochs_.begin(),
                             referenced_epochs_.end(), info.stored_in_epoch());
  if (at == referenced_epochs_.end() || *at != info.stored_in_epoch()) {
    referenced_epochs_.insert(at, info.stored_in_epoch());
  }
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
  if (!referenced_epochs_.empty()) {
    // The version is the head's first field, a one-byte varint: readers of
    // version 1 must refuse an index with references.
    CHECK(encoded_.size() >= 2 && encoded_[0] == '\x08' &&
          encoded_[1] == static_cast<char>(kBlobIndexFormatVersion));
    encoded_[1] = static_cast<char>(kReferencingBlobIndexFormatVersion);
  }
  BlobIndex tail;
  tail.set_total_bytes(total_bytes_);
  tail.set_created_unix_micros(created_unix_micros_);
  tail.set_files_listed(files_listed_);
  tail.set_referenced_bytes(referenced_bytes_);
  for (int64_t epoch : referenced_epochs_) tail.add_referenced_epoch(epoch);
  CHECK(tail.AppendToString(&encoded_));
  return std::move(encoded_);
}

absl::Status ValidateBlobIndex(const CompactBlobIndex& index,
                               absl::string_view path) {
  if (index.format_version() != kBlobIndexFormatVersion &&
      index.format_version() != kReferencingBlobIndexFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " has format version ", index.format_version(),
        "; this build reads versions ", kBlobIndexFormatVersion, " and ",
        kReferencingBlobIndexFormatVersion, ". Use a newer jobgraph."));
  }
  // Save writes blobs sorted by name; strictly increasing names are unique
  // without a set of 100,000 of them.
  bool sorted = true;
  for (int b = 1; b < index.blob_size() && sorted; ++b) {
    sorted = index.name(b - 1) < index.name(b);
  }
  absl::flat_hash_set<absl::string_view> names;
  if (!sorted) names.reserve(index.blob_size());
  // Keys are unique across blobs once each belongs to its blob (ParseBlobKey)
  // and names are unique; within a blob they are checked here.
  absl::flat_hash_set<absl::string_view> keys;
  int64_t total = 0;
  int64_t referenced = 0;
  std::vector<int64_t> referenced_epochs;
  for (int b = 0; b < index.blob_size(); ++b) {
    const absl::string_view name = index.name(b);
    if (name.empty()) {
      return Damaged(path, "the blob index lists a blob without a name");
    }
    auto where = [name] {
      return absl::StrCat("the blob index's entry of blob '", name, "'");
    };
    if (!sorted && !names.insert(name).second) {
      return Damaged(
          path, absl::StrCat("the blob index lists blob '", name, "' twice"));
    }
    const int key_size = index.key_size(b);
    if (key_size == 0 || index.value_bytes_size(b) != key_size ||
        index.value_crc32c_size(b) != key_size) {
      return Damaged(path,
                     absl::StrCat(where(), " has ", key_size, " keys, ",
                                  index.value_bytes_size(b), " sizes and ",
                                  index.value_crc32c_size(b), " checksums"));
    }
    if (index.referenced(b)) {
      if (index.format_version() < kReferencingBlobIndexFormatVersion ||
          index.stored_in_epoch(b) < 0 ||
          index.stored_in_epoch(b) >= index.epoch()) {
        return Damaged(path, absl::StrCat(where(), " refers to epoch ",
                                          index.stored_in_epoch(b),
                                          ", which cannot hold it"));
      }
      referenced_epochs.push_back(index.stored_in_epoch(b));
    }
    keys.clear();
    for (int k = 0; k < key_size; ++k) {
      const absl::string_view key = index.key(b, k);
      absl::StatusOr<BlobKeyView> parsed = ParseBlobKeyView(key);
      if (!parsed.ok() || parsed->blob_name != name || key == kBlobIndexKey) {
        return Damaged(path, absl::StrCat(where(), " lists key ", Quote(key),
                                          ", which is not one of its keys"));
      }
      if (key_size > 1 && !keys.insert(key).second) {
        return Damaged(path, absl::StrCat("the blob index lists key ",
                                          Quote(key), " twice"));
      }
      const int64_t bytes = index.value_bytes(b, k);
      if (bytes < 0) {
        return Damaged(path, absl::StrCat(where(), " gives key ", Quote(key),
                                          " a negative size"));
      }
      if (bytes > std::numeric_limits<int64_t>::max() - total) {
        return Damaged(path, absl::StrCat(where(), " gives key ", Quote(key),
                                          " a size that makes the total "
                                          "overflow"));
      }
      total += bytes;
      if (index.referenced(b)) referenced += bytes;
    }
  }
  if (total != index.total_bytes()) {
    return Damaged(path, absl::StrCat("the blob index's total_bytes is ",
                                      index.total_bytes(),
                                      " but its values add up to ", total));
  }
  if (referenced != index.referenced_bytes()) {
    return Damaged(path, absl::StrCat("the blob index's referenced_bytes is ",
                                      index.referenced_bytes(),
                                      " but its referenced values add up to ",
                                      referenced));
  }
  std::sort(referenced_epochs.begin(), referenced_epochs.end());
  referenced_epochs.erase(
      std::unique(referenced_epochs.begin(), referenced_epochs.end()),
      referenced_epochs.end());
  if (referenced_epochs != index.referenced_epochs()) {
    return Damaged(path,
                   "the blob index's list of referenced epochs does not "
                   "match its blobs");
  }
  return absl::OkStatus();
}

absl::Status ValidateBlobIndex(const BlobIndex& index, absl::string_view path) {
  std::optional<CompactBlobIndex> compact =
      CompactBlobIndex::Decode(index.SerializeAsString());
  // A message can hold what does not parse back (a name that is not UTF-8).
  if (!compact.has_value()) {
    return Damaged(path, "its blob index does not parse");
  }
  return ValidateBlobIndex(*compact, path);
}

absl::StatusOr<CompactBlobIndex> ReadCompactBlobIndex(DB* db) {
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
  std::optional<CompactBlobIndex> index =
      CompactBlobIndex::Decode(*std::move(bytes));
  if (!index.has_value()) {
    return Damaged(db->path(), "its blob index does not parse");
  }
  JG_RETURN_IF_ERROR(ValidateBlobIndex(*index, db->path()));
  return *std::move(index);
}

absl::StatusOr<BlobIndex> ReadBlobIndex(DB* db) {
  JG_ASSIGN_OR_RETURN(CompactBlobIndex index, ReadCompactBlobIndex(db));
  return index.ToProto();
}

absl::StatusOr<CompactBlobIndex> ReadCompactBlobIndexAt(
    absl::string_view db_type, const std::string& path) {
  JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
                      DbRegistry::Global().Open(db_type, path, DbMode::kRead));
  return ReadCompactBlobIndex(db.get());
}

absl::StatusOr<BlobIndex> ReadBlobIndexAt(absl::string_view db_type,
                                          const std::string& path) {
  JG_ASSIGN_OR_RETURN(CompactBlobIndex index,
                      ReadCompactBlobIndexAt(db_type, path));
  return index.ToProto();
}

absl::Status ScanDbValues(DB* db, const CompactBlobIndex& index,
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
    for (int k = 0; k < index.key_size(b); ++k) {
      wanted.push_back({index.key(b, k), b, k});
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
    const int64_t listed = index.value_bytes(w.blob_index, w.key_index);
    const absl::string_view value = cursor->value();
    if (static_cast<int64_t>(value.size()) != listed) {
      return Damaged(
          db->path(),
          absl::StrCat("value of key ", Quote(key), " (blob '",
                       index.name(w.blob_index), "') has ", value.size(),
                       " bytes, but the blob index says ", listed));
    }
    if (verify_crc &&
        Crc32c(value) != index.value_crc32c(w.blob_index, w.key_index)) {
      return Damaged(
          db->path(),
          absl::StrCat("value of key ", Quote(key), " (blob '",
                       index.name(w.blob_index), "') fails its CRC-32C check"));
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
                                index.name(w.blob_index),
                                "' is listed in the blob index but missing"));
  }
  return absl::OkStatus();
}

absl::Status CheckIndexOwner(const std::string& path,
                             const CompactBlobIndex& index,
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

absl::StatusOr<CompactBlobIndex> VerifyDb(DB* db, VerifyDepth depth) {
  JG_ASSIGN_OR_RETURN(CompactBlobIndex index, ReadCompactBlobIndex(db));
  std::vector<int> all(index.blob_size());
  std::iota(all.begin(), all.end(), 0);
  JG_RETURN_IF_ERROR(ScanDbValues(
      db, index, SplitByHolder(index, all).held, /*verify_crc=*/true,
      [](int, int, absl::string_view) { return absl::OkStatus(); }));
  // After the values, whose damage is reported naming the blob: the files'
  // own checksums catch the rest (indexes, the backend's metadata).
  JG_RETURN_IF_ERROR(VerifyRecordedFiles(db, index, depth));
  return index;
}

absl::Status VerifyRecordedFiles(DB* db, const CompactBlobIndex& index,
                                 VerifyDepth depth) {
  DB::FileCheck check;
  check.record_required = index.files_listed();
  check.read_contents = depth == VerifyDepth::kValuesAndFiles;
  return db->VerifyFiles(check);
}

absl::StatusOr<CompactBlobIndex> VerifyDbAt(absl::string_view db_type,
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

HeldAndReferenced SplitByHolder(const CompactBlobIndex& index,
                                absl::Span<const int> blobs) {
  HeldAndReferenced split;
  std::map<int64_t, std::vector<int>> by_epoch;
  for (int b : blobs) {
    if (index.referenced(b)) {
      by_epoch[index.stored_in_epoch(b)].push_back(b);
    } else {
      split.held.push_back(b);
    }
  }
  for (auto& [epoch, held_there] : by_epoch) {
    split.referenced.emplace_back(epoch, std::move(held_there));
  }
  return split;
}

std::string ReferencedDbPath(absl::string_view path, absl::string_view node,
                             int64_t epoch) {
  return JoinPath(ParentDir(path), absl::StrCat(node, ".", epoch));
}

absl::StatusOr<std::unique_ptr<DB>> OpenReferencedDb(
    absl::string_view db_type, const std::string& path,
    const CompactBlobIndex& index, int64_t epoch, VerifyDepth depth) {
  const std::string holder = ReferencedDbPath(path, index.node(), epoch);
  auto damaged = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " refers to blobs in ", holder, " (epoch ", epoch,
        "), which ", why, "; the checkpoint of epoch ", index.epoch(),
        " cannot be read"));
  };
  DbOptions options;
  // Every value is checked against the blob index's CRC-32C.
  options.verify_checksums = false;
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open(db_type, holder, DbMode::kRead, options);
  if (absl::IsNotFound(db.status())) return damaged("is missing");
  if (!db.ok()) return db.status();
  absl::StatusOr<CompactBlobIndex> own = ReadCompactBlobIndex(db->get());
  if (absl::IsDataLoss(own.status()) || absl::IsNotFound(own.status())) {
    return damaged(absl::StrCat("is damaged: ", own.status().message()));
  }
  if (!own.ok()) return own.status();
  if (own->node() != index.node() || own->epoch() != epoch) {
    return damaged(
        absl::StrCat("holds node '", own->node(), "', epoch ", own->epoch()));
  }
  if (absl::Status files = VerifyRecordedFiles(db->get(), *own, depth);
      !files.ok()) {
    return damaged(absl::StrCat("is damaged: ", files.message()));
  }
  return db;
}

absl::Status VerifyReferencedValues(absl::string_view db_type,
                                    const std::string& path,
                                    const CompactBlobIndex& index,
                                    VerifyDepth depth) {
  std::vector<int> all(index.blob_size());
  std::iota(all.begin(), all.end(), 0);
  for (const auto& [epoch, blobs] : SplitByHolder(index, all).referenced) {
    JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
                        OpenReferencedDb(db_type, path, index, epoch, depth));
    JG_RETURN_IF_ERROR(ScanDbValues(
        db.get(), index, blobs, /*verify_crc=*/true,
        [](int, int, absl::string_view) { return absl::OkStatus(); }));
    JG_RETURN_IF_ERROR(db->Close());
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

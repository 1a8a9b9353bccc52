// Fuzzes a database's blob index (checkpoint/ops/blob_index.h): its decoding
// (checkpoint/ops/compact_blob_index.h) against protobuf's parser, validation,
// VerifyDb, and the load path that scans the listed values and assembles the
// blobs (ScanDbValues + BlobAssembler), over an in-memory database.
//
// Input: a mode byte, then an archive (fuzz_util.h) whose first entry's
// bytes are the blob index value and whose other entries are the database's
// other (key, value) pairs. Mode bit 1: before storing the index, set every
// listed key's size and CRC-32C (and total_bytes) to those of the value
// stored under it, so the values themselves get parsed.
// Invariants: CompactBlobIndex::Decode accepts exactly what protobuf parses,
// with the same fields; an accepted index passes ValidateBlobIndex; VerifyDb
// accepts exactly when a scan of all values with checksums accepts.
// Outcome (fuzz::NoteOutcome): accepted when VerifyDb accepts the database
// and every blob it lists loads; refused otherwise.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/db/memory_db.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/compact_blob_index.h"
#include "checkpoint/util/crc32c.h"
#include "engine/blob.h"
#include "engine/serialization.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

constexpr char kPath[] = "fuzz/trainer_0.1";

// The index with each listed key's size and checksum taken from `values`.
std::string FixUpIndex(const std::string& bytes,
                       const std::map<std::string, std::string>& values) {
  BlobIndex index;
  if (!index.ParseFromString(bytes)) return bytes;
  int64_t total = 0;
  for (CheckpointBlobInfo& blob : *index.mutable_blob()) {
    blob.clear_value_bytes();
    blob.clear_value_crc32c();
    for (const std::string& key : blob.key()) {
      auto it = values.find(key);
      const std::string value = it == values.end() ? "" : it->second;
      blob.add_value_bytes(static_cast<int64_t>(value.size()));
      blob.add_value_crc32c(Crc32c(value));
      total += static_cast<int64_t>(value.size());
    }
  }
  index.set_total_bytes(total);
  return index.SerializeAsString();
}

// Decode agrees with protobuf's parser on `bytes`.
void CheckDecode(const std::string& bytes) {
  BlobIndex parsed;
  const bool parses = parsed.ParseFromString(bytes);
  std::optional<CompactBlobIndex> decoded = CompactBlobIndex::Decode(bytes);
  FUZZ_CHECK(decoded.has_value() == parses,
             parses ? "Decode refused an index protobuf parses"
                    : "Decode accepted an index protobuf refuses");
  if (!parses) return;
  parsed.DiscardUnknownFields();
  FUZZ_CHECK(
      decoded->ToProto().SerializeAsString() == parsed.SerializeAsString(),
      "Decode and protobuf read different fields");
  FUZZ_CHECK(decoded->blob_size() == parsed.blob_size(), "blob count");
  for (int b = 0; b < parsed.blob_size(); ++b) {
    const CheckpointBlobInfo& blob = parsed.blob(b);
    FUZZ_CHECK(
        decoded->name(b) == blob.name() &&
            decoded->key_size(b) == blob.key_size() &&
            decoded->value_bytes_size(b) == blob.value_bytes_size() &&
            decoded->value_crc32c_size(b) == blob.value_crc32c_size() &&
            decoded->Entry(b).SerializeAsString() == blob.SerializeAsString(),
        "a blob's entry decodes differently");
    for (int k = 0; k < blob.key_size(); ++k) {
      FUZZ_CHECK(decoded->key(b, k) == blob.key(k),
                 "a key decodes differently");
    }
    for (int k = 0; k < blob.value_bytes_size(); ++k) {
      FUZZ_CHECK(decoded->value_bytes(b, k) == blob.value_bytes(k),
                 "a size decodes differently");
    }
    for (int k = 0; k < blob.value_crc32c_size(); ++k) {
      FUZZ_CHECK(decoded->value_crc32c(b, k) == blob.value_crc32c(k),
                 "a checksum decodes differently");
    }
  }
}

bool Run(fuzz::FuzzInput& input) {
  memory_db::Clear();
  const uint8_t mode = input.Byte();
  std::vector<fuzz::ArchiveEntry> entries = fuzz::ParseArchive(input, 32);
  if (entries.empty()) return false;
  std::map<std::string, std::string> values;
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].name == kBlobIndexKey ||
        fuzz::DeclaresLargeTensor(entries[i].bytes)) {
      continue;
    }
    values[entries[i].name] = entries[i].bytes;
  }
  std::string index_bytes = entries[0].bytes;
  if (mode & 1) index_bytes = FixUpIndex(index_bytes, values);
  CheckDecode(index_bytes);
  values[kBlobIndexKey] = index_bytes;
  {
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open(kMemoryDbType, kPath, DbMode::kNew);
    FUZZ_CHECK(db.ok(), db.status().ToString());
    absl::StatusOr<std::unique_ptr<Writer>> writer = (*db)->NewWriter();
    FUZZ_CHECK(writer.ok(), writer.status().ToString());
    for (const auto& [key, value] : values) {
      absl::Status put = (*writer)->Put(key, value);
      FUZZ_CHECK(put.ok(), put.ToString());
    }
    FUZZ_CHECK((*writer)->Flush().ok(), "flush");
    writer->reset();
    FUZZ_CHECK((*db)->Close().ok(), "close");
  }
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open(kMemoryDbType, kPath, DbMode::kRead);
  FUZZ_CHECK(db.ok(), db.status().ToString());

  absl::StatusOr<CompactBlobIndex> index = ReadCompactBlobIndex(db->get());
  absl::StatusOr<CompactBlobIndex> verified =
      VerifyDb(db->get(), VerifyDepth::kValuesAndFiles);
  if (!index.ok()) {
    FUZZ_CHECK(!verified.ok(),
               "VerifyDb accepted an index ReadBlobIndex refused");
    return false;
  }
  FUZZ_CHECK(ValidateBlobIndex(*index, kPath).ok(),
             "an accepted blob index does not validate");
  std::vector<int> all(index->blob_size());
  std::iota(all.begin(), all.end(), 0);
  absl::Status scanned = ScanDbValues(
      db->get(), *index, all, /*verify_crc=*/true,
      [](int, int, absl::string_view) { return absl::OkStatus(); });
  FUZZ_CHECK(scanned.ok() == verified.ok(),
             "VerifyDb and a checked scan of every value disagree");
  if (!verified.ok()) return false;

  // Load every blob, as the Load op does.
  std::vector<Blob> blobs(index->blob_size());
  BlobAssembler assembler;
  absl::Status loaded =
      ScanDbValues(db->get(), *index, all, /*verify_crc=*/false,
                   [&](int b, int, absl::string_view value) {
                     return assembler.Add(index->name(b), value, &blobs[b]);
                   });
  return loaded.ok() && assembler.Finish().ok();
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

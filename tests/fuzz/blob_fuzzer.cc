// Fuzzes blob deserialization (engine/serialization.h): ParseBlobKey,
// DeserializeBlob, and BlobAssembler's chunk assembly of tensors split over
// several values arriving in any order, with every registered serializer
// (tensors, strings, counters, reader cursors).
//
// Input: a mode byte, then an archive (fuzz_util.h) of database entries
// (key, value), at most 16. Each key is parsed; each value is deserialized
// alone and added to the assembler under its key's blob name.
// Invariant: every blob assembled completely serializes again (in chunks of
// a size chosen by the mode byte), those pieces assemble into a blob that
// serializes to exactly the same pieces.
// Outcome (fuzz::NoteOutcome): accepted when every key parses, the assembler
// takes every value and every blob it started is complete; refused
// otherwise (an entry skipped for declaring a huge tensor counts as
// refused).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/blob.h"
#include "engine/serialization.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

void CheckRoundTrip(const std::string& name, const Blob& blob,
                    int64_t chunk_bytes) {
  absl::StatusOr<Pairs> pairs =
      SerializeBlobToPairs(name, blob, {.chunk_bytes = chunk_bytes});
  if (!pairs.ok()) {
    // Only blobs of types without a serializer may fail, and none can be
    // loaded.
    FUZZ_CHECK(false, pairs.status().ToString());
  }
  Blob copy;
  BlobAssembler assembler;
  for (const auto& [key, value] : *pairs) {
    absl::StatusOr<BlobKey> parsed = ParseBlobKey(key);
    FUZZ_CHECK(parsed.ok() && parsed->blob_name == name,
               "a written key does not parse back to its blob");
    absl::Status added = assembler.Add(name, value, &copy);
    FUZZ_CHECK(added.ok(), added.ToString());
  }
  FUZZ_CHECK(assembler.Finish().ok(), "a written blob is incomplete");
  absl::StatusOr<Pairs> again =
      SerializeBlobToPairs(name, copy, {.chunk_bytes = chunk_bytes});
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(*again == *pairs, "a blob changed when written and read back");
}

bool Run(fuzz::FuzzInput& input) {
  const uint8_t mode = input.Byte();
  const int64_t chunk_bytes =
      (mode & 0x80) ? int64_t{64} << 20 : 1 + (mode & 0x7f);
  std::vector<fuzz::ArchiveEntry> entries = fuzz::ParseArchive(input, 16);
  std::map<std::string, Blob> targets;
  BlobAssembler assembler;
  bool accepted = true;
  for (const fuzz::ArchiveEntry& entry : entries) {
    absl::StatusOr<BlobKey> key = ParseBlobKey(entry.name);
    if (!key.ok()) {
      accepted = false;
      continue;
    }
    if (key->chunk.has_value()) {
      FUZZ_CHECK(TensorChunkKey(key->blob_name, *key->chunk) == entry.name,
                 "a chunk key does not print back as itself");
    }
    if (fuzz::DeclaresLargeTensor(entry.bytes)) {
      accepted = false;
      continue;
    }
    Blob alone;
    absl::Status single = DeserializeBlob(key->blob_name, entry.bytes, &alone);
    if (single.ok()) {
      FUZZ_CHECK(alone.IsInitialized(), "DeserializeBlob left no value");
      CheckRoundTrip(key->blob_name, alone, chunk_bytes);
    }
    // Pieces after an error are still added, as a fuzzer would want: the
    // assembler must stay consistent after refusing one.
    accepted &=
        assembler.Add(key->blob_name, entry.bytes, &targets[key->blob_name])
            .ok();
  }
  accepted &= assembler.Finish().ok();
  for (const std::string& name : assembler.CompleteBlobs()) {
    CheckRoundTrip(name, targets[name], chunk_bytes);
  }
  return accepted;
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

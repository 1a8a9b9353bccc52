// Fuzzes the reader cursor serializers (engine/data: TreeCursor,
// ShuffleCursor, FileCursor), found through the serializer registry, and the
// other single-value serializers (std::string, Counter).
//
// Input: a byte choosing the BlobProto.type, then a serialized BlobProto
// whose type is replaced by the chosen one.
// Invariant: a value that deserializes serializes to one value that
// deserializes to a blob serializing to exactly the same bytes.
// Outcome (fuzz::NoteOutcome): accepted when the BlobProto parses and the
// chosen serializer deserializes it; refused otherwise.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/blob.h"
#include "engine/counter_type.h"
#include "engine/data/file_cursor.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/tree_cursor.h"
#include "engine/serialization.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kTypes[] = {
    kTreeCursorTypeName, kShuffleCursorTypeName, kFileCursorTypeName,
    kStringTypeName,     kCounterTypeName,
};

bool Run(fuzz::FuzzInput& input) {
  const char* type = kTypes[input.Byte() % std::size(kTypes)];
  const BlobSerializer* serializer = FindBlobSerializer(type);
  FUZZ_CHECK(serializer != nullptr, type);
  BlobProto proto;
  const absl::string_view bytes = input.Rest();
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return false;
  }
  proto.set_type(type);
  Blob blob;
  if (!serializer->Deserialize(proto, &blob).ok()) return false;
  FUZZ_CHECK(blob.IsInitialized(), "Deserialize succeeded without a value");
  absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("cursor", blob);
  FUZZ_CHECK(pairs.ok(), pairs.status().ToString());
  FUZZ_CHECK(pairs->size() == 1 && (*pairs)[0].first == "cursor",
             "a single value blob was written as several");
  Blob copy;
  absl::Status read = DeserializeBlob("cursor", (*pairs)[0].second, &copy);
  FUZZ_CHECK(read.ok(), read.ToString());
  absl::StatusOr<Pairs> again = SerializeBlobToPairs("cursor", copy);
  FUZZ_CHECK(again.ok() && *again == *pairs,
             "a cursor changed when written and read back");
  return true;
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

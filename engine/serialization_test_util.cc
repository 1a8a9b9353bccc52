#include "engine/serialization_test_util.h"

#include <memory>

#include "absl/status/statusor.h"
#include "engine/blob.h"
#include "engine/serialization.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace serialization_test {

Pairs SerializeOrDie(absl::string_view name, const Tensor& tensor,
                     int64_t chunk_bytes) {
  Blob blob;
  blob.Reset(std::make_unique<Tensor>(tensor));
  absl::StatusOr<Pairs> pairs =
      SerializeBlobToPairs(name, blob, SerializationOptions{chunk_bytes});
  EXPECT_TRUE(pairs.ok()) << pairs.status();
  return pairs.ok() ? *std::move(pairs) : Pairs();
}

}  // namespace serialization_test
}  // namespace jobgraph

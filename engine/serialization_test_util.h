// Helpers shared by the serialization tests. Test-only; stateless.

#ifndef JOBGRAPH_ENGINE_SERIALIZATION_TEST_UTIL_H_
#define JOBGRAPH_ENGINE_SERIALIZATION_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace serialization_test {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The (key, value) pairs of `tensor` serialized as blob `name`; a test
// failure, and no pairs, if serializing fails.
Pairs SerializeOrDie(absl::string_view name, const Tensor& tensor,
                     int64_t chunk_bytes);

}  // namespace serialization_test
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_SERIALIZATION_TEST_UTIL_H_

#include "engine/chunking.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/wire_format.h"
#include "glog/logging.h"

namespace jobgraph {
namespace serialization_internal {

int64_t ElementsPerChunk(size_t element_size, int64_t chunk_bytes) {
  CHECK_GT(element_size, 0u);
  CHECK_GT(chunk_bytes, 0);
  return std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(element_size));
}

std::vector<std::pair<int64_t, int64_t>> FixedWidthChunks(int64_t numel,
                                                          size_t element_size,
                                                          int64_t chunk_bytes) {
  const int64_t per_chunk = ElementsPerChunk(element_size, chunk_bytes);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t begin = 0;
  do {
    const int64_t end = begin + std::min(per_chunk, numel - begin);
    chunks.emplace_back(begin, end);
    begin = end;
  } while (begin < numel);
  return chunks;
}

std::vector<StringChunk> StringChunks(absl::Span<const std::string> strings,
                                      int64_t chunk_bytes) {
  CHECK_GT(chunk_bytes, 0);
  const int64_t numel = static_cast<int64_t>(strings.size());
  std::vector<StringChunk> chunks;
  int64_t begin = 0;
  do {
    StringChunk chunk;
    chunk.begin = begin;
    chunk.end = begin;
    while (chunk.end < numel) {
      const size_t encoded = LengthDelimitedSize(strings[chunk.end].size());
      if (chunk.end > begin &&
          chunk.payload_bytes + encoded > static_cast<size_t>(chunk_bytes)) {
        break;
      }
      chunk.payload_bytes += encoded;
      ++chunk.end;
    }
    chunks.push_back(chunk);
    begin = chunk.end;
  } while (begin < numel);
  return chunks;
}

std::vector<int64_t> ChunkKeyOrder(int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [](int64_t a, int64_t b) {
    return absl::StrCat(a) < absl::StrCat(b);
  });
  return order;
}

}  // namespace serialization_internal
}  // namespace jobgraph

#include "engine/chunking.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/serialization.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using Segments = std::vector<std::pair<int64_t, int64_t>>;

// The >2 GiB property without allocating: the layout of huge tensors keeps
// every chunk within chunk_bytes and covers every element exactly once.
TEST(SerializationInternalTest, HugeTensorsSplitIntoBoundedChunks) {
  struct Case {
    int64_t numel;
    size_t element_size;
    int64_t chunk_bytes;
    size_t expected_chunks;
  };
  for (const Case& c : {
           Case{(int64_t{3} << 30) / 4, 4, int64_t{64} << 20, 48},
           Case{(int64_t{5} << 30) / 8 + 1, 8, kMaxChunkBytes, 6},
           Case{int64_t{3} << 30, 1, int64_t{64} << 20, 48},
       }) {
    const Segments chunks = serialization_internal::FixedWidthChunks(
        c.numel, c.element_size, c.chunk_bytes);
    EXPECT_EQ(chunks.size(), c.expected_chunks);
    int64_t next = 0;
    for (const auto& [begin, end] : chunks) {
      EXPECT_EQ(begin, next);
      EXPECT_GT(end, begin);
      EXPECT_LE((end - begin) * static_cast<int64_t>(c.element_size),
                c.chunk_bytes);
      next = end;
    }
    EXPECT_EQ(next, c.numel);
  }
  EXPECT_EQ(serialization_internal::ElementsPerChunk(8, 7), 1);
  EXPECT_EQ(serialization_internal::ElementsPerChunk(4, 64 << 20), 16 << 20);
}

}  // namespace
}  // namespace jobgraph

// The chunk layout of serialized tensors: which elements each chunk holds
// and in which order the chunks are written.
//
// A fixed-width tensor gets floor(chunk_bytes / element size) elements per
// chunk, at least one. A string tensor gets elements while their encoded
// string_data fields fit in chunk_bytes, at least one per chunk. Every tensor
// has at least one chunk (an empty one has the single chunk [0, 0)).
//
// Internal to the serialization library (package-private target). Every
// function is pure and thread-safe.

#ifndef JOBGRAPH_ENGINE_CHUNKING_H_
#define JOBGRAPH_ENGINE_CHUNKING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace jobgraph {
namespace serialization_internal {

// Elements per chunk of a fixed-width tensor: floor(chunk_bytes /
// element_size), at least 1. `chunk_bytes` > 0, `element_size` > 0.
int64_t ElementsPerChunk(size_t element_size, int64_t chunk_bytes);

// The element ranges [begin, end) of the chunks of a fixed-width tensor of
// `numel` elements, in order.
std::vector<std::pair<int64_t, int64_t>> FixedWidthChunks(int64_t numel,
                                                          size_t element_size,
                                                          int64_t chunk_bytes);

// One chunk of a string tensor.
struct StringChunk {
  int64_t begin = 0;
  int64_t end = 0;
  // The wire size of the chunk's string_data fields.
  size_t payload_bytes = 0;
};

// The chunks of a string tensor with elements `strings`, in order.
std::vector<StringChunk> StringChunks(absl::Span<const std::string> strings,
                                      int64_t chunk_bytes);

// The chunk indexes 0..n-1 in the bytewise order of their keys ("x#%0",
// "x#%1", "x#%10", "x#%2", ...). Chunks are written in that order so that a
// database that keeps keys sorted (LevelDB) receives them already sorted:
// out-of-order keys make LevelDB's table files overlap and cost a compaction
// that rewrites the data.
std::vector<int64_t> ChunkKeyOrder(int64_t n);

}  // namespace serialization_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_CHUNKING_H_

// Internals of engine/serialization.cc, exposed for its tests only: the chunk
// layout of fixed-width tensors and the copy-free BlobProto scanner. Not part
// of the public API; other code must not include this header.
//
// Thread-safety: the functions are pure and may be called from any thread.

#ifndef JOBGRAPH_ENGINE_SERIALIZATION_INTERNAL_H_
#define JOBGRAPH_ENGINE_SERIALIZATION_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace serialization_internal {

// Elements per chunk of a fixed-width tensor: floor(chunk_bytes /
// element_size), at least 1. `chunk_bytes` > 0, `element_size` > 0.
int64_t ElementsPerChunk(size_t element_size, int64_t chunk_bytes);

// The element ranges [begin, end) of the chunks of a fixed-width tensor of
// `numel` elements, in order. Always at least one (an empty tensor has the
// single chunk [0, 0)).
std::vector<std::pair<int64_t, int64_t>> FixedWidthChunks(int64_t numel,
                                                          size_t element_size,
                                                          int64_t chunk_bytes);

// A BlobProto whose bulk tensor data was left in the serialized value.
struct ScannedBlobProto {
  // Every field except tensor.raw_data and tensor.string_data.
  BlobProto header;
  // tensor.raw_data as a view into the value, if the field was present.
  std::optional<absl::string_view> raw_data;
  // tensor.string_data, each a view into the value.
  std::vector<absl::string_view> string_data;
};

// Parses serialized BlobProto `value` into `out` without copying
// tensor.raw_data or tensor.string_data; the views in `out` point into
// `value`. Occurrences of `tensor` are merged as protobuf does (raw_data:
// the last wins). DataLoss if `value` is not a valid BlobProto.
absl::Status ScanBlobProto(absl::string_view value, ScannedBlobProto* out);

}  // namespace serialization_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_SERIALIZATION_INTERNAL_H_

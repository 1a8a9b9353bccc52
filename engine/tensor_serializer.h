// Writing tensors as chunks, each a BlobProto under the key "<name>#%<k>"
// (the layout serialization.h describes), and the BlobSerializer of Tensor
// blobs, which the library registers at start-up.
//
// Internal to the serialization library (a private header of its target).
// Thread-safe: the writer only reads the tensor, which the caller keeps
// unchanged while it runs.

#ifndef JOBGRAPH_ENGINE_TENSOR_SERIALIZER_H_
#define JOBGRAPH_ENGINE_TENSOR_SERIALIZER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/serialization.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace serialization_internal {

// Writes `tensor` as blob `name` through `sink`, one call per chunk, in the
// bytewise order of the keys. The caller has checked `name` and `options`.
// InvalidArgument naming the blob for a string element over kMaxChunkBytes.
absl::Status WriteTensorChunks(absl::string_view name, const Tensor& tensor,
                               const SerializationOptions& options,
                               const BlobSink& sink);
// WriteTensorChunks for SerializeBlobBorrowing: a fixed-width chunk's
// elements are passed as a view of the tensor's memory (no copy).
absl::Status WriteTensorChunksBorrowing(absl::string_view name,
                                        const Tensor& tensor,
                                        const SerializationOptions& options,
                                        const BorrowingBlobSink& sink);

}  // namespace serialization_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_TENSOR_SERIALIZER_H_

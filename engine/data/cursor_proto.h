// How reader cursors are stored in a BlobProto: their integer state as an
// int64 tensor in BlobProto.tensor (dims [n], raw_data little-endian, as
// jobgraph writes every fixed-width tensor; int64_data is accepted too, as
// Caffe2 wrote it) and any text in BlobProto.content.
//
// Internal to //engine/data. Stateless and thread-safe.

#ifndef JOBGRAPH_ENGINE_DATA_CURSOR_PROTO_H_
#define JOBGRAPH_ENGINE_DATA_CURSOR_PROTO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace data_internal {

// A BlobProto named `name` of `type` holding `values` and `content`,
// serialized.
std::string SerializeCursorProto(absl::string_view name, absl::string_view type,
                                 absl::Span<const int64_t> values,
                                 absl::string_view content);

// The int64 values of proto.tensor(): empty when the proto has no tensor (a
// Caffe2 TreeCursor that never read). DataLoss naming the blob when the
// tensor is not a 1-D int64 tensor or its data is inconsistent with dims.
absl::StatusOr<std::vector<int64_t>> CursorValues(const BlobProto& proto);

}  // namespace data_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_CURSOR_PROTO_H_

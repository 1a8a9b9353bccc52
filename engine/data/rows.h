// Row access for the data ops: checking that a record's field tensors share
// their first dimension, and copying rows of a field into a batch tensor.
//
// Internal to //engine/data. Stateless; the caller owns the tensors (the
// source may be read concurrently by several ops, the output must not be).

#ifndef JOBGRAPH_ENGINE_DATA_ROWS_H_
#define JOBGRAPH_ENGINE_DATA_ROWS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/operator.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace data_internal {

// The common number of rows of inputs first..InputSize()-1 of `op`: each must
// be a tensor of at least one dimension, all with the same first dimension.
// An error names the offending blob.
absl::StatusOr<int64_t> CommonRowCount(const OperatorBase& op, int first);

// Sets `out` to rows [begin, end) of `src` (shape [end - begin, src dims
// 1...]), reusing out's storage when dtype and shape already match. Requires
// 0 <= begin <= end <= src.dim(0) (CHECKed: callers validate).
void SliceRows(const Tensor& src, int64_t begin, int64_t end, Tensor* out);

// Sets `out` to the rows of `src` listed in `rows`, in that order. Every
// index must be in [0, src.dim(0)) (CHECKed).
void GatherRows(const Tensor& src, absl::Span<const int64_t> rows, Tensor* out);

}  // namespace data_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_ROWS_H_

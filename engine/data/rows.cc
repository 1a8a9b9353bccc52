#include "engine/data/rows.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace data_internal {
namespace {

std::vector<int64_t> BatchShape(const Tensor& src, int64_t rows) {
  std::vector<int64_t> shape = src.shape();
  shape[0] = rows;
  return shape;
}

// Elements per row.
int64_t RowSize(const Tensor& src) {
  return NumElements(absl::MakeConstSpan(src.shape()).subspan(1));
}

}  // namespace

absl::StatusOr<int64_t> CommonRowCount(const OperatorBase& op, int first) {
  int64_t rows = -1;
  for (int i = first; i < op.InputSize(); ++i) {
    JG_ASSIGN_OR_RETURN(const Tensor* field, op.Input(i));
    if (field->ndim() == 0) {
      return op.Error(absl::StatusCode::kInvalidArgument,
                      absl::StrCat("field '", op.InputName(i),
                                   "' is a scalar; a record field needs a "
                                   "first dimension (one entry per row)"));
    }
    if (rows >= 0 && field->dim(0) != rows) {
      return op.Error(
          absl::StatusCode::kInvalidArgument,
          absl::StrCat("field '", op.InputName(i), "' has ", field->dim(0),
                       " rows but field '", op.InputName(first), "' has ", rows,
                       "; the fields of a record must have equal "
                       "first dimensions"));
    }
    rows = field->dim(0);
  }
  return rows < 0 ? 0 : rows;
}

void SliceRows(const Tensor& src, int64_t begin, int64_t end, Tensor* out) {
  CHECK(0 <= begin && begin <= end && end <= src.dim(0))
      << "rows [" << begin << ", " << end << ") of " << src.DebugString(0);
  PrepareOutput(out, src.dtype(), BatchShape(src, end - begin));
  const int64_t row = RowSize(src);
  if (src.dtype() == STRING) {
    const std::string* in = src.data<std::string>() + begin * row;
    std::string* o = out->mutable_data<std::string>();
    for (int64_t i = 0; i < (end - begin) * row; ++i) o[i] = in[i];
    return;
  }
  const size_t row_bytes = row * DataTypeSize(src.dtype());
  if (end > begin && row_bytes > 0) {
    std::memcpy(out->raw_mutable_data(),
                static_cast<const char*>(src.raw_data()) + begin * row_bytes,
                (end - begin) * row_bytes);
  }
}

void GatherRows(const Tensor& src, absl::Span<const int64_t> rows,
                Tensor* out) {
  PrepareOutput(out, src.dtype(),
                BatchShape(src, static_cast<int64_t>(rows.size())));
  const int64_t row = RowSize(src);
  for (int64_t r : rows) {
    CHECK(0 <= r && r < src.dim(0))
        << "row " << r << " of " << src.DebugString(0);
  }
  if (src.dtype() == STRING) {
    const std::string* in = src.data<std::string>();
    std::string* o = out->mutable_data<std::string>();
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t k = 0; k < row; ++k) o[i * row + k] = in[rows[i] * row + k];
    }
    return;
  }
  const size_t row_bytes = row * DataTypeSize(src.dtype());
  if (rows.empty() || row_bytes == 0) return;
  const char* in = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out->raw_mutable_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(o + i * row_bytes, in + rows[i] * row_bytes, row_bytes);
  }
}

}  // namespace data_internal
}  // namespace jobgraph

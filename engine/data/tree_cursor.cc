#include "engine/data/tree_cursor.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/blob.h"
#include "engine/data/cursor_proto.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<std::pair<int64_t, int64_t>> TreeCursor::Advance(
    int64_t batch_size, int64_t num_rows) {
  std::lock_guard<std::mutex> lock(mu_);
  if (offset_ > num_rows) {
    return absl::OutOfRangeError(absl::StrCat(
        "the cursor is at row ", offset_, " but the data has only ", num_rows,
        " rows (did the data change since the position was saved?)"));
  }
  const int64_t begin = offset_;
  offset_ = std::min(num_rows, offset_ + batch_size);
  return std::make_pair(begin, offset_);
}

int64_t TreeCursor::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

void TreeCursor::set_offset(int64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  offset_ = offset;
}

namespace {

class TreeCursorSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kTreeCursorTypeName; }

  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const TreeCursor& cursor = blob.Get<TreeCursor>();
    const int64_t offset = cursor.offset();
    // Caffe2 wrote each field name followed by a space.
    std::string fields;
    for (const std::string& field : cursor.fields()) {
      absl::StrAppend(&fields, field, " ");
    }
    return sink(std::string(name), data_internal::SerializeCursorProto(
                                       name, type_name(), {offset}, fields));
  }

  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                        data_internal::CursorValues(proto));
    if (offsets.size() > 1) {
      return absl::UnimplementedError(absl::StrCat(
          "blob '", proto.name(), "' is a cursor over a nested record (",
          offsets.size(), " offsets); only flat records are supported"));
    }
    const int64_t offset = offsets.empty() ? 0 : offsets[0];
    if (offset < 0) {
      return absl::DataLossError(absl::StrCat(
          "blob '", proto.name(), "': negative cursor offset ", offset));
    }
    std::vector<std::string> fields =
        absl::StrSplit(proto.content(), ' ', absl::SkipEmpty());
    target->Reset(std::make_unique<TreeCursor>(std::move(fields), offset));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_TYPE(TreeCursor, kTreeCursorTypeName);
JG_REGISTER_BLOB_SERIALIZER(TreeCursor, TreeCursorSerializer);

}  // namespace
}  // namespace jobgraph

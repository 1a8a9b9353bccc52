// TreeCursor: the reading position of a Dataset reader, held in a blob of the
// node's root workspace (Caffe2's TreeCursor for flat records).
//
// The position is the offset of the next row to read. Reads take the mutex,
// take rows [offset, min(offset + batch_size, num_rows)) and advance past
// them, so concurrent readers never get a row twice or skip one. Once the
// offset reaches the end, reads return empty ranges (the end-of-data signal).
//
// Checkpointed: the registered serializer stores it as BlobProto.type
// "std::unique_ptr<TreeCursor>" with the offsets as an int64 tensor (dims
// [1]) and the field names, space-separated, in `content`, as Caffe2 did. A
// Caffe2 cursor that never read (no tensor) loads as offset 0.
//
// Thread-safe.

#ifndef JOBGRAPH_ENGINE_DATA_TREE_CURSOR_H_
#define JOBGRAPH_ENGINE_DATA_TREE_CURSOR_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

namespace jobgraph {

inline constexpr char kTreeCursorTypeName[] = "std::unique_ptr<TreeCursor>";

class TreeCursor {
 public:
  TreeCursor() = default;
  explicit TreeCursor(std::vector<std::string> fields, int64_t offset = 0)
      : fields_(std::move(fields)), offset_(offset) {}
  TreeCursor(const TreeCursor&) = delete;
  TreeCursor& operator=(const TreeCursor&) = delete;

  // The record's field names, fixed at creation.
  const std::vector<std::string>& fields() const { return fields_; }

  // The rows [begin, end) of the next batch of at most `batch_size` rows of
  // data that has `num_rows` rows, advancing past them; begin == end at the
  // end of data. OutOfRange when the offset is beyond `num_rows` (the data
  // shrank since the position was saved).
  absl::StatusOr<std::pair<int64_t, int64_t>> Advance(int64_t batch_size,
                                                      int64_t num_rows);

  int64_t offset() const;
  void set_offset(int64_t offset);

 private:
  const std::vector<std::string> fields_;
  mutable std::mutex mu_;
  int64_t offset_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_TREE_CURSOR_H_

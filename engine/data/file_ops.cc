// Operators of the text-file reader:
//   CreateFileCursor () -> cursor     args: path
//   ReadLines        (cursor) -> (lines)
//                                     args: batch_size, buffer_bytes
// `lines` is a string tensor of shape [k], k <= batch_size complete lines
// (without '\n'); k = 0 at the end of the file. ResetCursor (dataset_ops.cc)
// rewinds a file cursor. Concurrent ReadLines on one cursor get disjoint
// lines (file_cursor.h).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/data/file_cursor.h"
#include "engine/operator.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

class CreateFileCursorOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    JG_ASSIGN_OR_RETURN(path_,
                        GetRequiredStringArg("path", "the text file to read"));
    return absl::OkStatus();
  }

  // The file is opened by the first read, so that a missing file fails the
  // task that reads (naming the path), also after a restore.
  absl::Status Run() override {
    OutputBlob(0)->Reset(std::make_unique<FileCursor>(path_));
    return absl::OkStatus();
  }

 private:
  std::string path_;
};
JG_REGISTER_OPERATOR(CreateFileCursor, CreateFileCursorOp);

class ReadLinesOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(1, 1, 1, 1));
    JG_ASSIGN_OR_RETURN(batch_size_, GetPositiveArg<int64_t>("batch_size", 1));
    JG_ASSIGN_OR_RETURN(buffer_bytes_, GetPositiveArg<int64_t>(
                                           "buffer_bytes", int64_t{64} << 10));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(FileCursor * cursor,
                        InputAs<FileCursor>(0, "cursor", "CreateFileCursor"));
    JG_RETURN_IF_ERROR(
        Annotate(cursor->ReadLines(batch_size_, buffer_bytes_, &lines_),
                 absl::StrCat("cursor '", InputName(0), "'")));
    Tensor* out = Output(0);
    const int64_t n = static_cast<int64_t>(lines_.size());
    PrepareOutput(out, STRING, {n});
    std::string* data = out->mutable_data<std::string>();
    for (int64_t i = 0; i < n; ++i) data[i] = std::move(lines_[i]);
    return absl::OkStatus();
  }

 private:
  int64_t batch_size_ = 1;
  int64_t buffer_bytes_ = 0;
  std::vector<std::string> lines_;
};
JG_REGISTER_OPERATOR(ReadLines, ReadLinesOp);

}  // namespace
}  // namespace jobgraph

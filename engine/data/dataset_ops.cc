// Operators of the in-memory Dataset readers:
//   CreateTreeCursor      () -> cursor          args: fields
//   ReadNextBatch         (cursor, fields...) -> (batch fields...)
//                                               args: batch_size,
//                                                     enforce_batch_size
//   ResetCursor           (cursor) -> ()        TreeCursor or FileCursor
//   CreateShuffleCursor   () -> cursor          args: fields, seed
//   ReadNextShuffledBatch (cursor, fields...) -> (batch fields...)
//                                               args: batch_size
//   StartNextShuffleEpoch (cursor) -> ()        args: only_if_exhausted
//
// A batch field has the source field's shape with the first dimension
// replaced by the number of rows read; 0 rows is the end of the data. The
// cursors serialise concurrent reads (see tree_cursor.h, shuffle_cursor.h);
// copying the rows happens outside their locks, as the fields are only read.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/data/file_cursor.h"
#include "engine/data/rows.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/tree_cursor.h"
#include "engine/operator.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

using data_internal::CommonRowCount;

// Checks the wiring of an op that reads (cursor, fields...) into one output
// per field.
absl::Status CheckBatchArity(const OperatorBase& op) {
  JG_RETURN_IF_ERROR(
      op.CheckArity(2, OperatorBase::kUnbounded, 1, OperatorBase::kUnbounded));
  if (op.OutputSize() == op.InputSize() - 1) return absl::OkStatus();
  return op.Error(absl::StatusCode::kInvalidArgument,
                  absl::StrCat("reads ", op.InputSize() - 1, " fields into ",
                               op.OutputSize(), " outputs; they must match"));
}

// InvalidArgument unless the cursor was made for as many fields as the op
// reads: reading a different record with a cursor is a wiring bug.
absl::Status CheckFieldCount(const OperatorBase& op,
                             const std::vector<std::string>& cursor_fields) {
  const int fields = op.InputSize() - 1;
  if (static_cast<int>(cursor_fields.size()) == fields) {
    return absl::OkStatus();
  }
  return op.Error(
      absl::StatusCode::kInvalidArgument,
      absl::StrCat("cursor '", op.InputName(0), "' was created for ",
                   cursor_fields.size(), " fields but the op reads ", fields));
}

class CreateTreeCursorOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    fields_ = GetRepeatedArg<std::string>("fields");
    return absl::OkStatus();
  }

  // A new cursor at offset 0 on every run, as in Caffe2.
  absl::Status Run() override {
    OutputBlob(0)->Reset(std::make_unique<TreeCursor>(fields_));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> fields_;
};
JG_REGISTER_OPERATOR(CreateTreeCursor, CreateTreeCursorOp);

class ReadNextBatchOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckBatchArity(*this));
    JG_ASSIGN_OR_RETURN(batch_size_, GetPositiveArg<int64_t>("batch_size", 1));
    enforce_batch_size_ = GetArg<bool>("enforce_batch_size", false);
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(TreeCursor * cursor,
                        InputAs<TreeCursor>(0, "cursor", "CreateTreeCursor"));
    JG_RETURN_IF_ERROR(CheckFieldCount(*this, cursor->fields()));
    JG_ASSIGN_OR_RETURN(const int64_t num_rows, CommonRowCount(*this, 1));
    absl::StatusOr<std::pair<int64_t, int64_t>> range =
        cursor->Advance(batch_size_, num_rows);
    if (!range.ok()) {
      return Annotate(range.status(),
                      absl::StrCat("cursor '", InputName(0), "'"));
    }
    auto [begin, end] = *range;
    // Caffe2: with enforce_batch_size a partial batch reads as the end of
    // the data (the cursor has moved past it all the same).
    if (enforce_batch_size_ && end - begin < batch_size_) begin = end;
    for (int i = 0; i < OutputSize(); ++i) {
      JG_ASSIGN_OR_RETURN(const Tensor* field, Input(i + 1));
      data_internal::SliceRows(*field, begin, end, Output(i));
    }
    return absl::OkStatus();
  }

 private:
  int64_t batch_size_ = 1;
  bool enforce_batch_size_ = false;
};
JG_REGISTER_OPERATOR(ReadNextBatch, ReadNextBatchOp);

class ResetCursorOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 0, 0); }

  absl::Status Run() override {
    Blob* blob = InputBlob(0);
    if (blob->IsType<TreeCursor>()) {
      blob->GetMutable<TreeCursor>()->set_offset(0);
      return absl::OkStatus();
    }
    JG_ASSIGN_OR_RETURN(
        FileCursor * cursor,
        InputAs<FileCursor>(0, "cursor",
                            "CreateTreeCursor or CreateFileCursor"));
    cursor->set_offset(0);
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(ResetCursor, ResetCursorOp);

class CreateShuffleCursorOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    fields_ = GetRepeatedArg<std::string>("fields");
    // The seed travels as the int64 with the same bits.
    seed_ = static_cast<uint64_t>(GetArg<int64_t>("seed", 0));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    ShuffleCursor::State state;
    state.seed = seed_;
    OutputBlob(0)->Reset(std::make_unique<ShuffleCursor>(fields_, state));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> fields_;
  uint64_t seed_ = 0;
};
JG_REGISTER_OPERATOR(CreateShuffleCursor, CreateShuffleCursorOp);

class ReadNextShuffledBatchOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckBatchArity(*this));
    JG_ASSIGN_OR_RETURN(batch_size_, GetPositiveArg<int64_t>("batch_size", 1));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(
        ShuffleCursor * cursor,
        InputAs<ShuffleCursor>(0, "cursor", "CreateShuffleCursor"));
    JG_RETURN_IF_ERROR(CheckFieldCount(*this, cursor->fields()));
    JG_ASSIGN_OR_RETURN(const int64_t num_rows, CommonRowCount(*this, 1));
    JG_RETURN_IF_ERROR(
        Annotate(cursor->NextBatch(batch_size_, num_rows, &rows_),
                 absl::StrCat("cursor '", InputName(0), "'")));
    for (int i = 0; i < OutputSize(); ++i) {
      JG_ASSIGN_OR_RETURN(const Tensor* field, Input(i + 1));
      data_internal::GatherRows(*field, rows_, Output(i));
    }
    return absl::OkStatus();
  }

 private:
  int64_t batch_size_ = 1;
  std::vector<int64_t> rows_;  // reused across runs
};
JG_REGISTER_OPERATOR(ReadNextShuffledBatch, ReadNextShuffledBatchOp);

class StartNextShuffleEpochOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 0, 0); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(
        ShuffleCursor * cursor,
        InputAs<ShuffleCursor>(0, "cursor", "CreateShuffleCursor"));
    cursor->StartNextEpoch(GetArg<bool>("only_if_exhausted", false));
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(StartNextShuffleEpoch, StartNextShuffleEpochOp);

}  // namespace
}  // namespace jobgraph

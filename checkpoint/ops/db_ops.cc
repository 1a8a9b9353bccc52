// The DBExists and GetAllBlobNames operators (see save_load_ops.h).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/db_type_arg.h"
#include "checkpoint/ops/save_load_ops.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// DBExists(-> exists): see save_load_ops.h.
class DbExistsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    path_ = GetArg<std::string>("db_name", GetArg<std::string>("db", ""));
    if (path_.empty()) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "argument 'db_name' (the database path) is required");
    }
    // Caffe2 answered true for an unknown type; a typo must not look like a
    // checkpoint.
    JG_ASSIGN_OR_RETURN(db_type_, GetDbTypeArg(*this));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    absl::StatusOr<bool> exists = Exists();
    if (!exists.ok()) {
      return Annotate(exists.status());
    }
    *Output(0) = Tensor::Scalar(*exists);
    return absl::OkStatus();
  }

 private:
  // Whether an error while opening the database or reading its blob index
  // means "there is no usable database" (missing, unfinished or damaged;
  // the LevelDB adapter reports unreadable data of a finished database as
  // DataLoss) rather than "no answer is possible" (an I/O error, the
  // database open elsewhere in this process, permission denied), which is
  // returned so that a caller never quietly skips a database it could not
  // check.
  static bool MeansAbsent(const absl::Status& status) {
    return absl::IsNotFound(status) || absl::IsDataLoss(status);
  }

  absl::StatusOr<bool> Exists() const {
    DbOptions options;
    // Only the blob index's presence matters here; checking the checksums of
    // the block that holds it would make the answer depend on which values
    // share that block. Load and VerifyDb check every value.
    options.verify_checksums = false;
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open(db_type_, path_, DbMode::kRead, options);
    if (!db.ok()) {
      if (!MeansAbsent(db.status())) return db.status();
      LOG_IF(WARNING, !absl::IsNotFound(db.status()))
          << "DBExists: " << db.status();
      return false;
    }
    absl::StatusOr<std::string> index = (*db)->Get(kBlobIndexKey);
    if (!index.ok()) {
      if (!MeansAbsent(index.status())) return index.status();
      LOG_IF(WARNING, !absl::IsNotFound(index.status()))
          << "DBExists: " << index.status();
      return false;
    }
    return true;
  }

  std::string path_;
  std::string db_type_;
};

JG_REGISTER_OPERATOR(DBExists, DbExistsOp);

// GetAllBlobNames(-> names): see save_load_ops.h.
class GetAllBlobNamesOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(0, 0, 1, 1));
    include_shared_ = GetArg<bool>("include_shared", true);
    return absl::OkStatus();
  }

  absl::Status Run() override {
    // Both lists are sorted, and include this op's output, which was
    // created when the op was built.
    const std::vector<std::string> names = include_shared_
                                               ? workspace()->BlobNames()
                                               : workspace()->LocalBlobNames();
    *Output(0) = Tensor::FromVector(names);
    return absl::OkStatus();
  }

 private:
  bool include_shared_ = true;
};

JG_REGISTER_OPERATOR(GetAllBlobNames, GetAllBlobNamesOp);

}  // namespace
}  // namespace jobgraph

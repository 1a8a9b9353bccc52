// The CommitStagedBlobs and DropStagedBlobs operators (see save_load_ops.h).

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/workspace.h"

namespace jobgraph {
namespace {

// The staged blobs of a workspace: its local blobs whose names start with
// the op's `prefix`.
class StagedBlobsOp : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    if (InputSize() != 0 || OutputSize() != 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "takes no inputs and no outputs");
    }
    prefix_ = GetArg<std::string>("prefix", "");
    if (prefix_.empty()) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "argument 'prefix' (the names' staging prefix) is required");
    }
    require_staged_ = GetArg<bool>("require_staged", false);
    return absl::OkStatus();
  }

  absl::Status Run() override {
    Workspace& ws = *workspace();
    int staged = 0;
    for (const std::string& name : ws.LocalBlobNames()) {
      if (!absl::StartsWith(name, prefix_)) continue;
      Visit(ws, name, absl::string_view(name).substr(prefix_.size()));
      ws.RemoveBlob(name);
      ++staged;
    }
    if (staged == 0 && require_staged_) {
      return Error(
          absl::StatusCode::kFailedPrecondition,
          absl::StrCat("workspace '", ws.name(),
                       "' holds no staged blobs (named '", prefix_, "...')"));
    }
    return absl::OkStatus();
  }

 private:
  // Called for each staged blob `staged`, just before it is removed.
  virtual void Visit(Workspace& ws, const std::string& staged,
                     absl::string_view target) = 0;

  std::string prefix_;
  bool require_staged_ = false;
};

// Moves each staged blob into the blob named without the prefix (created if
// needed), replacing what it held.
class CommitStagedBlobsOp final : public StagedBlobsOp {
 public:
  using StagedBlobsOp::StagedBlobsOp;

 private:
  void Visit(Workspace& ws, const std::string& staged,
             absl::string_view target) override {
    ws.CreateBlob(target)->Swap(*ws.GetBlob(staged));
  }
};

// Discards the staged blobs.
class DropStagedBlobsOp final : public StagedBlobsOp {
 public:
  using StagedBlobsOp::StagedBlobsOp;

 private:
  void Visit(Workspace&, const std::string&, absl::string_view) override {}
};

JG_REGISTER_OPERATOR(CommitStagedBlobs, CommitStagedBlobsOp);
JG_REGISTER_OPERATOR(DropStagedBlobs, DropStagedBlobsOp);

}  // namespace
}  // namespace jobgraph

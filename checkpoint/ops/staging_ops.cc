// The CommitStagedBlobs and DropStagedBlobs operators (see save_load_ops.h).

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace jobgraph {
namespace {

// The staged blobs of a workspace: its local blobs whose names start with
// the op's `prefix`; the one named `prefix` itself is the marker. kCommit:
// CommitStagedBlobs moves each into the blob named without the prefix
// (created if needed), replacing what it held; else DropStagedBlobs
// discards them.
template <bool kCommit>
class StagedBlobsOp final : public OperatorBase {
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
    if (HasArg("stage")) stage_ = GetArg<std::string>("stage", "");
    check_only_ = GetArg<bool>("check_only", false);
    return absl::OkStatus();
  }

  absl::Status Run() override {
    Workspace& ws = *workspace();
    if (stage_.has_value()) {
      // The marker says which load staged what is here.
      absl::StatusOr<const Tensor*> marker = ws.GetTensor(prefix_);
      if (!marker.ok() || (*marker)->dtype() != STRING ||
          (*marker)->numel() != 1 ||
          (*marker)->data<std::string>()[0] != *stage_) {
        return Error(absl::StatusCode::kFailedPrecondition,
                     absl::StrCat("workspace '", ws.name(),
                                  "' holds no blobs staged by load ", *stage_));
      }
    }
    if (check_only_) return absl::OkStatus();
    for (const std::string& name : ws.LocalBlobNames()) {
      if (!absl::StartsWith(name, prefix_)) continue;
      if (kCommit && name.size() > prefix_.size()) {
        ws.CreateBlob(absl::string_view(name).substr(prefix_.size()))
            ->Swap(*ws.GetBlob(name));
      }
      ws.RemoveBlob(name);
    }
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
  std::optional<std::string> stage_;
  bool check_only_ = false;
};

JG_REGISTER_OPERATOR(CommitStagedBlobs, StagedBlobsOp<true>);
JG_REGISTER_OPERATOR(DropStagedBlobs, StagedBlobsOp<false>);

}  // namespace
}  // namespace jobgraph

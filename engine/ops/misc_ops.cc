// Copy (x -> y), IsEmpty (x -> bool scalar) and Print (x).
//
// Copy is how PRIVATE tasks publish results: its output may name a blob of
// the parent (root) workspace, which CreateBlob then returns, so the copy
// lands there.

#include <cstdint>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

class CopyOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* in, Input(0));
    CopyTensor(*in, Output(0));
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(Copy, CopyOp);

class IsEmptyOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override { return CheckArity(1, 1, 1, 1); }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* in, Input(0));
    const bool empty = in->numel() == 0;
    SetScalar(Output(0), empty);
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(IsEmpty, IsEmptyOp);

// Print(x): "x: int64[3] {1, 2, 3}" to the INFO log, or to stdout with
// to_stdout=1. Args: `limit`, the most elements shown (default 1000, as in
// Caffe2). A debugging aid, so it describes non-tensor blobs instead of
// failing on them.
class PrintOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(1, 1, 0, 0));
    to_stdout_ = GetArg<bool>("to_stdout", false);
    JG_ASSIGN_OR_RETURN(limit_, GetNonNegativeArg<int64_t>("limit", 1000));
    return absl::OkStatus();
  }

  absl::Status Run() override {
    const std::string line = absl::StrCat(InputName(0), ": ", ValueString());
    if (to_stdout_) {
      std::cout << line << std::endl;
    } else {
      LOG(INFO) << line;
    }
    return absl::OkStatus();
  }

 private:
  std::string ValueString() const {
    const Blob* blob = InputBlob(0);
    if (blob->IsType<Tensor>()) return blob->Get<Tensor>().DebugString(limit_);
    if (blob->IsType<Counter>()) {
      return absl::StrCat(blob->TypeName(), " {",
                          blob->Get<Counter>().Retrieve(), "}");
    }
    return blob->TypeName();
  }

  bool to_stdout_ = false;
  int64_t limit_ = 1000;
};
JG_REGISTER_OPERATOR(Print, PrintOp);

}  // namespace
}  // namespace jobgraph

#include "engine/data/data_test_util.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/operator.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace jobgraph {
namespace data_test {
namespace {

struct Collected {
  std::mutex mu;
  std::map<std::string, std::vector<int64_t>> ints ABSL_GUARDED_BY(mu);
  std::map<std::string, std::vector<std::string>> strings ABSL_GUARDED_BY(mu);
};

Collected& Store() {
  static Collected* store = new Collected;  // never destroyed
  return *store;
}

class TestCollectRowsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* batch, Input(0));
    const std::string tag = GetArg<std::string>("tag", "");
    Collected& store = Store();
    std::lock_guard<std::mutex> lock(store.mu);
    if (batch->dtype() == STRING) {
      for (const std::string& s : batch->values<std::string>()) {
        store.strings[tag].push_back(s);
      }
    } else {
      for (int64_t v : batch->values<int64_t>()) store.ints[tag].push_back(v);
    }
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TestCollectRows, TestCollectRowsOp);

class TestAccumulateRowsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Run() override {
    std::lock_guard<std::mutex> lock(Store().mu);
    JG_ASSIGN_OR_RETURN(const Tensor* batch, Input(0));
    int64_t sum = 0;
    for (int64_t v : batch->values<int64_t>()) sum += v;
    Output(0)->mutable_data<int64_t>()[0] += sum;
    Output(1)->mutable_data<int64_t>()[0] += batch->dim(0);
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TestAccumulateRows, TestAccumulateRowsOp);

}  // namespace

void CollectRows(NetBuilder& net, const BlobRef& batch,
                 const std::string& tag) {
  net.Op("TestCollectRows", {batch}, std::vector<BlobRef>{},
         {MakeArg("tag", tag)});
}

void AccumulateRows(NetBuilder& net, const BlobRef& batch, const BlobRef& sum,
                    const BlobRef& count) {
  net.Op("TestAccumulateRows", {batch, sum, count}, {sum, count});
}

std::vector<int64_t> CollectedInts(const std::string& tag) {
  std::lock_guard<std::mutex> lock(Store().mu);
  return Store().ints[tag];
}

std::vector<std::string> CollectedStrings(const std::string& tag) {
  std::lock_guard<std::mutex> lock(Store().mu);
  return Store().strings[tag];
}

void ClearCollected() {
  std::lock_guard<std::mutex> lock(Store().mu);
  Store().ints.clear();
  Store().strings.clear();
}

absl::StatusOr<std::vector<std::string>> CheckpointAndRestore(
    LocalSession& from, LocalSession& to, absl::string_view node) {
  Workspace* source = from.NodeWorkspace(node);
  Workspace* target = to.NodeWorkspace(node);
  std::vector<std::string> names = source->LocalBlobNames();
  // Serialize everything first, as a checkpoint would, then load.
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& name : names) {
    JG_ASSIGN_OR_RETURN(Blob * blob, source->FindBlob(name));
    JG_RETURN_IF_ERROR(SerializeBlob(
        name, *blob, {}, [&pairs](std::string key, std::string value) {
          pairs.emplace_back(std::move(key), std::move(value));
          return absl::OkStatus();
        }));
  }
  BlobAssembler assembler;
  for (const auto& [key, value] : pairs) {
    JG_ASSIGN_OR_RETURN(BlobKey parsed, ParseBlobKey(key));
    JG_RETURN_IF_ERROR(assembler.Add(parsed.blob_name, value,
                                     target->CreateBlob(parsed.blob_name)));
  }
  JG_RETURN_IF_ERROR(assembler.Finish());
  return names;
}

absl::StatusOr<int64_t> FetchInt(const Session& session, absl::string_view node,
                                 absl::string_view blob) {
  JG_ASSIGN_OR_RETURN(Tensor t, session.FetchBlob(node, blob));
  if (t.dtype() != INT64 || t.numel() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", blob, "' is ", t.DebugString(4), ", not one int64"));
  }
  return t.data<int64_t>()[0];
}

absl::StatusOr<bool> FetchBool(const Session& session, absl::string_view node,
                               absl::string_view blob) {
  JG_ASSIGN_OR_RETURN(Tensor t, session.FetchBlob(node, blob));
  if (t.dtype() != BOOL || t.numel() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", blob, "' is ", t.DebugString(4), ", not one bool"));
  }
  return t.data<bool>()[0];
}

}  // namespace data_test
}  // namespace jobgraph

#include "engine/data/reader.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

std::string ReaderImpl::DerivedName(absl::string_view kind) const {
  std::lock_guard<std::mutex> lock(derived_mu_);
  const int index = derived_counts_[std::string(kind)]++;
  std::string derived = absl::StrCat(name(), "/", kind);
  if (index > 0) absl::StrAppend(&derived, ":", index);
  return derived;
}

const ReaderImpl& Reader::impl() const {
  CHECK(impl_ != nullptr) << "use of a default-constructed (invalid) Reader";
  return *impl_;
}

void FillFalse(NetBuilder& net, const BlobRef& blob) {
  // No `shape` argument: ConstantFill then makes a scalar (shape []), the
  // shape the executor's stop check and Or expect.
  net.Op("ConstantFill", {}, {blob},
         {MakeArg("dtype", static_cast<int64_t>(BOOL)),
          MakeArg("value", int64_t{0})});
}

}  // namespace jobgraph

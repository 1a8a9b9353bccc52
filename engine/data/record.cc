#include "engine/data/record.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace jobgraph {

void Record::AddField(std::string name, BlobRef blob) {
  CHECK(!HasField(name)) << "record already has a field '" << name << "'";
  names_.push_back(std::move(name));
  blobs_.push_back(std::move(blob));
}

bool Record::HasField(absl::string_view name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

const BlobRef& Record::Field(absl::string_view name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  CHECK(it != names_.end())
      << "record has no field '" << name
      << "'; its fields are: " << absl::StrJoin(names_, ", ");
  return blobs_[it - names_.begin()];
}

Record ConstRecord(NetBuilder& net,
                   const std::vector<std::pair<std::string, Tensor>>& fields) {
  Record record;
  for (const auto& [name, value] : fields) {
    record.AddField(name, net.Const(value, name));
  }
  return record;
}

}  // namespace jobgraph

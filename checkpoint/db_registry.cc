#include "checkpoint/db_registry.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db.h"

namespace jobgraph {

DbRegistry& DbRegistry::Global() {
  static DbRegistry* registry = new DbRegistry;  // Never destroyed.
  return *registry;
}

absl::Status DbRegistry::Register(const std::string& type, DbFactory factory) {
  if (type.empty()) {
    return absl::InvalidArgumentError("a DB type name must not be empty");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!factories_.emplace(type, std::move(factory)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("DB type '", type, "' is already registered"));
  }
  return absl::OkStatus();
}

bool DbRegistry::IsRegistered(absl::string_view type) const {
  std::lock_guard<std::mutex> lock(mu_);
  return factories_.find(type) != factories_.end();
}

std::vector<std::string> DbRegistry::Types() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> types;
  types.reserve(factories_.size());
  for (const auto& entry : factories_) types.push_back(entry.first);
  return types;
}

absl::StatusOr<std::unique_ptr<DB>> DbRegistry::Open(
    absl::string_view type, const std::string& path, DbMode mode,
    const DbOptions& options) const {
  DbFactory factory;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = factories_.find(type);
    if (it == factories_.end()) {
      std::vector<std::string> known;
      for (const auto& entry : factories_) known.push_back(entry.first);
      return absl::NotFoundError(absl::StrCat(
          "cannot open DB ", path, ": unknown DB type '", type,
          "'; known types: ",
          known.empty() ? "(none registered)" : absl::StrJoin(known, ", ")));
    }
    // Copied so that a slow open does not hold the lock.
    factory = it->second;
  }
  return factory(path, mode, options);
}

}  // namespace jobgraph

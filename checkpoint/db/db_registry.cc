#include "checkpoint/db/db_registry.h"

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
#include "checkpoint/db/db.h"

namespace jobgraph {

DbRegistry& DbRegistry::Global() {
  static DbRegistry* registry = new DbRegistry;  // Never destroyed.
  return *registry;
}

absl::Status DbRegistry::Register(const std::string& name,
                                  std::shared_ptr<const DbType> type) {
  if (name.empty()) {
    return absl::InvalidArgumentError("a DB type name must not be empty");
  }
  if (type == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("DB type '", name, "' registered without an object"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!types_.emplace(name, std::move(type)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("DB type '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

bool DbRegistry::IsRegistered(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return types_.find(name) != types_.end();
}

std::vector<std::string> DbRegistry::Types() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(types_.size());
  for (const auto& entry : types_) names.push_back(entry.first);
  return names;
}

absl::StatusOr<const DbType*> DbRegistry::Find(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = types_.find(name);
  if (it != types_.end()) return it->second.get();
  std::vector<std::string> known;
  for (const auto& entry : types_) known.push_back(entry.first);
  return absl::NotFoundError(absl::StrCat(
      "unknown DB type '", name, "'; known types: ",
      known.empty() ? "(none registered)" : absl::StrJoin(known, ", ")));
}

absl::StatusOr<std::unique_ptr<DB>> DbRegistry::Open(
    absl::string_view name, const std::string& path, DbMode mode,
    const DbOptions& options) const {
  absl::StatusOr<const DbType*> type = Find(name);
  if (!type.ok()) {
    return absl::Status(
        type.status().code(),
        absl::StrCat("cannot open DB ", path, ": ", type.status().message()));
  }
  // Outside the lock: opening may be slow.
  return (*type)->Open(path, mode, options);
}

}  // namespace jobgraph

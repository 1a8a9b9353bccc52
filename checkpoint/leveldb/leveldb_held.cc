#include "checkpoint/leveldb/leveldb_held.h"

#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jobgraph {
namespace {

struct Registry {
  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex.
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const HeldLevelDb>> held;
};

Registry& Held() {
  static auto* const registry = new Registry;
  return *registry;
}

}  // namespace

absl::Status RegisterHeldLevelDb(const std::string& path,
                                 std::shared_ptr<const HeldLevelDb> held) {
  Registry& r = Held();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.held.emplace(path, std::move(held)).second) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a packed LevelDB database is held in memory as ", path, " already"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const HeldLevelDb> FindHeldLevelDb(const std::string& path) {
  Registry& r = Held();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.held.find(path);
  return it == r.held.end() ? nullptr : it->second;
}

void ForgetHeldLevelDb(const std::string& path) {
  Registry& r = Held();
  std::shared_ptr<const HeldLevelDb> dropped;  // freed outside the lock
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.held.find(path);
  if (it == r.held.end()) return;
  dropped = std::move(it->second);
  r.held.erase(it);
}

}  // namespace jobgraph

// The registry of DB types: maps a type name ("leveldb", "memory", ...) to a
// factory that opens a database of that type.
//
// Backends register at start-up with JG_REGISTER_DB_TYPE in their .cc file
// (their cc_library needs alwayslink = True). Callers open databases by name:
//
//   JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
//                       DbRegistry::Global().Open("leveldb", path,
//                                                 DbMode::kNew));
//
// A registry is thread-safe. Global() is never destroyed, so it may be used
// from static initializers and at exit.

#ifndef JOBGRAPH_CHECKPOINT_DB_REGISTRY_H_
#define JOBGRAPH_CHECKPOINT_DB_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db.h"
#include "glog/logging.h"

namespace jobgraph {

// Opens a database of one type. Errors name the path.
using DbFactory = std::function<absl::StatusOr<std::unique_ptr<DB>>(
    const std::string& path, DbMode mode, const DbOptions& options)>;

class DbRegistry {
 public:
  DbRegistry() = default;
  DbRegistry(const DbRegistry&) = delete;
  DbRegistry& operator=(const DbRegistry&) = delete;

  // The process-wide registry.
  static DbRegistry& Global();

  // AlreadyExists if `type` is registered; InvalidArgument if it is empty.
  absl::Status Register(const std::string& type, DbFactory factory);
  bool IsRegistered(absl::string_view type) const;
  // Registered type names, sorted.
  std::vector<std::string> Types() const;

  // Opens `path` with the factory registered as `type`. An unknown type is
  // NotFound listing the known ones.
  absl::StatusOr<std::unique_ptr<DB>> Open(
      absl::string_view type, const std::string& path, DbMode mode,
      const DbOptions& options = DbOptions()) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, DbFactory, std::less<>> factories_ ABSL_GUARDED_BY(mu_);
};

// Registers FACTORY (a DbFactory) as TYPE (a string) in the global registry at
// start-up; a duplicate TYPE is a fatal error naming it.
#define JG_REGISTER_DB_TYPE(TYPE, FACTORY) \
  JG_REGISTER_DB_TYPE_IMPL_(TYPE, FACTORY, __COUNTER__)
#define JG_REGISTER_DB_TYPE_IMPL_(TYPE, FACTORY, N) \
  JG_REGISTER_DB_TYPE_IMPL2_(TYPE, FACTORY, N)
#define JG_REGISTER_DB_TYPE_IMPL2_(TYPE, FACTORY, N)                           \
  [[maybe_unused]] static const bool jg_db_type_registered_##N = [] {          \
    absl::Status s = ::jobgraph::DbRegistry::Global().Register(TYPE, FACTORY); \
    CHECK(s.ok()) << s;                                                        \
    return true;                                                               \
  }()

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_DB_REGISTRY_H_

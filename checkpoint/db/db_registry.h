// The registry of DB types: maps a type name ("leveldb", "memory", ...) to the
// DbType object (db.h) that opens, installs and removes databases of that
// type.
//
// Types register at start-up with JG_REGISTER_DB_TYPE in their .cc file
// (their cc_library needs alwayslink = True). Callers find a type by name:
//
//   JG_ASSIGN_OR_RETURN(const DbType* type, DbRegistry::Global().Find(name));
//   JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
//                       type->Open(path, DbMode::kNew));
//
// The registry owns its DbType objects and never drops one, so a pointer
// returned by Find() stays valid as long as the registry. A registry is
// thread-safe. Global() is never destroyed, so it may be used from static
// initializers and at exit.

#ifndef JOBGRAPH_CHECKPOINT_DB_DB_REGISTRY_H_
#define JOBGRAPH_CHECKPOINT_DB_DB_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "glog/logging.h"

namespace jobgraph {

// The DB type used when nobody chose one: by the checkpoint tools for a
// directory whose commit log names none. Registered by leveldb_db.
inline constexpr char kDefaultDbType[] = "leveldb";

class DbRegistry {
 public:
  DbRegistry() = default;
  DbRegistry(const DbRegistry&) = delete;
  DbRegistry& operator=(const DbRegistry&) = delete;

  // The process-wide registry.
  static DbRegistry& Global();

  // Registers `type` under `name`; one object may be registered under
  // several names (aliases). AlreadyExists if `name` is taken;
  // InvalidArgument if it is empty or `type` is null.
  absl::Status Register(const std::string& name,
                        std::shared_ptr<const DbType> type);
  bool IsRegistered(absl::string_view name) const;
  // Registered type names, sorted.
  std::vector<std::string> Types() const;

  // The type registered as `name`; NotFound listing the known names.
  absl::StatusOr<const DbType*> Find(absl::string_view name) const;

  // Find(name)->Open(path, mode, options); an unknown name is NotFound
  // naming `path` and listing the known names.
  absl::StatusOr<std::unique_ptr<DB>> Open(
      absl::string_view name, const std::string& path, DbMode mode,
      const DbOptions& options = DbOptions()) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const DbType>, std::less<>> types_
      ABSL_GUARDED_BY(mu_);
};

// Registers TYPE (a std::shared_ptr<const DbType>, or anything convertible to
// one) as NAME (a string) in the global registry at start-up; a duplicate
// NAME is a fatal error naming it.
#define JG_REGISTER_DB_TYPE(NAME, TYPE) \
  JG_REGISTER_DB_TYPE_IMPL_(NAME, TYPE, __COUNTER__)
#define JG_REGISTER_DB_TYPE_IMPL_(NAME, TYPE, N) \
  JG_REGISTER_DB_TYPE_IMPL2_(NAME, TYPE, N)
#define JG_REGISTER_DB_TYPE_IMPL2_(NAME, TYPE, N)                           \
  [[maybe_unused]] static const bool jg_db_type_registered_##N = [] {       \
    absl::Status s = ::jobgraph::DbRegistry::Global().Register(NAME, TYPE); \
    CHECK(s.ok()) << s;                                                     \
    return true;                                                            \
  }()

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_DB_DB_REGISTRY_H_

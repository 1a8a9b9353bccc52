// CopyCheckpointDb (save_load_ops.h): a checked copy of a finished database,
// put in place by the protocol that WriteCheckpointDb follows (temp_db.h);
// and PackCheckpointDb / InstallPackedCheckpointDb, the same copy split
// between two machines.

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/ops/temp_db.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<int64_t> CopyCheckpointDb(const DbType& type,
                                         const std::string& from,
                                         const std::string& to,
                                         const CopyOptions& options) {
  absl::StatusOr<int64_t> copied = [&]() -> absl::StatusOr<int64_t> {
    JG_ASSIGN_OR_RETURN(temp_db::SplitPath split, temp_db::Split(to));
    int64_t bytes = 0;
    JG_RETURN_IF_ERROR(temp_db::InstallThroughTemp(
        type, split, "flush.after_copy",
        [&](const std::string& temp) -> absl::Status {
          JG_ASSIGN_OR_RETURN(bytes, type.Copy(from, temp, options));
          return absl::OkStatus();
        }));
    return bytes;
  }();
  if (!copied.ok()) {
    return Annotate(copied.status(),
                    absl::StrCat("copying checkpoint ", from, " to ", to));
  }
  return copied;
}

absl::StatusOr<int64_t> CopyCheckpointDb(absl::string_view db_type,
                                         const std::string& from,
                                         const std::string& to,
                                         const CopyOptions& options) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  if (!type.ok()) {
    return Annotate(type.status(),
                    absl::StrCat("copying checkpoint ", from, " to ", to));
  }
  return CopyCheckpointDb(**type, from, to, options);
}

absl::StatusOr<std::string> PackCheckpointDb(const DbType& type,
                                             const std::string& path) {
  absl::StatusOr<std::string> packed = type.Pack(path);
  if (!packed.ok()) {
    return Annotate(packed.status(), absl::StrCat("packing checkpoint ", path));
  }
  return packed;
}

absl::StatusOr<std::string> PackCheckpointDb(absl::string_view db_type,
                                             const std::string& path) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  if (!type.ok()) {
    return Annotate(type.status(), absl::StrCat("packing checkpoint ", path));
  }
  return PackCheckpointDb(**type, path);
}

absl::StatusOr<int64_t> InstallPackedCheckpointDb(const DbType& type,
                                                  absl::string_view packed,
                                                  const std::string& path) {
  absl::StatusOr<int64_t> installed = [&]() -> absl::StatusOr<int64_t> {
    JG_ASSIGN_OR_RETURN(temp_db::SplitPath split, temp_db::Split(path));
    int64_t bytes = 0;
    JG_RETURN_IF_ERROR(temp_db::InstallThroughTemp(
        type, split, "transfer.before_install",
        [&](const std::string& temp) -> absl::Status {
          JG_ASSIGN_OR_RETURN(bytes, type.Unpack(packed, temp));
          return absl::OkStatus();
        }));
    return bytes;
  }();
  if (!installed.ok()) {
    return Annotate(installed.status(),
                    absl::StrCat("installing packed checkpoint at ", path));
  }
  return installed;
}

absl::StatusOr<int64_t> InstallPackedCheckpointDb(absl::string_view db_type,
                                                  absl::string_view packed,
                                                  const std::string& path) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  if (!type.ok()) {
    return Annotate(type.status(),
                    absl::StrCat("installing packed checkpoint at ", path));
  }
  return InstallPackedCheckpointDb(**type, packed, path);
}

absl::StatusOr<int64_t> HoldPackedCheckpointDb(absl::string_view db_type,
                                               std::string packed,
                                               const std::string& path) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  absl::StatusOr<int64_t> held =
      type.ok() ? (*type)->HoldPacked(std::move(packed), path) : type.status();
  if (!held.ok()) {
    return Annotate(held.status(), absl::StrCat("holding packed checkpoint ",
                                                path, " in memory"));
  }
  return held;
}

void ReleaseHeldCheckpointDb(absl::string_view db_type,
                             const std::string& path) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  if (type.ok()) (*type)->ReleaseHeld(path);
}

}  // namespace jobgraph

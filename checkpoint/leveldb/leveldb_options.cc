#include "checkpoint/leveldb/leveldb_options.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

absl::StatusOr<bool> DirectIoSetting(bool configured) {
  const char* value = std::getenv(kDirectIoEnvVar);
  if (value == nullptr || *value == '\0') return configured;
  const absl::string_view v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  return absl::InvalidArgumentError(absl::StrCat(
      kDirectIoEnvVar, "=", v,
      " is not a setting: use 0 to write checkpoint table files through the "
      "page cache, 1 to write them with O_DIRECT (the default), or unset it"));
}

}  // namespace jobgraph

#include "checkpoint/commit/checkpoint_paths.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {

namespace {

// mkdir -p.
absl::Status CreateDirs(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(dir));
  if (exists) return absl::OkStatus();
  const std::string parent = ParentDir(dir);
  if (!parent.empty() && parent != dir) JG_RETURN_IF_ERROR(CreateDirs(parent));
  absl::Status s = CreateDir(dir);
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

}  // namespace

absl::Status PrepareCheckpointDirectory(const std::string& dir) {
  absl::Status created = CreateDirs(dir);
  if (!created.ok()) {
    return absl::UnavailableError(
        absl::StrCat("checkpoint directory ", dir,
                     " cannot be created: ", created.message()));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat("checkpoint directory ", dir,
                     " is not writable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string CheckpointDbPath(absl::string_view dir, absl::string_view node,
                             int64_t epoch) {
  return JoinPath(dir, absl::StrCat(node, ".", epoch));
}

absl::Status ValidateNodeName(absl::string_view node) {
  const bool valid_chars = std::all_of(node.begin(), node.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.';
  });
  if (node.empty() || node.size() > 200 || node[0] == '.' || !valid_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node name '", node,
        "' cannot name a checkpoint database: use 1 to 200 letters, digits, "
        "'_', '-' or '.', not starting with '.' (names become file names in "
        "the checkpoint directory)"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> ParseDecimal(absl::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0') ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return absl::ascii_isdigit(c); })) {
    return std::nullopt;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return std::nullopt;
  return value;
}

std::optional<CheckpointDbName> ParseCheckpointDbName(
    absl::string_view basename) {
  const size_t dot = basename.rfind('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  const absl::string_view node = basename.substr(0, dot);
  std::optional<int64_t> epoch = ParseDecimal(basename.substr(dot + 1));
  if (!epoch.has_value() || !ValidateNodeName(node).ok()) return std::nullopt;
  return CheckpointDbName{std::string(node), *epoch};
}

}  // namespace jobgraph

#include "checkpoint/checkpoint_paths.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/file_util.h"

namespace jobgraph {

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

}  // namespace jobgraph

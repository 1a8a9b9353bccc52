#include "checkpoint/tier/local_directory.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace jobgraph {

std::string HostName() {
  // Several hosts simulated on one machine (tests, trying a job's MPI tiers
  // out): each rank is given the host it stands for.
  if (const char* given = std::getenv("JOBGRAPH_HOST_NAME");
      given != nullptr && given[0] != '\0') {
    return given;
  }
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

absl::StatusOr<std::string> ExpandLocalDirectory(absl::string_view pattern,
                                                 absl::string_view host) {
  if (pattern.empty()) {
    return absl::InvalidArgumentError(
        "the local checkpoint directory is empty: give a path such as "
        "/dev/shm/ckpt-%h");
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out.push_back(pattern[i]);
      continue;
    }
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (next == '%') {
      out.push_back('%');
    } else if (next == 'h') {
      if (host.empty() || host == "." || host == ".." ||
          host.find('/') != absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("the host name '", host,
                         "' cannot replace %h in the "
                         "local checkpoint directory '",
                         pattern, "'"));
      }
      absl::StrAppend(&out, host);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "the local checkpoint directory '", pattern, "' has '%",
          pattern.substr(i + 1, 1), "' at offset ", i,
          ": only %h (the host name) and %% (a percent sign) are replaced"));
    }
    ++i;
  }
  return out;
}

}  // namespace jobgraph

// Where a host's local tier lives: CheckpointOptions::local_directory with
// its placeholders filled in. Functions; thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_TIER_LOCAL_DIRECTORY_H_
#define JOBGRAPH_CHECKPOINT_TIER_LOCAL_DIRECTORY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

// This machine's host name (gethostname(2)); "localhost" if it has none.
// The environment variable JOBGRAPH_HOST_NAME, when set and not empty,
// overrides it: ranks on one machine can stand for several hosts.
std::string HostName();

// `pattern` with "%h" replaced by `host` and "%%" by "%". InvalidArgument
// naming the pattern for an empty one, a "%" followed by anything else, and
// a host name that cannot be part of a path (empty, "/", "." or "..").
absl::StatusOr<std::string> ExpandLocalDirectory(absl::string_view pattern,
                                                 absl::string_view host);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_TIER_LOCAL_DIRECTORY_H_

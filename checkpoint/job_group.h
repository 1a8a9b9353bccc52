// The names of a job's groups (JobGroup in proto/jobgraph.proto): the names
// the builder gives its TaskGroups, the words messages use, and what commit
// logs written before Preemption.group existed stored instead of the enum.
//
// Functions only; thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_JOB_GROUP_H_
#define JOBGRAPH_CHECKPOINT_JOB_GROUP_H_

#include "absl/strings/string_view.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// "init", "epoch", "download" or "exit"; "" for JOB_GROUP_UNSPECIFIED.
absl::string_view JobGroupName(JobGroup group);

// The group named `name` (JobGroupName's inverse); JOB_GROUP_UNSPECIFIED for
// any other name.
JobGroup JobGroupFromName(absl::string_view name);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_JOB_GROUP_H_

#include "checkpoint/job_group.h"

namespace jobgraph {

absl::string_view JobGroupName(JobGroup group) {
  switch (group) {
    case JOB_GROUP_INIT:
      return "init";
    case JOB_GROUP_EPOCH:
      return "epoch";
    case JOB_GROUP_DOWNLOAD:
      return "download";
    case JOB_GROUP_EXIT:
      return "exit";
    default:
      return "";
  }
}

JobGroup JobGroupFromName(absl::string_view name) {
  for (JobGroup group :
       {JOB_GROUP_INIT, JOB_GROUP_EPOCH, JOB_GROUP_DOWNLOAD, JOB_GROUP_EXIT}) {
    if (name == JobGroupName(group)) return group;
  }
  return JOB_GROUP_UNSPECIFIED;
}

}  // namespace jobgraph

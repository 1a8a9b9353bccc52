#include "checkpoint/job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "checkpoint/job_group.h"
#include "engine/status_macros.h"
#include "google/protobuf/text_format.h"

namespace jobgraph {

Job::Job()
    : init_(std::string(JobGroupName(JOB_GROUP_INIT)), GLOBAL),
      epoch_(std::string(JobGroupName(JOB_GROUP_EPOCH))),
      download_(std::string(JobGroupName(JOB_GROUP_DOWNLOAD))),
      exit_(std::string(JobGroupName(JOB_GROUP_EXIT))) {}

void Job::AddStopCondition(const BlobRef& blob) {
  if (blob.node().empty()) {
    if (error_.empty()) {
      error_ = absl::StrCat("stop condition '", blob.name(),
                            "' names no node; use a BlobRef made by a task's "
                            "builder, or a TaskOutput");
    }
    return;
  }
  // A task with no step: it only publishes the blob (Caffe2's
  // add_stop_signal does the same).
  Task& task = epoch_.NewTask(Node(blob.node()), {.name = "stop_condition"});
  AddStopCondition(task.AddOutput(blob));
}

void Job::AddStopCondition(const TaskOutput& output) {
  stops_.push_back(output);
}

std::vector<std::string> Job::nodes_to_checkpoint() const {
  if (!nodes_to_checkpoint_.empty()) return nodes_to_checkpoint_;
  return init_.used_nodes();
}

std::vector<std::string> Job::nodes() const {
  std::vector<std::string> nodes;
  auto add = [&](const std::string& node) {
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
      nodes.push_back(node);
    }
  };
  for (const TaskGroup* group : {&init_, &epoch_, &download_, &exit_}) {
    for (const std::string& node : group->used_nodes()) add(node);
  }
  for (const TaskOutput& stop : stops_) add(stop.node());
  return nodes;
}

absl::StatusOr<JobDef> Job::Build() const {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  JobDef def;
  JG_ASSIGN_OR_RETURN(*def.mutable_init_group(), init_.Build());
  JG_ASSIGN_OR_RETURN(*def.mutable_epoch_group(), epoch_.Build());
  JG_ASSIGN_OR_RETURN(*def.mutable_download_group(), download_.Build());
  JG_ASSIGN_OR_RETURN(*def.mutable_exit_group(), exit_.Build());
  for (const TaskOutput& stop : stops_) {
    for (const std::string& blob : stop.blobs()) {
      StopCondition* condition = def.add_stop_condition();
      condition->set_node(stop.node());
      condition->set_blob(blob);
    }
  }
  for (const std::string& node : nodes_to_checkpoint()) {
    def.add_nodes_to_checkpoint(node);
  }
  return def;
}

std::string Job::DebugString() const {
  absl::StatusOr<JobDef> def = Build();
  if (!def.ok()) return def.status().ToString();
  std::string text;
  google::protobuf::TextFormat::PrintToString(*def, &text);
  return text;
}

}  // namespace jobgraph

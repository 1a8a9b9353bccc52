#include "engine/task.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "google/protobuf/text_format.h"

namespace jobgraph {

Task::Task(std::string full_name, std::string net_prefix, Node node,
           TaskOptions options)
    : full_name_(std::move(full_name)),
      node_(std::move(node)),
      options_(std::move(options)) {
  auto builder = [&](const std::string& suffix) {
    return std::make_unique<NetBuilder>(net_prefix + suffix, node_.name(),
                                        &scope_, this);
  };
  // The body's builder is made first so that its first net takes the plain
  // task name.
  body_ = builder("");
  init_ = builder(":init");
  exit_ = builder(":exit");
  instance_init_ = builder(":instance:init");
  instance_exit_ = builder(":instance:exit");
}

NetBuilder& Task::AddReporter(int64_t interval_ms) {
  reporters_.emplace_back(
      interval_ms,
      std::make_unique<NetBuilder>(
          scope_.UniqueNetName(absl::StrCat(body_->name(), ":reporter")),
          node_.name(), &scope_, this));
  return *reporters_.back().second;
}

TaskOutput Task::AddOutput(const BlobRef& blob) { return AddOutputs({blob}); }

TaskOutput Task::AddOutputs(const std::vector<BlobRef>& blobs) {
  std::vector<std::string> names;
  for (const BlobRef& blob : blobs) {
    names.push_back(blob.name());
    outputs_.push_back(blob.name());
  }
  return TaskOutput(node_.name(), std::move(names));
}

namespace {

// [first, middle, last] as substeps of a step named `name`, leaving out the
// steps of empty builders; just `middle` when both are empty.
absl::StatusOr<ExecutionStep> Wrap(const std::string& name,
                                   const NetBuilder& first,
                                   ExecutionStep middle, const NetBuilder& last,
                                   PlanDef* plan) {
  if (first.empty() && last.empty()) return middle;
  ExecutionStep wrapper;
  wrapper.set_name(name);
  if (!first.empty()) {
    JG_RETURN_IF_ERROR(first.BuildStep(plan, wrapper.add_substep()));
  }
  *wrapper.add_substep() = std::move(middle);
  if (!last.empty()) {
    JG_RETURN_IF_ERROR(last.BuildStep(plan, wrapper.add_substep()));
  }
  return wrapper;
}

}  // namespace

absl::StatusOr<TaskDef> Task::Build() const {
  TaskDef def;
  def.set_name(full_name_);
  def.set_node(node_.name());
  def.set_workspace_type(options_.workspace_type);
  for (const std::string& output : outputs_) def.add_output(output);
  if (options_.num_instances < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", full_name_, "' has num_instances ",
                     options_.num_instances, "; it must be at least 1"));
  }
  PlanDef* plan = def.mutable_plan();
  plan->set_name(full_name_);
  const std::string& prefix = body_->name();

  ExecutionStep body;
  JG_RETURN_IF_ERROR(body_->BuildStep(plan, &body));
  if (!reporters_.empty()) {
    ExecutionStep with_reporters;
    with_reporters.set_name(prefix + ":body");
    for (const auto& [interval_ms, reporter] : reporters_) {
      ExecutionStep* step = with_reporters.add_substep();
      JG_RETURN_IF_ERROR(reporter->BuildStep(plan, step));
      step->set_run_every_ms(interval_ms);
    }
    *with_reporters.add_substep() = std::move(body);
    body = std::move(with_reporters);
  }
  JG_ASSIGN_OR_RETURN(ExecutionStep instance,
                      Wrap(prefix + ":instance", *instance_init_,
                           std::move(body), *instance_exit_, plan));
  if (options_.num_instances > 1) {
    instance.set_create_workspace(true);
    ExecutionStep parallel;
    parallel.set_name(prefix + ":parallel");
    parallel.set_num_concurrent_instances(options_.num_instances);
    *parallel.add_substep() = std::move(instance);
    instance = std::move(parallel);
  }
  JG_ASSIGN_OR_RETURN(ExecutionStep outer,
                      Wrap(prefix, *init_, std::move(instance), *exit_, plan));
  outer.set_create_workspace(options_.workspace_type == PRIVATE);
  *plan->add_execution_step() = std::move(outer);
  return def;
}

TaskGroup::TaskGroup(std::string name, WorkspaceType workspace_type)
    : name_(std::move(name)), workspace_type_(workspace_type) {}

Task& TaskGroup::NewTask(const Node& node, TaskOptions options) {
  // Caffe2's TaskGroup.add: types must agree; an untyped task inherits the
  // group's type (else PRIVATE), and an untyped group takes the task's.
  if (options.workspace_type != WORKSPACE_TYPE_UNSET &&
      workspace_type_ != WORKSPACE_TYPE_UNSET &&
      options.workspace_type != workspace_type_ && error_.empty()) {
    error_ = absl::StrCat("task '", options.name, "' on node '", node.name(),
                          "' is ", WorkspaceType_Name(options.workspace_type),
                          " but its group '", name_, "' is ",
                          WorkspaceType_Name(workspace_type_));
  }
  if (options.workspace_type == WORKSPACE_TYPE_UNSET) {
    options.workspace_type =
        workspace_type_ != WORKSPACE_TYPE_UNSET ? workspace_type_ : PRIVATE;
  }
  if (workspace_type_ == WORKSPACE_TYPE_UNSET) {
    workspace_type_ = options.workspace_type;
  }
  const std::string base = absl::StrCat(node.name(), "/", options.name);
  std::string full_name = base;
  for (int i = 1;; ++i) {
    bool taken = false;
    for (const auto& task : tasks_) taken |= task->name() == full_name;
    if (!taken) break;
    full_name = absl::StrCat(base, ":", i);
  }
  std::string net_prefix =
      name_.empty() ? full_name : absl::StrCat(name_, "/", full_name);
  tasks_.push_back(std::make_unique<Task>(
      std::move(full_name), std::move(net_prefix), node, std::move(options)));
  return *tasks_.back();
}

std::vector<std::string> TaskGroup::used_nodes() const {
  std::vector<std::string> nodes;
  for (const auto& task : tasks_) {
    const std::string& node = task->node().name();
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
      nodes.push_back(node);
    }
  }
  return nodes;
}

absl::StatusOr<TaskGroupDef> TaskGroup::Build() const {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  TaskGroupDef def;
  def.set_name(name_);
  def.set_workspace_type(workspace_type_);
  for (const auto& task : tasks_) {
    JG_ASSIGN_OR_RETURN(*def.add_task(), task->Build());
  }
  return def;
}

std::string TaskGroup::DebugString() const {
  absl::StatusOr<TaskGroupDef> def = Build();
  if (!def.ok()) return def.status().ToString();
  std::string text;
  google::protobuf::TextFormat::PrintToString(*def, &text);
  return text;
}

}  // namespace jobgraph

// Node, Task, TaskOutput and TaskGroup: where work runs and how it is grouped.
//
// A Task is a step tree built with NetBuilders, placed on a Node. Its
// workspace type decides where it runs: GLOBAL in the node's root workspace,
// PRIVATE in a child workspace made for each run (new blobs vanish; writes to
// names that exist in the root reach it). A task's outputs are pre-created in
// the node's root workspace by the session, so PRIVATE tasks can publish
// results, and fetched by name afterwards.
//
// A TaskGroup holds tasks that run concurrently, on one or several nodes. It
// owns its tasks; Task references stay valid as long as the group. Build()
// turns the group into a TaskGroupDef that a Session runs; the same group may
// be built and run any number of times, on any session.
//
// Example:
//   TaskGroup group("init", GLOBAL);
//   Task& task = group.NewTask(Node("trainer_0"));
//   BlobRef total = task.net().Const<int64_t>("total", {100});
//   TaskOutput out = task.AddOutput(total);
//
// Not thread-safe; build on one thread, then run.

#ifndef JOBGRAPH_ENGINE_TASK_H_
#define JOBGRAPH_ENGINE_TASK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/net_builder.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// A place where tasks run: one root workspace per node in a session.
class Node {
 public:
  explicit Node(std::string name = "local") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Blobs a task publishes, fetched by name through a Session after a run.
class TaskOutput {
 public:
  TaskOutput() = default;
  TaskOutput(std::string node, std::vector<std::string> blobs)
      : node_(std::move(node)), blobs_(std::move(blobs)) {}

  const std::string& node() const { return node_; }
  const std::vector<std::string>& blobs() const { return blobs_; }

 private:
  std::string node_;
  std::vector<std::string> blobs_;
};

struct TaskOptions {
  // The task's name within its group; the full name is "<node>/<name>",
  // with ":1", ":2"... appended when the group already has that name.
  std::string name = "task";
  // WORKSPACE_TYPE_UNSET inherits the group's type, else PRIVATE.
  WorkspaceType workspace_type = WORKSPACE_TYPE_UNSET;
  // Concurrent copies of the task body, each in its own child workspace,
  // sharing the task's workspace (and so its init nets' blobs).
  int num_instances = 1;
};

class Task {
 public:
  // Use TaskGroup::NewTask.
  Task(std::string full_name, std::string net_prefix, Node node,
       TaskOptions options);
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  const std::string& name() const { return full_name_; }
  const Node& node() const { return node_; }
  WorkspaceType workspace_type() const { return options_.workspace_type; }
  int num_instances() const { return options_.num_instances; }

  // The task body.
  NetBuilder& net() { return *body_; }
  // Nets that run once per task run, before and after all instances.
  NetBuilder& init_net() { return *init_; }
  NetBuilder& exit_net() { return *exit_; }
  // Nets that run in each instance, before and after its body.
  NetBuilder& instance_init_net() { return *instance_init_; }
  NetBuilder& instance_exit_net() { return *instance_exit_; }
  // A step that runs every `interval_ms` while the body runs, and once more
  // when it ends.
  NetBuilder& AddReporter(int64_t interval_ms);

  // Publishes blobs; the session creates them in the node's root workspace.
  TaskOutput AddOutput(const BlobRef& blob);
  TaskOutput AddOutputs(const std::vector<BlobRef>& blobs);
  const std::vector<std::string>& outputs() const { return outputs_; }

  // The task as a proto, its step wrapped in Caffe2's order: reporters with
  // the body, instance init/exit, concurrent instances, task init/exit.
  absl::StatusOr<TaskDef> Build() const;

 private:
  friend class TaskGroup;

  const std::string full_name_;
  const Node node_;
  TaskOptions options_;
  NameScope scope_;
  std::unique_ptr<NetBuilder> body_;
  std::unique_ptr<NetBuilder> init_;
  std::unique_ptr<NetBuilder> exit_;
  std::unique_ptr<NetBuilder> instance_init_;
  std::unique_ptr<NetBuilder> instance_exit_;
  std::vector<std::pair<int64_t, std::unique_ptr<NetBuilder>>> reporters_;
  std::vector<std::string> outputs_;
};

class TaskGroup {
 public:
  // `name` prefixes every net name of the group's tasks ("epoch/..."), so
  // groups of one job never share auto-named blobs. `workspace_type` UNSET
  // takes the first typed task's type.
  explicit TaskGroup(std::string name = "",
                     WorkspaceType workspace_type = WORKSPACE_TYPE_UNSET);
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  TaskGroup(TaskGroup&&) = default;
  TaskGroup& operator=(TaskGroup&&) = default;

  const std::string& name() const { return name_; }
  WorkspaceType workspace_type() const { return workspace_type_; }

  // Adds a task on `node`. A type that conflicts with the group's is
  // reported by Build().
  Task& NewTask(const Node& node, TaskOptions options = {});

  const std::vector<std::unique_ptr<Task>>& tasks() const { return tasks_; }
  bool empty() const { return tasks_.empty(); }
  // Distinct nodes of the tasks, in creation order.
  std::vector<std::string> used_nodes() const;

  absl::StatusOr<TaskGroupDef> Build() const;
  // The built group in protobuf text format, or the build error.
  std::string DebugString() const;

 private:
  std::string name_;
  WorkspaceType workspace_type_;
  std::vector<std::unique_ptr<Task>> tasks_;
  std::string error_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_TASK_H_

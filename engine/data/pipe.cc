#include "engine/data/pipe.h"

#include <vector>

namespace jobgraph {

Task& Pipe(TaskGroup& group, const Node& node, const Reader& reader,
           const Processor& processor, int num_threads,
           const std::string& name) {
  TaskOptions options;
  options.name = name;
  options.num_instances = num_threads;
  Task& task = group.NewTask(node, options);

  reader.SetupEx(task.init_net(), task.exit_net());
  NetBuilder& body = task.net().AddChild("body");
  ReadResult read =
      reader.ReadEx(task.instance_init_net(), task.instance_exit_net(), body);
  // As in Caffe2, every instance's loop starts from status = false.
  FillFalse(task.instance_init_net(), read.should_stop);
  body.SetStopBlob(read.should_stop);
  body.NewNet();
  if (processor) processor(body, read.record);
  body.NewNet();

  const std::vector<BlobRef> outputs = reader.TaskOutputs();
  if (!outputs.empty()) task.AddOutputs(outputs);
  return task;
}

}  // namespace jobgraph

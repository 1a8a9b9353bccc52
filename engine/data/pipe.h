// Pipe: a task that reads a Reader to its end and runs a processor on every
// batch; Caffe2's pipeline.pipe with num_runtime_threads, without an output
// queue (the processor writes wherever it likes, e.g. into root blobs).
//
// The task, added to `group` on `node` (its workspace type is the group's):
//   task init      reader.SetupEx (every task run, i.e. every epoch)
//   instance init  status := false (status = the reader's should_stop)
//   body           a step "<task>/body" with should_stop_blob = status and
//                  nets [reader's read nets..., processor's nets]; the
//                  executor checks status after each net, so a spent limit
//                  or an empty batch ends the loop before the processor runs
//   task exit      reader.SetupEx's exit nets
//   outputs        reader.TaskOutputs() (ReaderWithLimit's data_finished), so
//                  the session pre-creates them in the node's root workspace
//                  where they outlive the PRIVATE task and can be fetched as
//                  stop conditions
// With num_threads > 1 the body runs as that many runtime instances, each in
// its own child workspace (own batch blobs and status) sharing the reader's
// cursor and limit counter: no record is read twice or skipped, and a limit
// bounds the total number of reads. A processor that writes a shared blob
// must then synchronise itself (Add into a root blob from several threads is
// a data race).
//
// Unlike Caffe2's pipe, no TimerBegin/TimerEnd profiling nets are added: a
// TimerInstance has no serializer, so in a GLOBAL task it would make the root
// workspace uncheckpointable.
//
// Example (Caffe2's checkpoint_test; `total` made by the init task):
//   TaskGroup epoch("epoch", PRIVATE);
//   ReaderWithLimit limited(reader, /*num_iter=*/3);
//   Pipe(epoch, Node("trainer_0"), limited,
//        [&](NetBuilder& net, const Record& row) {
//          net.Add(total, row.Field("val"), total);
//        });
//   // stop condition: limited.data_finished()
//
// Builder code; not thread-safe.

#ifndef JOBGRAPH_ENGINE_DATA_PIPE_H_
#define JOBGRAPH_ENGINE_DATA_PIPE_H_

#include <functional>
#include <string>

#include "engine/data/reader.h"
#include "engine/data/record.h"
#include "engine/net_builder.h"
#include "engine/task.h"

namespace jobgraph {

// Appends the ops that process one batch to `net` (after the read nets).
using Processor = std::function<void(NetBuilder& net, const Record& batch)>;

// Adds the pipe task to `group` and returns it (e.g. to add more outputs).
// `processor` may be empty (the reader is just drained). `name` is the task's
// name within the group; `num_threads` >= 1 (checked when the group is
// built).
Task& Pipe(TaskGroup& group, const Node& node, const Reader& reader,
           const Processor& processor, int num_threads = 1,
           const std::string& name = "pipe");

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_PIPE_H_

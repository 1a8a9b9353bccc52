// The stable blob type name of jobgraph::Counter, shared by the blob type
// registry (linking :counter_type registers it) and the counter serializer.
// Checkpoints store it (BlobProto.type), so it is Caffe2's and never changes.
// A constant: safe from any thread.

#ifndef JOBGRAPH_ENGINE_COUNTER_TYPE_H_
#define JOBGRAPH_ENGINE_COUNTER_TYPE_H_

namespace jobgraph {

inline constexpr char kCounterTypeName[] = "std::unique_ptr<Counter<int64_t>>";

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_COUNTER_TYPE_H_

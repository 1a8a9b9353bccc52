// Gives the Counter blob type Caffe2's name, so messages and checkpoints list
// counters as "std::unique_ptr<Counter<int64_t>>". A library of its own so
// that both the counter ops and the counter serializer can depend on it
// without depending on each other.

#include "engine/blob.h"
#include "engine/counter.h"

namespace jobgraph {

JG_REGISTER_BLOB_TYPE(Counter, "std::unique_ptr<Counter<int64_t>>");

}  // namespace jobgraph

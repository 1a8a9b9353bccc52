// Registers the Counter blob type under kCounterTypeName, so messages and
// checkpoints list counters by Caffe2's name. A library of its own so that
// both the counter ops and the counter serializer can depend on it without
// depending on each other.

#include "engine/counter_type.h"

#include "engine/blob.h"
#include "engine/counter.h"

namespace jobgraph {

JG_REGISTER_BLOB_TYPE(Counter, kCounterTypeName);

}  // namespace jobgraph

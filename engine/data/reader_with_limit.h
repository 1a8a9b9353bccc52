// ReaderWithLimit: reads at most `num_iter` batches from another reader per
// task run (so per epoch when the reading task is in the epoch group), and
// records whether the data ran out. Caffe2's dataio.ReaderWithLimit, with
// its exact net order, which the stop semantics depend on.
//
// SetupEx (task init, every run):
//   data_finished := false                 (bool scalar, shape [])
//   inner reader's SetupEx
//   counter := CreateCounter(num_iter)     (only when limited)
// ReadEx appends three groups of nets to the body, each ending a net so the
// executor checks should_stop (= status) between them:
//   (a) status = CountDown(counter)         (unlimited: status := false)
//   (b) the inner reader's nets: read a batch, local_done = IsEmpty(batch)
//   (c) status = Copy(local_done); data_finished = data_finished OR
//       local_done                          (AtomicOr: see limit_ops.cc)
// The check after (a) ends the loop before a read once the limit is spent;
// the check after (c) ends it, before the processor's nets, on an empty read.
//
// Consequences:
//   - data_finished becomes true exactly when the inner reader returned an
//     empty batch, never merely because the last row was consumed: when the
//     data size is a multiple of the limit, one more epoch reads nothing and
//     sets it.
//   - num_iter = 0 reads nothing and leaves data_finished false.
//   - The counter is a task-level blob shared by the task's runtime
//     instances, and CountDown is atomic, so N concurrent instances read at
//     most num_iter batches in total; each has its own status.
//
// data_finished lives in the node's root workspace: it is one of
// TaskOutputs(), which Pipe adds to the reading task's outputs, so the session
// pre-creates it there and the PRIVATE task's writes reach it. It is the
// blob a job uses as its stop condition.
//
// Blob names derive from `name` (default "<inner reader name>/limit", then
// "<inner reader name>/limit:1", ... for further limits over the same reader):
//   "<name>/data_finished", "<name>/counter" (task workspace),
//   "<name>/status" (instance workspace).
//
// Reset(net) resets the inner reader and sets data_finished to false.
//
// A handle like Reader (it is one): copy it freely; immutable.

#ifndef JOBGRAPH_ENGINE_DATA_READER_WITH_LIMIT_H_
#define JOBGRAPH_ENGINE_DATA_READER_WITH_LIMIT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "engine/data/reader.h"
#include "engine/net_builder.h"

namespace jobgraph {

class ReaderWithLimit : public Reader {
 public:
  // `num_iter`: the most batches per task run; nullopt or negative means no
  // limit (the reader runs until empty, still tracking data_finished).
  ReaderWithLimit(Reader reader, std::optional<int64_t> num_iter,
                  std::string name = "");

  // True once the inner reader has returned an empty batch (a bool scalar
  // in the node's root workspace).
  BlobRef data_finished() const;
  // The counter blob; meaningful only with a limit.
  BlobRef counter() const;
  std::optional<int64_t> num_iter() const;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_READER_WITH_LIMIT_H_

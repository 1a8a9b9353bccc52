// The pipeline of Caffe2's checkpoint_test, for tests: on node
// "trainer_<id>", the init group makes the values 0..9, a reader over them
// and total = [100]; each epoch adds the next three values to the total; the
// job stops after the epoch whose read comes back empty. Totals after epochs
// 1..4: 103, 115, 136, 145.

#ifndef JOBGRAPH_TESTS_CAFFE2_PIPELINE_H_
#define JOBGRAPH_TESTS_CAFFE2_PIPELINE_H_

#include <cstdint>

#include "checkpoint/job.h"
#include "engine/session.h"

namespace jobgraph {
namespace testing {

// Adds trainer_<id>'s part of the pipeline to `job`.
void BuildCaffe2Pipeline(Job& job, int id);

// The total of trainer_<id> in `session` (CHECK-fails if it has none).
int64_t Caffe2Total(const Session& session, int id = 0);

}  // namespace testing
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_CAFFE2_PIPELINE_H_

// Injected I/O faults, for tests: the N-th write-side I/O call of the
// checkpoint layer (a write, fsync, close, rename or mkdir in file_util, and
// an append, sync, close or rename of a LevelDB database's files) fails with
// a chosen errno (ENOSPC, EIO), as a full or failing disk would make it.
//
// Disarmed (the default) it costs one relaxed atomic load per call. State is
// process-wide; Arm/Disarm from a test's thread, while the calls it counts
// may come from any thread (LevelDB writes tables in the background).

#ifndef JOBGRAPH_CHECKPOINT_UTIL_IO_FAULTS_H_
#define JOBGRAPH_CHECKPOINT_UTIL_IO_FAULTS_H_

#include <cstdint>

namespace jobgraph {
namespace io_faults {

// From now on, count write-side calls; the `fail_at`-th (1-based) fails with
// `error`, and only that one.
void Arm(int64_t fail_at, int error);
// Stops counting and failing.
void Disarm();
// The calls counted since the last Arm.
int64_t Calls();

// Called by each hooked operation before it runs: the errno to fail with, or
// 0 to go ahead.
int Next();

}  // namespace io_faults
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_IO_FAULTS_H_

// Test-only operators for executor, task and session tests. They record what
// ran, in order, so tests can assert the exact schedule.
//
//   TestLog(args: tag)                 appends `tag` to the log.
//   TestSetBool(-> out; value, after)  out := value once it has run `after`
//                                      times (counting this run), else !value.
//   TestFail(args: message)            returns an Internal error.
//   TestSleep(args: ms)                sleeps.
//   TestIncrement(x -> x)              x += 1 for an int64 tensor (creates 0).
//
// Thread-safe.

#ifndef JOBGRAPH_ENGINE_TEST_OPS_H_
#define JOBGRAPH_ENGINE_TEST_OPS_H_

#include <string>
#include <vector>

namespace jobgraph {
namespace testing {

// The tags logged by TestLog since the last ClearLog().
std::vector<std::string> Log();
void ClearLog();

}  // namespace testing
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_TEST_OPS_H_

// Helpers for tests that run built binaries: temporary directories, runfiles
// paths, and running a child process with its output captured (optionally
// killing it with SIGKILL after a delay, as a preemption would).
//
// Not thread-safe; for use on a test's main thread.

#ifndef JOBGRAPH_TESTS_SUBPROCESS_H_
#define JOBGRAPH_TESTS_SUBPROCESS_H_

#include <sys/wait.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace jobgraph {
namespace testing {

// A fresh, empty directory under $TEST_TMPDIR (or /tmp).
std::string NewTempDir(const std::string& name);

// The path of a built target's file in the test's runfiles, e.g.
// RunfilesPath("examples/sum_pipeline").
std::string RunfilesPath(const std::string& workspace_relative);

struct ChildRun {
  int wait_status = 0;
  std::vector<std::string> lines;  // standard output
  std::string log;                 // standard error (the child's glog)

  bool killed() const {
    return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL;
  }
  bool signalled() const { return WIFSIGNALED(wait_status); }
  bool exited_ok() const {
    return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  }
  // The exit status, or -1 if the child did not exit normally.
  int exit_code() const {
    return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  }
  // How it ended, its output, and the end of its log.
  std::string Describe() const;
  // The value of the first "<key>=..." line, if any.
  std::optional<std::string> Value(absl::string_view key) const;
  // The first line that starts with "result:", if any.
  std::optional<std::string> Result() const;
  // The first line that starts with `prefix`, if any.
  std::optional<std::string> LineStartingWith(absl::string_view prefix) const;
};

// Runs `binary` with `args`, the test's environment plus `extra_env`
// ("NAME=value"; a NAME given there replaces the inherited one). With
// `kill_after_ms` >= 0 the child is sent SIGKILL that long after it started,
// if it is still running.
ChildRun RunBinary(const std::string& binary,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& extra_env = {},
                   int kill_after_ms = -1);

// Like RunBinary, but sends SIGKILL as soon as the child's standard error
// contains `log_text` (a deterministic point, unlike a delay). If the child
// ends first, it is not killed.
// With `at_log_text`, that function runs first (while the child is still
// alive at that point), and the child is killed when it returns.
ChildRun RunBinaryKilledAt(const std::string& binary,
                           const std::vector<std::string>& args,
                           const std::string& log_text,
                           const std::function<void()>& at_log_text = nullptr);

// Like RunBinaryKilledAt, but sends `signal` once `log_text` has occurred
// `occurrences` times in the child's standard error, then waits for the
// child to end (a preemption signal it handles, or one that kills it).
ChildRun RunBinarySignalledAt(const std::string& binary,
                              const std::vector<std::string>& args,
                              const std::string& log_text, int occurrences,
                              int signal,
                              const std::vector<std::string>& extra_env = {});

// Runs `binary`; once `log_text` has occurred `occurrences` times in its
// standard error, calls `hook` with the child's pid (the child itself is not
// signalled: the hook may, for instance, kill one of its children), then
// waits for the child to end.
ChildRun RunBinaryWithHookAt(const std::string& binary,
                             const std::vector<std::string>& args,
                             const std::vector<std::string>& extra_env,
                             const std::string& log_text, int occurrences,
                             const std::function<void(pid_t)>& hook);

}  // namespace testing
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_SUBPROCESS_H_

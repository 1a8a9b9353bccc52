// Helpers for tests that run built binaries: temporary directories, runfiles
// paths, and running a child process with its output captured (optionally
// killing it with SIGKILL after a delay, as a preemption would, or when it
// prints a given line: RunBinaryWatched).
//
// Not thread-safe; for use on a test's main thread.

#ifndef JOBGRAPH_TESTS_SUBPROCESS_H_
#define JOBGRAPH_TESTS_SUBPROCESS_H_

#include <sys/wait.h>

#include <cstdint>
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

// ---------------------------------------------------------------------------
// A child whose output is read as it comes, for tests that act on a line
// the moment the child prints it (a kill or a signal on a logged event, never
// after a delay).

struct WatchOptions {
  std::vector<std::string> extra_env;  // as for RunBinary
  // The child's standard input is a pipe the test writes with
  // WatchedChild::WriteStdin (else it inherits the test's).
  bool stdin_pipe = false;
  // The child's standard output is a pipe filled before the child starts,
  // and the test reads none of it until it calls ReleaseStdout (or
  // SignalIfRunning): the child blocks at its first write to standard
  // output, so a program that prints its result last cannot finish before
  // the test lets it. Its standard output lines then reach the callback
  // only after the release.
  bool hold_stdout = false;
};

// The running child, as the line callback sees it. Until RunBinaryWatched
// reaps it, its pid cannot be reused.
class WatchedChild {
 public:
  pid_t pid() const { return pid_; }
  // Sends `signal` if the child is still running (not a zombie): returns
  // whether it was, and so whether the signal reached a live process.
  // Releases a held standard output (the child's end is then read).
  bool SignalIfRunning(int signal);
  // Writes `bytes` to the child's standard input (WatchOptions::stdin_pipe);
  // false if the child no longer reads it.
  bool WriteStdin(const std::string& bytes);
  void CloseStdin();
  void ReleaseStdout() { stdout_held_ = false; }

 private:
  friend ChildRun RunBinaryWatched(
      const std::string&, const std::vector<std::string>&, const WatchOptions&,
      const std::function<void(WatchedChild&, const std::string&, bool)>&);
  pid_t pid_ = 0;
  int stdin_fd_ = -1;
  bool stdout_held_ = false;
};

// Runs `binary` with its standard output and error on pipes, and calls
// `on_line(child, line, from_stderr)` on the test's thread for every line
// of either as it arrives (without its newline; a last unterminated line
// too), until both are closed; then reaps the child. The ChildRun holds
// every line, as RunBinary's does.
ChildRun RunBinaryWatched(
    const std::string& binary, const std::vector<std::string>& args,
    const WatchOptions& options,
    const std::function<void(WatchedChild&, const std::string&, bool)>&
        on_line);

// The state letter of process `pid` in /proc/<pid>/stat ('R', 'S', 'D',
// 'T', 'Z' for a zombie, ...), or 0 if there is no such process.
char ProcessState(pid_t pid);

// The environment of a test's mpirun: Open MPI names its shared-memory
// segments and session directories after its job id, which it derives from
// mpirun's pid. Tests run in pid namespaces (Bazel's sandbox), where two
// concurrent tests (shards, or --runs_per_test) get the same pids, hence the
// same names in the shared /dev/shm and /tmp, and hang on each other's
// segments. These variables keep them in a directory of this process's own
// (made once, removed at exit): a short one, made with mkdtemp in /tmp,
// since the session directory holds unix sockets, whose paths must stay
// under 108 bytes ($TEST_TMPDIR is longer).
std::vector<std::string> OpenMpiTempEnv();

// The pids of the ranks the mpirun process `mpirun` started on this
// machine (its children with OMPI_COMM_WORLD_RANK in their environment),
// indexed by rank; 0 where a rank was not found.
std::vector<pid_t> RankPids(pid_t mpirun);

// Sends `signal` to rank `rank` of `mpirun` (RankPids); false, sending
// nothing, when the rank is not found or kill fails.
bool KillRank(pid_t mpirun, int rank, int signal);

// The seed of a randomized test: $JOBGRAPH_TEST_SEED if set (a decimal
// number), else `default_seed`. Prints it to the test log with how to
// replay the test, under `test_name`.
uint32_t TestSeed(uint32_t default_seed, const std::string& test_name);

}  // namespace testing
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_SUBPROCESS_H_

// Failpoints: named places in the save, commit and retention paths where a
// test can make the process fail, to prove that a crash or an error at any
// step leaves a checkpoint directory that resumes correctly.
//
// Code marks a place with
//
//   JG_RETURN_IF_ERROR(Failpoint("save.after_db_write"));
//
// which costs one relaxed atomic load while no failpoint is enabled. An
// enabled failpoint either kills the process on the spot with SIGKILL (like a
// power cut or kill -9: no destructors, no flushing of user-space buffers) or
// returns Aborted("failpoint <name>"), so that an in-process test can check
// the cleanup of the error path.
//
// Failpoints are enabled in two ways:
//  - the environment, for crash tests that run a child process:
//      JOBGRAPH_FAILPOINT=save.after_db_write              (crash)
//      JOBGRAPH_FAILPOINT=save.after_rename:crash,commit.after_commit_log:error
//      JOBGRAPH_FAILPOINT=save.after_db_write:sigterm    (a signal mid-save)
//    It is read once, at the first Failpoint() or Failpoints call. A bad value
//    (an unknown name or action) is logged and then returned by every
//    Failpoint() evaluation, so a typo fails the run loudly instead of
//    silently testing nothing.
//  - the Failpoints API, for in-process tests; it overrides the environment.
//
// Every failpoint name is listed in kKnownFailpoints below, so tests can
// iterate over all of them; enabling another name is an error.
//
// Thread-safe: Failpoint() and the Failpoints functions may be called from
// any thread.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_
#define JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

// The environment variable read at start-up (lazily).
inline constexpr char kFailpointEnvVar[] = "JOBGRAPH_FAILPOINT";

struct FailpointInfo {
  absl::string_view name;
  // Where the failpoint fires and what is on disk at that moment.
  absl::string_view where;
};

// Every failpoint, in the order the save / commit / retention path reaches
// them.
inline constexpr FailpointInfo kKnownFailpoints[] = {
    // The Save op: the database is complete and durable under its temporary
    // name, and nothing exists under its final name yet (or the old copy of
    // a re-saved epoch still does).
    {"save.after_db_write",
     "Save: database written and synced under its temporary name, before the "
     "rename to its final name"},
    // The Save op: the new database is in place under its final name and the
    // directory is synced; a replaced old copy may still await deletion.
    {"save.after_rename",
     "Save: database in place under its final name, directory synced"},
    // The commit: every node's database is in place, the commit log
    // does not list the epoch yet.
    {"commit.before_commit_log",
     "commit: all databases in place, before the commit log is "
     "written"},
    // The commit: the new commit log is durable under its temporary name, the
    // old commit log is still the valid one.
    {"commit.after_commit_log_tmp",
     "commit: temporary commit log written and synced, before its rename"},
    // The commit: the commit log listing the epoch, and no longer the epochs
    // that retention retires (the same write), is in place and synced.
    {"commit.after_commit_log",
     "commit: commit log listing the epoch (without the epochs retention "
     "retires) in place and synced"},
    // Retention: the retired epochs are out of the commit log (the commit's
    // own write, or `ckpt gc`'s), their databases still exist on disk.
    {"retention.after_commit_log",
     "retention: epochs removed from the commit log, their databases not yet "
     "deleted"},
    // Retention: the first old database was deleted, the others not yet.
    {"retention.mid_delete",
     "retention: after the first old database was deleted"},
};

enum class FailpointAction {
  // kill(getpid(), SIGKILL): the process dies at once, as in a power cut.
  kCrash,
  // The failpoint returns absl::AbortedError("failpoint <name>").
  kError,
  // raise(SIGTERM), then carry on: places a preemption signal at an exact
  // point of a save (JobRunner handles it once the save is done).
  kSigterm,
};

class Failpoints {
 public:
  Failpoints() = delete;

  // Enables `name` with `action`, replacing an earlier action. An unknown
  // name is InvalidArgument listing the known ones.
  static absl::Status Enable(absl::string_view name, FailpointAction action);
  // Disables `name`; InvalidArgument for an unknown name. Disabling a
  // failpoint that is not enabled is OK.
  static absl::Status Disable(absl::string_view name);
  // Disables every failpoint, including those the environment enabled, and
  // forgets an environment parse error.
  static void DisableAll();

  // Enables the failpoints of `spec`, in the environment variable's syntax:
  // comma-separated "<name>[:crash|:error|:sigterm]" entries, surrounding
  // spaces ignored, the action defaulting to crash. On InvalidArgument (an
  // unknown name or action, or an empty entry) nothing is enabled.
  static absl::Status EnableFromSpec(absl::string_view spec);

  // Disables everything, then applies the environment variable as it is now
  // (unset or empty enables nothing). Returns the parse error, if any, which
  // Failpoint() then also returns. The first Failpoint() or Failpoints call
  // does this implicitly; tests that change the variable call it again.
  static absl::Status ReloadFromEnvironment();

  // The enabled failpoints as a spec ("a:crash,b:error"), sorted by name.
  static std::string EnabledSpec();

  // The names of kKnownFailpoints, in order.
  static std::vector<std::string> KnownNames();
  static bool IsKnown(absl::string_view name);
};

namespace failpoint_internal {

// 0 when no failpoint is enabled and the environment has been read; anything
// else sends Failpoint() to the slow path. Constant-initialized, so it is
// safe to read during static initialization.
extern std::atomic<int> g_state;

absl::Status Evaluate(absl::string_view name);

}  // namespace failpoint_internal

// OK unless failpoint `name` is enabled: then the process dies (kCrash) or
// the result is Aborted("failpoint <name>") (kError). `name` should be one of
// kKnownFailpoints.
inline absl::Status Failpoint(absl::string_view name) {
  if (failpoint_internal::g_state.load(std::memory_order_relaxed) == 0) {
    return absl::OkStatus();
  }
  return failpoint_internal::Evaluate(name);
}

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_

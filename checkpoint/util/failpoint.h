// Failpoints: named places in the save, commit and retention paths where a
// test can make the process fail, to prove that a crash or an error at any
// step leaves a checkpoint directory that resumes correctly.
//
// Code marks a place with
//
//   JG_RETURN_IF_ERROR(Failpoint("save.after_db_write"));
//
// which costs one relaxed atomic load while no failpoint is enabled. An
// enabled failpoint does one of four things (FailpointAction below): it kills
// the process on the spot with SIGKILL (like a power cut or kill -9: no
// destructors, no flushing of user-space buffers); it returns
// Aborted("failpoint <name>"), so that an in-process test can check the
// cleanup of the error path; it raises SIGTERM; or it holds the thread that
// reached it until a test lets it go.
//
// Failpoints are enabled in two ways:
//  - the environment, for crash tests that run a child process:
//      JOBGRAPH_FAILPOINT=save.after_db_write              (crash)
//      JOBGRAPH_FAILPOINT=save.after_rename:crash,commit.after_commit_log:error
//      JOBGRAPH_FAILPOINT=save.after_db_write:sigterm    (a signal mid-save)
//      JOBGRAPH_FAILPOINT=save.after_snapshot:hold@3     (hold the 3rd save)
//    It is read once, at the first Failpoint() or Failpoints call. A bad value
//    (an unknown name or action, a bad @<n>) is logged and then returned by
//    every Failpoint() evaluation, so a typo fails the run loudly instead of
//    silently testing nothing.
//  - the Failpoints API, for in-process tests; it overrides the environment.
//
// "@<n>" places a failpoint at one occurrence of its place, such as the save
// of one epoch: the first n - 1 evaluations of the failpoint pass, and it
// fires from the n-th on (counted from when it was enabled; default 1).
//
// Holds. A thread that reaches a failpoint enabled with `hold` writes the line
//   failpoint_hold=<name>
// to standard error (one write, so a parent watching the child's output sees
// it whole), then blocks until the failpoint is released: Failpoints::Release
// or Disable, DisableAll, ReloadFromEnvironment, or an Enable of the same name
// anew. Then it goes on as if the failpoint were not there (it returns OK).
// The rest of the process keeps running meanwhile. In-process, a test waits
// for the hold with WaitForHold, does what must happen while the thread is
// held, and releases it. From the environment nothing in the process
// releases it: the thread holds until the process is killed, which is the
// point (a parent kills the child once what it waits for has happened
// around the held thread).
//
// Every failpoint name is listed in kKnownFailpoints below, so tests can
// iterate over all of them; enabling another name is an error.
//
// Thread-safe: Failpoint() and the Failpoints functions may be called from
// any thread.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_
#define JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace jobgraph {

// The environment variable read at start-up (lazily).
inline constexpr char kFailpointEnvVar[] = "JOBGRAPH_FAILPOINT";
// What the line a hold writes to standard error starts with; the failpoint's
// name follows.
inline constexpr char kFailpointHoldLinePrefix[] = "failpoint_hold=";

struct FailpointInfo {
  absl::string_view name;
  // Where the failpoint fires and what is on disk at that moment.
  absl::string_view where;
};

// Every failpoint, in the order the save / commit / retention path reaches
// them.
inline constexpr FailpointInfo kKnownFailpoints[] = {
    // The save pipeline's write stage, before any database of the save is
    // begun: the checkpointed blobs are frozen (shared copy-on-write), the
    // commit log does not list the epoch. In an asynchronous save this runs
    // on the save thread while the job goes on and overwrites the blobs; a
    // hold here keeps the save open across the next epoch (in a synchronous
    // save it holds the job's own thread). Not reached by the mark after the
    // last epoch, which writes no database.
    {"save.after_snapshot",
     "save pipeline: blobs frozen for the save, before its databases are "
     "written"},
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
    // A flush from a local tier to the shared directory
    // (checkpoint/tier/flush.h): one node's copy is complete and durable
    // under its temporary name in the shared directory, not in place yet;
    // the epoch is committed in the local tier only.
    {"flush.after_copy",
     "flush: a database copied to the shared directory under its temporary "
     "name, before its rename"},
    // The flush: every node's copy is in place in the shared directory, the
    // shared commit log does not list the epoch yet.
    {"flush.before_commit",
     "flush: every copy in place in the shared directory, before the shared "
     "commit log lists the epoch"},
    // A database that came from another host (a partner copy, or a resume's
    // fetch; checkpoint/tier/host_tiers.h) is complete and durable under its
    // temporary name, not in place yet.
    {"transfer.before_install",
     "transfer: a database from another host written under its temporary "
     "name, before its rename"},
};

enum class FailpointAction {
  // kill(getpid(), SIGKILL): the process dies at once, as in a power cut.
  kCrash,
  // The failpoint returns absl::AbortedError("failpoint <name>").
  kError,
  // raise(SIGTERM), then carry on: places a preemption signal at an exact
  // point of a save (JobRunner handles it once the save is done).
  kSigterm,
  // Blocks the thread until the failpoint is released, then carries on
  // (see "Holds" above): a test acts while a save stands still there.
  kHold,
};

class Failpoints {
 public:
  Failpoints() = delete;

  // Enables `name` with `action` from its `first_hit`-th evaluation on (the
  // ones before pass), replacing an earlier action and restarting the count.
  // An unknown name is InvalidArgument listing the known ones; so is a
  // first_hit below 1.
  static absl::Status Enable(absl::string_view name, FailpointAction action,
                             int64_t first_hit = 1);
  // Disables `name`, releasing the threads it holds; InvalidArgument for an
  // unknown name. Disabling a failpoint that is not enabled is OK.
  static absl::Status Disable(absl::string_view name);
  // Disable, as a test that lets a held thread go says it.
  static absl::Status Release(absl::string_view name) { return Disable(name); }
  // Disables every failpoint, including those the environment enabled, and
  // forgets an environment parse error. Releases every held thread.
  static void DisableAll();

  // Waits until a thread is held at `name` (kHold) and returns true, or
  // returns false once `timeout` has passed without one: a guard against a
  // test waiting forever, not a way to decide anything.
  static bool WaitForHold(absl::string_view name, absl::Duration timeout);

  // Enables the failpoints of `spec`, in the environment variable's syntax:
  // comma-separated "<name>[:crash|:error|:sigterm|:hold][@<n>]" entries,
  // surrounding spaces ignored, the action defaulting to crash and n (the
  // first evaluation that fires) to 1. On InvalidArgument (an unknown name
  // or action, a bad n, or an empty entry) nothing is enabled.
  static absl::Status EnableFromSpec(absl::string_view spec);

  // Disables everything, then applies the environment variable as it is now
  // (unset or empty enables nothing). Returns the parse error, if any, which
  // Failpoint() then also returns. The first Failpoint() or Failpoints call
  // does this implicitly; tests that change the variable call it again.
  static absl::Status ReloadFromEnvironment();

  // The enabled failpoints as a spec ("a:crash,b:error@2"), sorted by name;
  // "@<n>" only where n is not 1.
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

// OK unless failpoint `name` is enabled (and has reached its first hit):
// then the process dies (kCrash), the result is Aborted("failpoint <name>")
// (kError), SIGTERM is raised (kSigterm), or the thread is held until the
// failpoint is released (kHold). `name` should be one of kKnownFailpoints.
inline absl::Status Failpoint(absl::string_view name) {
  if (failpoint_internal::g_state.load(std::memory_order_relaxed) == 0) {
    return absl::OkStatus();
  }
  return failpoint_internal::Evaluate(name);
}

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_FAILPOINT_H_

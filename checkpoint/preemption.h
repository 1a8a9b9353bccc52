// Preemption: the signals a batch system sends before it stops a job
// (Slurm's SIGTERM, or the SIGUSR1 of `--signal=B:USR1@120`), turned into a
// stop request for a running job, and the status a preempted run ends with.
//
// PreemptionSignals installs handlers for a list of signals while it lives
// and restores the previous handlers when destroyed. A handler is
// async-signal-safe: it only stores the signal's number and sets the stop
// request of the RunControl it serves (both lock-free atomics). The engine
// sees the request at its next point between two nets, in every thread; a
// second signal changes nothing. One PreemptionSignals may be installed in a
// process at a time; it is meant to be created and destroyed on one thread.

#ifndef JOBGRAPH_CHECKPOINT_PREEMPTION_H_
#define JOBGRAPH_CHECKPOINT_PREEMPTION_H_

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/run_control.h"

namespace jobgraph {

// The exit status of a program whose run was preempted and checkpointed, so
// a batch script can requeue it: EX_TEMPFAIL from <sysexits.h>.
inline constexpr int kPreemptedExitCode = 75;

// The signals JobRunner handles unless told otherwise.
inline const std::vector<int>& DefaultPreemptSignals() {
  static const std::vector<int> signals = {SIGTERM, SIGUSR1, SIGINT};
  return signals;
}

// "TERM,USR1,INT" (names with or without "SIG", any case, or numbers) as
// signal numbers; "" or "none" is the empty list. InvalidArgument naming the
// entry and the accepted names otherwise (SIGKILL and SIGSTOP cannot be
// caught, and fault signals such as SIGSEGV must not be: they are refused).
absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text);

// "SIGTERM" for SIGTERM; "signal 42" for a number without a name.
std::string SignalName(int signal);

class PreemptionSignals {
 public:
  // Installs handlers for `signals` that request a stop on `control`
  // (borrowed; must outlive the returned object). FailedPrecondition if
  // another PreemptionSignals is installed; the sigaction error otherwise.
  static absl::StatusOr<std::unique_ptr<PreemptionSignals>> Install(
      const std::vector<int>& signals, RunControl* control);

  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;
  // Restores the handlers that were installed before.
  ~PreemptionSignals();

  // The first signal that arrived, or 0.
  int received() const;

 private:
  PreemptionSignals() = default;

  std::vector<std::pair<int, struct sigaction>> previous_;
};

// The status of a run that stopped because it was preempted (its checkpoint
// is saved, or the reason it is not is in the message): Unavailable, since
// the same command can simply be run again, with a payload IsPreempted()
// recognises.
absl::Status PreemptedStatus(absl::string_view message);
bool IsPreempted(const absl::Status& status);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_PREEMPTION_H_

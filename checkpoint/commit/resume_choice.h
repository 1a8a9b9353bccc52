// The resume choice: which committed epoch of a checkpoint directory a run
// starts from, given what the user asked for (ResumeFrom).
//
//   scratch  nothing, whatever the directory holds;
//   epoch N  N, which must be committed for every node and verify;
//   latest   the newest committed epoch that holds every node and verifies;
//            a damaged one (DataLoss) is logged and the next older one is
//            tried; any other error ends the choice, since it proves nothing
//            about the epoch. With no commit log (or an empty one) the run
//            starts from scratch.
//
// A function; thread-compatible. A job spread over processes (MpiSession)
// passes hooks so that the log is read once and each process verifies its
// own nodes' databases (Checkpointer does).

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_RESUME_CHOICE_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_RESUME_CHOICE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/resume_from.h"

namespace jobgraph {

// The epoch to resume from in `dir`, or nullopt to start from scratch.
// Errors name the directory and the epoch: NotFound for an epoch that is not
// committed, DataLoss when it (or, for latest, every committed epoch) fails
// verification, FailedPrecondition when it lacks one of `nodes`.
// How the choice reads and verifies; null members take the defaults.
struct ResumeChoiceHooks {
  // Reads the commit log. Default: ReadCommitLogWithFallback(dir).
  std::function<absl::StatusOr<CommitLogRead>()> read_log;
  // Verifies the databases of committed `epoch` for every node: DataLoss
  // for damage. Default: VerifyCommittedEpoch(dir, db_type, nodes, epoch);
  // Checkpointer loads the epoch instead (staged, see checkpointer.h).
  std::function<absl::Status(int64_t epoch)> verify;
};

absl::StatusOr<std::optional<int64_t>> ChooseResumeEpoch(
    const std::string& dir, const std::string& db_type,
    const std::vector<std::string>& nodes, const ResumeFrom& requested,
    const ResumeChoiceHooks& hooks = {});

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_RESUME_CHOICE_H_

// Retention: which committed epochs a checkpoint directory keeps, and the
// deletion of the others.
//
// Epochs are taken out of the commit log first, then their databases are
// deleted, so a crash in between leaves only unlisted databases, which
// nothing reads (`ckpt list` shows them as uncommitted). The newest
// committed epoch is never dropped, nor, while that is a mid-epoch
// preemption checkpoint, the newest ordinary one; only databases the commit
// log lists are deleted.
//
// Functions only; thread-safe (the commit log is updated under its lock).

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_RETENTION_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_RETENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/checkpoint_options.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// Takes the epochs that `retention` drops out of `log`, among the entries
// that belong to the job of `nodes` (every entry if empty), and returns
// them; other jobs' entries stay. An epoch that a kept epoch references
// (CommittedEpoch.referenced_epoch, incremental saves) is kept with it,
// and so is every epoch of `pinned` (referenced by saves not committed
// yet): every epoch left listed stays restorable. No I/O: the Checkpointer
// runs it inside the commit's own write of the log (EpochCommit::also).
std::vector<CommittedEpoch> RetireEpochs(CommitLog& log,
                                         const RetentionOptions& retention,
                                         absl::Span<const std::string> nodes,
                                         absl::Span<const int64_t> pinned = {});

// Deletes the databases in `dir` of the `retired` entries, which the commit
// log no longer lists (RetireEpochs), in the background when `background`
// is true. Returns their epochs.
absl::StatusOr<std::vector<int64_t>> DeleteRetired(
    const std::string& dir, const std::vector<CommittedEpoch>& retired,
    bool background);

// Applies `retention` to the entries of the commit log of `dir` that belong
// to the job of `nodes` (every entry if empty; BelongsToJob), then deletes the
// databases of the dropped epochs (in the background when `background` is true;
// the caller then waits with WaitForBackgroundDeletes before exiting). Returns
// the dropped epochs.
absl::StatusOr<std::vector<int64_t>> ApplyRetention(
    const std::string& dir, const RetentionOptions& retention,
    absl::Span<const std::string> nodes, bool background);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_RETENTION_H_

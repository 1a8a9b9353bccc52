#include "checkpoint/tier/flush.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/tier/tier_log.h"
#include "checkpoint/util/failpoint.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// The job's entry of `epoch` in the commit log of `dir`, or nullopt when
// the log (or the entry) is missing.
absl::StatusOr<std::optional<CommittedEpoch>> FindEntry(
    const std::string& dir, int64_t epoch,
    const std::vector<std::string>& nodes) {
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir);
  if (absl::IsNotFound(read.status())) return std::nullopt;
  JG_RETURN_IF_ERROR(read.status());
  const CommittedEpoch* entry = FindCommittedEpoch(read->log, epoch, nodes);
  if (entry == nullptr) return std::nullopt;
  return *entry;
}

}  // namespace

absl::StatusOr<FlushBegun> BeginFlush(const FlushRequest& request) {
  const int64_t epoch = request.epoch;
  JG_ASSIGN_OR_RETURN(std::optional<CommittedEpoch> entry,
                      FindEntry(request.local, epoch, request.nodes));
  if (!entry.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("epoch ", epoch, " is not committed in the local tier ",
                     request.local, ": nothing to flush"));
  }
  if (!request.copied_by_hosts &&
      HeldNodes(*entry).size() < request.nodes.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " in ", request.local,
                     " holds the databases of "
                     "node(s) '",
                     absl::StrJoin(HeldNodes(*entry), "', '"), "' only (host ",
                     entry->host(),
                     "'s part of a job on several hosts); the job flushes "
                     "it when it runs on its hosts again"));
  }
  if (entry->referenced_epoch_size() > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "epoch ", epoch, " in ", request.local,
        " is an incremental save (it refers to other epochs' databases), "
        "which a flush does not copy"));
  }
  JG_RETURN_IF_ERROR(PrepareCheckpointDirectory(request.shared));
  // Databases that a failed flush leaves beside a log are uncommitted ones;
  // without a log they would look like a damaged checkpoint.
  JG_RETURN_IF_ERROR(CreateCommitLogIfMissing(request.shared, request.db_type));
  JG_ASSIGN_OR_RETURN(std::optional<CommittedEpoch> there,
                      FindEntry(request.shared, epoch, request.nodes));
  FlushBegun begun;
  begun.entry = *std::move(entry);
  if (there.has_value() && SameCommit(begun.entry, *there)) {
    begun.already_there = true;
    // Only the mark after the last epoch can have changed since.
    if (begun.entry.has_preemption() && !there->has_preemption()) {
      JG_RETURN_IF_ERROR(MarkEpochLoopFinished(
          request.shared, epoch, request.nodes, begun.entry.preemption()));
    }
    return begun;
  }
  // The shared log must not list the epoch while its databases are being
  // replaced, nor, once the epoch is gone from it, the job's later epochs,
  // which its commit drops anyway (they belong to a history this epoch
  // abandoned): a crash before the commit then leaves the shared log ending
  // below the epoch, never at an epoch of the abandoned history.
  const JobNodes own(request.nodes);
  JG_RETURN_IF_ERROR(
      UpdateCommitLog(request.shared, /*is_commit=*/false,
                      [&](CommitLog& log) -> absl::StatusOr<bool> {
                        return !TakeEntries(log, [&](const CommittedEpoch& e) {
                                  return e.epoch() >= epoch && own.Owns(e);
                                }).empty();
                      }));
  return begun;
}

absl::StatusOr<int64_t> CopyFlushedNodes(const FlushRequest& request,
                                         absl::Span<const std::string> nodes) {
  CopyOptions copy;
  copy.pause = request.pause;
  int64_t copied = 0;
  for (const std::string& node : nodes) {
    JG_ASSIGN_OR_RETURN(
        int64_t bytes,
        CopyCheckpointDb(request.db_type,
                         CheckpointDbPath(request.local, node, request.epoch),
                         CheckpointDbPath(request.shared, node, request.epoch),
                         copy));
    copied += bytes;
  }
  return copied;
}

absl::Status CommitFlush(const FlushRequest& request, const FlushBegun& begun) {
  JG_RETURN_IF_ERROR(Failpoint("flush.before_commit"));
  const CommittedEpoch& entry = begun.entry;
  EpochCommit commit;
  commit.epoch = request.epoch;
  commit.nodes = request.nodes;
  commit.total_bytes = entry.total_bytes();
  commit.save_micros = entry.save_micros();
  commit.committed_unix_micros = entry.committed_unix_micros();
  if (entry.has_preemption()) commit.preemption = entry.preemption();
  std::vector<CommittedEpoch> retired;
  commit.also = [&](CommitLog& log) {
    retired = RetireEpochs(log, request.retention, request.nodes);
  };
  JG_RETURN_IF_ERROR(CommitEpoch(request.shared, request.db_type, commit));
  // Committed; old databases that cannot be deleted stay unlisted.
  absl::Status deleted =
      DeleteRetired(request.shared, retired, /*background=*/false).status();
  LOG_IF(ERROR, !deleted.ok())
      << "epoch " << request.epoch << " is flushed to " << request.shared
      << ", but retention failed there: " << deleted;
  return absl::OkStatus();
}

absl::StatusOr<FlushResult> FlushEpoch(const FlushRequest& request) {
  JG_ASSIGN_OR_RETURN(FlushBegun begun, BeginFlush(request));
  FlushResult result;
  result.already_there = begun.already_there;
  if (begun.already_there) return result;
  JG_ASSIGN_OR_RETURN(result.bytes_copied,
                      CopyFlushedNodes(request, request.nodes));
  JG_RETURN_IF_ERROR(CommitFlush(request, begun));
  return result;
}

absl::StatusOr<std::vector<int64_t>> DropIgnoredLocalEpochs(
    const std::string& local, const TieredLog& merged,
    const std::vector<std::string>& nodes) {
  if (merged.ignored_local.empty()) return std::vector<int64_t>{};
  const JobNodes own(nodes);
  std::vector<CommittedEpoch> dropped;
  JG_RETURN_IF_ERROR(UpdateCommitLog(
      local, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        dropped = TakeEntries(log, [&](const CommittedEpoch& entry) {
          return own.Owns(entry) &&
                 std::find(merged.ignored_local.begin(),
                           merged.ignored_local.end(),
                           entry.epoch()) != merged.ignored_local.end();
        });
        return !dropped.empty();
      }));
  return DeleteRetired(local, dropped, /*background=*/false);
}

}  // namespace jobgraph

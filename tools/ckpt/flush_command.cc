// `ckpt flush`: copies a committed epoch of a local tier to the shared
// checkpoint directory by hand, as a job's background flush does
// (FlushEpoch, checkpoint/tier/flush.h).

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/node_lock.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/tier/flush.h"
#include "checkpoint/tier/tier_log.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/tiers.h"

namespace jobgraph {
namespace ckpt {
namespace {

// The commit log of `dir` (with fallback to its previous copy), or nullopt
// when it has none.
absl::StatusOr<std::optional<CommitLogRead>> ReadTierLog(
    const std::string& dir) {
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir);
  if (absl::IsNotFound(read.status())) return std::nullopt;
  JG_RETURN_IF_ERROR(read.status());
  return std::optional<CommitLogRead>(*std::move(read));
}

// Whether `a` and `b` name the same existing directory.
bool SameDirectory(const std::string& a, const std::string& b) {
  struct stat sa;
  struct stat sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// "node a" or "nodes a, b".
std::string NodesText(const std::vector<std::string>& nodes) {
  std::vector<std::string> printable;
  for (const std::string& node : nodes) printable.push_back(Printable(node));
  return absl::StrCat(nodes.size() == 1 ? "node " : "nodes ",
                      absl::StrJoin(printable, ", "));
}

// Takes the NodeLock of each of `nodes` in `dir` into `locks`; on failure
// says why on `err` and returns false.
bool LockNodes(const std::string& dir, const std::vector<std::string>& nodes,
               std::vector<std::unique_ptr<NodeLock>>* locks,
               std::ostream& err) {
  for (const std::string& node : nodes) {
    absl::StatusOr<std::unique_ptr<NodeLock>> lock =
        NodeLock::Acquire(dir, node);
    if (lock.ok()) {
      locks->push_back(*std::move(lock));
      continue;
    }
    err << "ckpt: " << lock.status().message();
    if (absl::IsFailedPrecondition(lock.status())) {
      // A running job flushes its own epochs, and may be writing them.
      err << " A job that runs flushes its epochs itself: run `ckpt flush` "
             "after it stops.";
    }
    err << "\n";
    return false;
  }
  return true;
}

absl::Status NotACheckpoint(const std::string& local) {
  return absl::FailedPreconditionError(absl::StrCat(
      local, " is not a checkpoint directory (no ", kCommitLogFileName, ")"));
}

// `requested` is not an epoch of the job of `nodes` in `log`, the commit
// log of `local`.
absl::Status NotCommitted(const std::string& local, const CommitLog& log,
                          const std::vector<std::string>& nodes,
                          int64_t requested) {
  return absl::NotFoundError(absl::StrCat(
      "epoch ", requested, " is not committed in ", local,
      " (committed epochs: ",
      nodes.empty() ? "none" : CommittedEpochList(log, nodes), ")"));
}

// What `flush` does, decided while it holds the nodes' locks.
struct FlushChoice {
  // The epoch to flush; nullopt when there is nothing to flush, and
  // `nothing` says why.
  std::optional<int64_t> epoch;
  std::string nothing;
  // The shared log lists the epoch as the same commit, but without the mark
  // of a run preempted after its last epoch that the local entry has.
  bool carries_mark = false;
};

// The epoch to flush from `local` to `shared`, by their logs read now:
// `requested`, or else the newest epoch of the merged view that the local
// tier holds. An error (for exit code 2) when `requested` does not continue
// the shared history: committing it there would drop the shared log's later
// epochs or replace what it continues.
absl::StatusOr<FlushChoice> ChooseEpoch(const std::string& local,
                                        const std::string& shared,
                                        const std::vector<std::string>& nodes,
                                        std::optional<int64_t> requested) {
  TierLogRead local_tier{local, std::nullopt};
  TierLogRead shared_tier{shared, std::nullopt};
  JG_ASSIGN_OR_RETURN(local_tier.read, ReadTierLog(local));
  JG_ASSIGN_OR_RETURN(shared_tier.read, ReadTierLog(shared));
  if (!local_tier.read.has_value()) return NotACheckpoint(local);
  const CommitLog& local_log = local_tier.read->log;
  const LocalTierView view = ViewLocalTier(local_tier, shared_tier, nodes);
  FlushChoice choice;
  if (requested.has_value()) {
    if (FindCommittedEpoch(local_log, *requested, nodes) == nullptr) {
      return NotCommitted(local, local_log, nodes, *requested);
    }
    if (view.host_parts.count(*requested) > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "epoch ", *requested, " of ", local,
          " is one host's part of a job on several hosts (the other nodes' "
          "databases are on other hosts): flushing it alone would commit an "
          "incomplete epoch; the job's own flush copies it; nothing is "
          "flushed"));
    }
    if (!view.Holds(*requested)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "epoch ", *requested, " of ", local,
          " does not continue the history of ", shared, " (",
          view.IgnoredBecause(*requested)
              .value_or("a resume does not count it"),
          "): flushing it would rewrite that history; nothing is flushed"));
    }
    // Committing an older epoch in the shared log would unlist its newer
    // ones (the commit of an epoch drops the job's later entries).
    const auto shared_newest = std::find_if(
        view.merged.copies.rbegin(), view.merged.copies.rend(),
        [&](const auto& copies) {
          return std::find(copies.second.begin(), copies.second.end(),
                           shared) != copies.second.end();
        });
    if (shared_newest != view.merged.copies.rend() &&
        shared_newest->first > *requested &&
        std::find(view.merged.copies.at(*requested).begin(),
                  view.merged.copies.at(*requested).end(),
                  shared) == view.merged.copies.at(*requested).end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "epoch ", *requested, " of ", local,
          " is older than the newest epoch of ", shared, " (",
          shared_newest->first,
          "): committing it there would take the newer epochs out of its "
          "commit log; nothing is flushed"));
    }
    choice.epoch = requested;
  } else {
    for (auto it = view.merged.copies.rbegin(); it != view.merged.copies.rend();
         ++it) {
      if (view.Holds(it->first)) {
        choice.epoch = it->first;
        break;
      }
    }
    if (!choice.epoch.has_value()) {
      choice.nothing = absl::StrCat("nothing to flush from ", local, ": ",
                                    IgnoredText(view));
      return choice;
    }
  }
  const CommittedEpoch* mine =
      FindCommittedEpoch(local_log, *choice.epoch, nodes);
  const CommittedEpoch* there =
      shared_tier.read.has_value()
          ? FindCommittedEpoch(shared_tier.read->log, *choice.epoch, nodes)
          : nullptr;
  choice.carries_mark = mine != nullptr && there != nullptr &&
                        SameCommit(*mine, *there) && mine->has_preemption() &&
                        !there->has_preemption();
  return choice;
}

}  // namespace

int Flush(const FlushOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& local = options.local;
  const std::string& shared = options.shared;
  absl::StatusOr<bool> local_exists = PathExists(local);
  if (!local_exists.ok()) {
    err << "ckpt: " << local_exists.status().message() << "\n";
    return kExitUsage;
  }
  if (!*local_exists) {
    err << "ckpt: " << local << " does not exist\n";
    return kExitUsage;
  }
  absl::StatusOr<std::optional<CommitLogRead>> local_log = ReadTierLog(local);
  if (!local_log.ok()) {
    err << "ckpt: " << local_log.status().message();
    if (absl::IsDataLoss(local_log.status())) {
      err << "; `ckpt recover " << local
          << "` rebuilds it from the databases that verify";
    }
    err << "\n";
    return kExitUsage;
  }
  if (!local_log->has_value()) {
    err << "ckpt: " << NotACheckpoint(local).message() << "\n";
    return kExitUsage;
  }
  const CommitLogRead& local_read = **local_log;
  if (!local_read.damage.ok()) {
    err << "ckpt: " << local_read.damage.message()
        << "; using its previous copy\n";
  }

  // The job whose epochs the local tier holds.
  const std::vector<std::string> nodes = LocalTierJob(local_read.log);
  if (options.epoch.has_value() &&
      (nodes.empty() ||
       FindCommittedEpoch(local_read.log, *options.epoch, nodes) == nullptr)) {
    err << "ckpt: "
        << NotCommitted(local, local_read.log, nodes, *options.epoch).message()
        << "\n";
    return kExitUsage;
  }
  if (nodes.empty()) {
    out << "nothing to flush: " << local << " lists no committed epoch\n";
    return kExitOk;
  }

  if (SameDirectory(local, shared)) {
    err << "ckpt: " << local << " and " << shared
        << " are the same directory; give the local tier, then the shared "
           "directory\n";
    return kExitUsage;
  }

  // No job may write either directory meanwhile. A shared directory that
  // does not exist yet is created (and locked) only once there is
  // something to flush.
  std::vector<std::unique_ptr<NodeLock>> locks;
  if (!LockNodes(local, nodes, &locks, err)) return kExitUsage;
  absl::StatusOr<bool> shared_exists = PathExists(shared);
  if (!shared_exists.ok()) {
    err << "ckpt: " << shared_exists.status().message() << "\n";
    return kExitUsage;
  }
  if (*shared_exists && !LockNodes(shared, nodes, &locks, err)) {
    return kExitUsage;
  }
  absl::StatusOr<FlushChoice> choice =
      ChooseEpoch(local, shared, nodes, options.epoch);
  if (choice.ok() && choice->epoch.has_value() && !*shared_exists) {
    absl::Status prepared = PrepareCheckpointDirectory(shared);
    if (!prepared.ok()) {
      err << "ckpt: " << prepared.message() << "\n";
      return kExitUsage;
    }
    if (!LockNodes(shared, nodes, &locks, err)) return kExitUsage;
    // Decided again: a job may have written the directory meanwhile.
    choice = ChooseEpoch(local, shared, nodes, options.epoch);
  }
  if (!choice.ok()) {
    err << "ckpt: " << choice.status().message() << "\n";
    return kExitUsage;
  }
  if (!choice->epoch.has_value()) {
    out << choice->nothing << "\n";
    return kExitOk;
  }

  const int64_t epoch = *choice->epoch;
  FlushRequest request;
  request.local = local;
  request.shared = shared;
  request.db_type = options.db_type;
  if (request.db_type.empty()) {
    request.db_type = local_read.log.db_type().empty()
                          ? std::string(kDefaultDbType)
                          : local_read.log.db_type();
  }
  request.nodes = nodes;
  request.epoch = epoch;
  // No retention: the shared directory keeps everything.
  absl::StatusOr<FlushResult> flushed = FlushEpoch(request);
  if (absl::IsDataLoss(flushed.status())) {
    err << "ckpt: " << flushed.status().message() << "; epoch " << epoch
        << " is not flushed (the commit log of " << shared
        << " does not list it); `ckpt verify " << local
        << "` checks the local tier\n";
    return kExitProblem;
  }
  if (!flushed.ok()) {
    err << "ckpt: " << flushed.status().message() << "\n";
    return kExitUsage;
  }
  if (flushed->already_there) {
    out << "epoch " << epoch << " is already in " << shared;
    if (choice->carries_mark) {
      out << "; copied its mark of a run preempted after the last epoch there";
    }
    out << "\n";
    return kExitOk;
  }
  out << "flushed epoch " << epoch << " from " << local << " to " << shared
      << ": " << NodesText(nodes) << "; " << flushed->bytes_copied
      << " bytes copied\n";
  return kExitOk;
}

}  // namespace ckpt
}  // namespace jobgraph

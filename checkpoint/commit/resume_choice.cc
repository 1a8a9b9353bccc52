#include "checkpoint/commit/resume_choice.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

absl::Status CheckNodes(const std::string& dir, const CommittedEpoch& epoch,
                        const std::vector<std::string>& nodes) {
  std::set<std::string> have(epoch.node().begin(), epoch.node().end());
  for (const std::string& node : nodes) {
    if (have.count(node) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "epoch ", epoch.epoch(), " in ", dir, " has no database for node '",
          node, "' (it holds: ", absl::StrJoin(epoch.node(), ", "),
          "); was it written by a job with other nodes?"));
    }
  }
  return absl::OkStatus();
}

// The database directories of `nodes` in `dir` ("trainer_0.3", ...), sorted.
absl::StatusOr<std::vector<std::string>> JobDatabases(
    const std::string& dir, const std::vector<std::string>& nodes) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(dir));
  if (!exists) return std::vector<std::string>();
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
  std::vector<std::string> found;
  for (const std::string& name : names) {
    std::optional<CheckpointDbName> db = ParseCheckpointDbName(name);
    if (db.has_value() &&
        std::find(nodes.begin(), nodes.end(), db->node) != nodes.end()) {
      found.push_back(name);
    }
  }
  return found;
}

// No commit log: nothing is committed, unless databases of the job are
// there, which only a deleted commit log explains (one is written before the
// first database).
absl::Status CheckNothingCommitted(const std::string& dir,
                                   const std::vector<std::string>& nodes,
                                   absl::string_view what) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> databases,
                      JobDatabases(dir, nodes));
  if (databases.empty()) return absl::OkStatus();
  constexpr size_t kShown = 4;
  const size_t shown = std::min(databases.size(), kShown);
  return absl::DataLossError(absl::StrCat(
      what, ": ", dir, " holds ", databases.size(),
      " database(s) of this job (",
      absl::StrJoin(databases.begin(), databases.begin() + shown, ", "),
      databases.size() > shown ? ", ..." : "", ") but no commit log ",
      JoinPath(dir, kCommitLogFileName),
      ", so which epochs are complete cannot be known. Rebuild the log from "
      "the databases that verify with `ckpt recover ",
      dir,
      "`, or start from scratch on purpose: run without "
      "--resume_from_epoch, or with another --checkpoint_dir."));
}

}  // namespace

absl::StatusOr<std::optional<int64_t>> ChooseResumeEpoch(
    const std::string& dir, const std::string& db_type,
    const std::vector<std::string>& nodes, const ResumeFrom& requested,
    const ResumeChoiceHooks& hooks) {
  if (requested.kind == ResumeFrom::Kind::kScratch) return std::nullopt;
  auto verify = [&](int64_t epoch) {
    return hooks.verify ? hooks.verify(epoch)
                        : VerifyCommittedEpoch(dir, db_type, nodes, epoch);
  };
  const std::string what =
      requested.kind == ResumeFrom::Kind::kLatest
          ? std::string("resume_from_epoch=latest")
          : absl::StrCat("cannot resume from epoch ", requested.epoch);
  absl::StatusOr<CommitLogRead> read =
      hooks.read_log ? hooks.read_log() : ReadCommitLogWithFallback(dir);
  if (absl::IsNotFound(read.status())) {
    JG_RETURN_IF_ERROR(CheckNothingCommitted(dir, nodes, what));
    if (requested.kind == ResumeFrom::Kind::kLatest) {
      LOG(WARNING) << "resume_from_epoch=latest: no committed checkpoint in "
                   << dir << "; starting from scratch";
      return std::nullopt;
    }
    return absl::NotFoundError(absl::StrCat(what, ": ", dir,
                                            " has no committed checkpoint (no ",
                                            kCommitLogFileName, ")"));
  }
  JG_RETURN_IF_ERROR(read.status());
  if (!read->damage.ok()) {
    // The previous copy lists at most one commit less: what it lists is
    // still proven complete.
    LOG(ERROR) << what << ": " << read->damage.message()
               << "; using its previous copy, which lists epochs "
               << CommittedEpochList(read->log, nodes);
  }
  const CommitLog* log = &read->log;

  if (requested.kind == ResumeFrom::Kind::kEpoch) {
    const CommittedEpoch* epoch =
        FindCommittedEpoch(*log, requested.epoch, nodes);
    if (epoch == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "cannot resume from epoch ", requested.epoch,
          ": it is not committed in ", dir,
          " (committed epochs: ", CommittedEpochList(*log, nodes), ")"));
    }
    JG_RETURN_IF_ERROR(CheckNodes(dir, *epoch, nodes));
    absl::Status verified = verify(requested.epoch);
    if (!verified.ok()) {
      return absl::Status(
          verified.code(),
          absl::StrCat("cannot resume from epoch ", requested.epoch, ": ",
                       verified.message()));
    }
    return requested.epoch;
  }

  std::vector<std::string> rejected;
  const JobNodes own(nodes);
  for (int i = log->epoch_size() - 1; i >= 0; --i) {
    const CommittedEpoch& epoch = log->epoch(i);
    // Another job's entry in a shared directory.
    if (!own.Owns(epoch)) continue;
    absl::Status s = CheckNodes(dir, epoch, nodes);
    if (s.ok()) {
      s = verify(epoch.epoch());
      // Only damage proves an epoch unusable. Anything else (a stop
      // request, memory, an I/O error) could make every epoch look bad, and
      // resuming an older one would let the next saves replace the newer.
      if (!s.ok() && !absl::IsDataLoss(s)) {
        return absl::Status(
            s.code(), absl::StrCat(what, ": epoch ", epoch.epoch(), " of ", dir,
                                   ": ", s.message()));
      }
    }
    if (s.ok()) {
      if (!rejected.empty()) {
        LOG(WARNING) << "resume_from_epoch=latest: using epoch "
                     << epoch.epoch() << " of " << dir;
      }
      return epoch.epoch();
    }
    LOG(ERROR) << "resume_from_epoch=latest: skipping committed epoch "
               << epoch.epoch() << ": " << s.message();
    rejected.push_back(
        absl::StrCat("epoch ", epoch.epoch(), ": ", s.message()));
  }
  if (rejected.empty()) {
    LOG(WARNING) << "resume_from_epoch=latest: no committed epoch in " << dir
                 << "; starting from scratch";
    return std::nullopt;
  }
  return absl::DataLossError(absl::StrCat(
      "resume_from_epoch=latest: no committed epoch in ", dir,
      " passes verification (", absl::StrJoin(rejected, "; "),
      "). Inspect it with `ckpt verify`, or start from scratch in another "
      "directory."));
}

}  // namespace jobgraph

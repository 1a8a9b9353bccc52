#include "checkpoint/resume_choice.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/commit_log.h"
#include "checkpoint/verify.h"
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

// Checks one committed epoch: it holds every node and each database verifies.
absl::Status CheckEpoch(const std::string& dir, const std::string& db_type,
                        const std::vector<std::string>& nodes,
                        const CommittedEpoch& epoch) {
  JG_RETURN_IF_ERROR(CheckNodes(dir, epoch, nodes));
  return VerifyCommittedEpoch(dir, db_type, nodes, epoch.epoch());
}

}  // namespace

absl::StatusOr<std::optional<int64_t>> ChooseResumeEpoch(
    const std::string& dir, const std::string& db_type,
    const std::vector<std::string>& nodes, const ResumeFrom& requested) {
  if (requested.kind == ResumeFrom::Kind::kScratch) return std::nullopt;
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (absl::IsNotFound(log.status())) {
    if (requested.kind == ResumeFrom::Kind::kLatest) {
      LOG(WARNING) << "resume_from_epoch=latest: no committed checkpoint in "
                   << dir << "; starting from scratch";
      return std::nullopt;
    }
    return absl::NotFoundError(absl::StrCat(
        "cannot resume from epoch ", requested.epoch, ": ", dir,
        " has no committed checkpoint (no ", kCommitLogFileName, ")"));
  }
  JG_RETURN_IF_ERROR(log.status());

  if (requested.kind == ResumeFrom::Kind::kEpoch) {
    const CommittedEpoch* epoch = FindCommittedEpoch(*log, requested.epoch);
    if (epoch == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("cannot resume from epoch ", requested.epoch,
                       ": it is not committed in ", dir,
                       " (committed epochs: ", CommittedEpochList(*log), ")"));
    }
    JG_RETURN_IF_ERROR(CheckNodes(dir, *epoch, nodes));
    absl::Status verified =
        VerifyCommittedEpoch(dir, db_type, nodes, requested.epoch);
    if (!verified.ok()) {
      return absl::Status(
          verified.code(),
          absl::StrCat("cannot resume from epoch ", requested.epoch, ": ",
                       verified.message()));
    }
    return requested.epoch;
  }

  std::vector<std::string> rejected;
  for (int i = log->epoch_size() - 1; i >= 0; --i) {
    const CommittedEpoch& epoch = log->epoch(i);
    absl::Status s = CheckEpoch(dir, db_type, nodes, epoch);
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

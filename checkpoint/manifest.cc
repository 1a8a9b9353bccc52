#include "checkpoint/manifest.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/background_delete.h"
#include "checkpoint/db_manifest.h"
#include "checkpoint/failpoint.h"
#include "checkpoint/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {

absl::StatusOr<ResumeFrom> ResumeFrom::Parse(absl::string_view text) {
  ResumeFrom result;
  if (text.empty()) return result;
  if (text == "latest") {
    result.kind = Kind::kLatest;
    return result;
  }
  int64_t epoch = 0;
  if (!absl::SimpleAtoi(text, &epoch) || epoch < 0 ||
      !std::all_of(text.begin(), text.end(), absl::ascii_isdigit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume_from_epoch '", text,
        "' is not valid: give a non-negative epoch number or 'latest'"));
  }
  result.kind = Kind::kEpoch;
  result.epoch = epoch;
  return result;
}

std::string ResumeFrom::ToString() const {
  switch (kind) {
    case Kind::kScratch:
      return "scratch";
    case Kind::kLatest:
      return "latest";
    case Kind::kEpoch:
      return absl::StrCat(epoch);
  }
  return "";
}

std::string CheckpointDbPath(absl::string_view dir, absl::string_view node,
                             int64_t epoch) {
  return JoinPath(dir, absl::StrCat(node, ".", epoch));
}

absl::Status ValidateNodeName(absl::string_view node) {
  const bool valid_chars = std::all_of(node.begin(), node.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.';
  });
  if (node.empty() || node.size() > 200 || node[0] == '.' || !valid_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node name '", node,
        "' cannot name a checkpoint database: use 1 to 200 letters, digits, "
        "'_', '-' or '.', not starting with '.' (names become file names in "
        "the checkpoint directory)"));
  }
  return absl::OkStatus();
}

int64_t CheckpointStats::total_bytes() const {
  int64_t total = 0;
  for (const auto& [path, db] : dbs) total += db.bytes;
  return total;
}

absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir) {
  const std::string path = JoinPath(dir, kManifestFileName);
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
  if (!exists) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint manifest at ", path));
  }
  JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  CheckpointManifest manifest;
  if (!manifest.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest ", path,
                     " cannot be parsed; the file is damaged"));
  }
  // An empty or zeroed file parses as a valid empty message; every manifest
  // jobgraph writes has a version, so a missing one means damage.
  if (manifest.format_version() < 1) {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest ", path,
                     " has no format version; the file is damaged"));
  }
  if (manifest.format_version() > kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint manifest ", path, " has format version ",
                     manifest.format_version(), "; this build reads up to ",
                     kCheckpointFormatVersion, ". Use a newer jobgraph."));
  }
  return manifest;
}

namespace {

// Writes the manifest atomically (file_util's WriteFileAtomically). The
// commit failpoints fire only when `commit` is set, so retention's rewrite
// of the manifest does not trigger them.
absl::Status WriteManifestFile(const std::string& dir,
                               const CheckpointManifest& manifest,
                               bool commit) {
  std::string bytes;
  if (!manifest.SerializeToString(&bytes)) {
    return absl::InternalError("cannot serialize the checkpoint manifest");
  }
  if (commit) JG_RETURN_IF_ERROR(Failpoint("commit.before_manifest"));
  JG_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(dir, kManifestFileName), bytes, [commit]() -> absl::Status {
        if (!commit) return absl::OkStatus();
        return Failpoint("commit.after_manifest_tmp");
      }));
  if (commit) JG_RETURN_IF_ERROR(Failpoint("commit.after_manifest"));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteManifest(const std::string& dir,
                           const CheckpointManifest& manifest) {
  return WriteManifestFile(dir, manifest, /*commit=*/true);
}

absl::StatusOr<CheckpointDbManifest> VerifyCheckpointDb(
    const std::string& db_type, const std::string& path,
    std::optional<std::string> node, std::optional<int64_t> epoch) {
  JG_ASSIGN_OR_RETURN(CheckpointDbManifest manifest, VerifyDbAt(db_type, path));
  if (node.has_value() && manifest.node() != *node) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " belongs to node '", manifest.node(),
                     "', not '", *node, "'"));
  }
  if (epoch.has_value() && manifest.epoch() != *epoch) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path,
                                            " holds epoch ", manifest.epoch(),
                                            ", not ", *epoch));
  }
  return manifest;
}

ManifestHandler::ManifestHandler(RetentionOptions retention)
    : retention_(retention) {}

absl::Status ManifestHandler::SetParams(const std::string& dir,
                                        const std::string& db_type,
                                        const std::vector<std::string>& nodes) {
  for (const std::string& node : nodes)
    JG_RETURN_IF_ERROR(ValidateNodeName(node));
  dir_ = dir;
  db_type_ = db_type;
  nodes_ = nodes;
  return absl::OkStatus();
}

absl::Status ManifestHandler::VerifyEpoch(int64_t epoch) const {
  for (const std::string& node : nodes_) {
    const std::string path = CheckpointDbPath(dir_, node, epoch);
    absl::StatusOr<CheckpointDbManifest> db =
        VerifyCheckpointDb(db_type_, path, node, epoch);
    // The manifest says this database was committed, so anything missing
    // from it (the directory, CURRENT, a table file) is data loss.
    if (absl::IsNotFound(db.status())) {
      return absl::DataLossError(absl::StrCat(
          "committed epoch ", epoch, " is damaged: ", db.status().message()));
    }
    if (!db.ok()) return db.status();
  }
  return absl::OkStatus();
}

namespace {

std::string EpochList(const CheckpointManifest& manifest) {
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : manifest.epoch()) epochs.push_back(e.epoch());
  return epochs.empty() ? "none" : absl::StrJoin(epochs, ", ");
}

const CommittedEpoch* FindEpoch(const CheckpointManifest& manifest,
                                int64_t epoch) {
  for (const CommittedEpoch& e : manifest.epoch()) {
    if (e.epoch() == epoch) return &e;
  }
  return nullptr;
}

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

}  // namespace

absl::StatusOr<std::optional<int64_t>> ManifestHandler::LastEpoch(
    const ResumeFrom& requested) {
  if (requested.kind == ResumeFrom::Kind::kScratch) return std::nullopt;
  absl::StatusOr<CheckpointManifest> manifest = ReadManifest(dir_);
  if (absl::IsNotFound(manifest.status())) {
    if (requested.kind == ResumeFrom::Kind::kLatest) {
      LOG(WARNING) << "resume_from_epoch=latest: no committed checkpoint in "
                   << dir_ << "; starting from scratch";
      return std::nullopt;
    }
    return absl::NotFoundError(absl::StrCat(
        "cannot resume from epoch ", requested.epoch, ": ", dir_,
        " has no committed checkpoint (no ", kManifestFileName, ")"));
  }
  JG_RETURN_IF_ERROR(manifest.status());

  if (requested.kind == ResumeFrom::Kind::kEpoch) {
    const CommittedEpoch* epoch = FindEpoch(*manifest, requested.epoch);
    if (epoch == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("cannot resume from epoch ", requested.epoch,
                       ": it is not committed in ", dir_,
                       " (committed epochs: ", EpochList(*manifest), ")"));
    }
    JG_RETURN_IF_ERROR(CheckNodes(dir_, *epoch, nodes_));
    absl::Status verified = VerifyEpoch(requested.epoch);
    if (!verified.ok()) {
      return absl::Status(
          verified.code(),
          absl::StrCat("cannot resume from epoch ", requested.epoch, ": ",
                       verified.message()));
    }
    return requested.epoch;
  }

  std::vector<std::string> rejected;
  for (int i = manifest->epoch_size() - 1; i >= 0; --i) {
    const CommittedEpoch& epoch = manifest->epoch(i);
    absl::Status s = CheckNodes(dir_, epoch, nodes_);
    if (s.ok()) s = VerifyEpoch(epoch.epoch());
    if (s.ok()) {
      if (!rejected.empty()) {
        LOG(WARNING) << "resume_from_epoch=latest: using epoch "
                     << epoch.epoch() << " of " << dir_;
      }
      return epoch.epoch();
    }
    LOG(ERROR) << "resume_from_epoch=latest: skipping committed epoch "
               << epoch.epoch() << ": " << s.message();
    rejected.push_back(
        absl::StrCat("epoch ", epoch.epoch(), ": ", s.message()));
  }
  if (rejected.empty()) {
    LOG(WARNING) << "resume_from_epoch=latest: no committed epoch in " << dir_
                 << "; starting from scratch";
    return std::nullopt;
  }
  return absl::DataLossError(absl::StrCat(
      "resume_from_epoch=latest: no committed epoch in ", dir_,
      " passes verification (", absl::StrJoin(rejected, "; "),
      "). Inspect it with `ckpt verify`, or start from scratch in another "
      "directory."));
}

namespace {

// mkdir -p: the checkpoint directory and any missing parents.
absl::Status CreateDirs(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(dir));
  if (exists) return absl::OkStatus();
  const std::string parent = ParentDir(dir);
  if (!parent.empty() && parent != dir) JG_RETURN_IF_ERROR(CreateDirs(parent));
  absl::Status s = CreateDir(dir);
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

}  // namespace

bool ManifestHandler::CpAccessible(std::optional<int64_t> epoch) {
  absl::Status s = CreateDirs(dir_);
  if (!s.ok()) {
    LOG(ERROR) << "checkpoint directory " << dir_
               << " cannot be created: " << s.message();
    return false;
  }
  if (::access(dir_.c_str(), W_OK | X_OK) != 0) {
    LOG(ERROR) << "checkpoint directory " << dir_
               << " is not writable: " << std::strerror(errno);
    return false;
  }
  return true;
}

absl::Status ManifestHandler::Write(int64_t epoch,
                                    const CheckpointStats& stats) {
  CheckpointManifest manifest;
  absl::StatusOr<CheckpointManifest> existing = ReadManifest(dir_);
  if (existing.ok()) {
    manifest = *std::move(existing);
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  manifest.set_format_version(kCheckpointFormatVersion);
  manifest.set_db_type(db_type_);
  // Every node's database is in place: the caller commits only after the
  // save of every node succeeded, and each save renames its database into
  // place durably before it returns.
  CommittedEpoch entry;
  entry.set_epoch(epoch);
  for (const std::string& node : nodes_) entry.add_node(node);
  entry.set_total_bytes(stats.total_bytes());
  entry.set_committed_unix_micros(absl::ToUnixMicros(absl::Now()));
  entry.set_save_micros(stats.wall_micros);
  // Keep epochs sorted; a re-saved epoch replaces its old entry. Epochs after
  // it belong to the run that was abandoned when the job resumed earlier, and
  // are no longer part of this job's history, so they are dropped.
  std::vector<CommittedEpoch> kept;
  for (const CommittedEpoch& e : manifest.epoch()) {
    if (e.epoch() < epoch) kept.push_back(e);
  }
  kept.push_back(entry);
  manifest.clear_epoch();
  for (CommittedEpoch& e : kept) *manifest.add_epoch() = std::move(e);
  JG_RETURN_IF_ERROR(WriteManifest(dir_, manifest));
  // The epoch is committed now; a failure to drop old epochs must not turn
  // it into a failed save. It is logged, and the next commit tries again.
  absl::Status retention = ApplyRetention();
  if (!retention.ok()) {
    LOG(ERROR) << "epoch " << epoch << " is committed in " << dir_
               << ", but retention failed: " << retention;
  }
  return absl::OkStatus();
}

void ManifestHandler::Report(absl::string_view action,
                             const CheckpointStats& stats) {
  VLOG(1) << action << ": " << stats.dbs.size() << " databases, "
          << stats.total_bytes() << " bytes in " << stats.wall_micros << " us";
}

absl::Status ManifestHandler::ApplyRetention() {
  if (retention_.keep_last <= 0) return absl::OkStatus();
  return jobgraph::ApplyRetention(dir_, retention_, /*background=*/true)
      .status();
}

absl::StatusOr<std::vector<int64_t>> ApplyRetention(
    const std::string& dir, const RetentionOptions& retention,
    bool background) {
  std::vector<int64_t> dropped;
  if (retention.keep_last <= 0) return dropped;
  JG_ASSIGN_OR_RETURN(CheckpointManifest manifest, ReadManifest(dir));
  const int n = manifest.epoch_size();
  std::vector<CommittedEpoch> kept;
  std::vector<CommittedEpoch> removed;
  for (int i = 0; i < n; ++i) {
    const CommittedEpoch& e = manifest.epoch(i);
    const bool newest = i == n - 1;
    const bool recent = i >= n - retention.keep_last;
    const bool milestone =
        retention.keep_every > 0 && e.epoch() % retention.keep_every == 0;
    (newest || recent || milestone ? kept : removed).push_back(e);
  }
  if (removed.empty()) return dropped;
  manifest.clear_epoch();
  for (CommittedEpoch& e : kept) *manifest.add_epoch() = std::move(e);
  // Uncommit first: a crash from here on leaves only unlisted directories,
  // which nothing reads; `ckpt list` shows them as uncommitted.
  JG_RETURN_IF_ERROR(WriteManifestFile(dir, manifest, /*commit=*/false));
  JG_RETURN_IF_ERROR(Failpoint("retention.after_manifest"));
  bool first = true;
  for (const CommittedEpoch& e : removed) {
    for (const std::string& node : e.node()) {
      const std::string path = CheckpointDbPath(dir, node, e.epoch());
      JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
      if (!exists) continue;
      if (background) {
        JG_RETURN_IF_ERROR(DeleteInBackground(path));
      } else {
        JG_RETURN_IF_ERROR(RemoveRecursively(path));
      }
      if (first) {
        first = false;
        JG_RETURN_IF_ERROR(Failpoint("retention.mid_delete"));
      }
    }
    dropped.push_back(e.epoch());
  }
  return dropped;
}

}  // namespace jobgraph

#include "checkpoint/commit_log.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/failpoint.h"
#include "checkpoint/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<CommitLog> ReadCommitLog(const std::string& dir) {
  const std::string path = JoinPath(dir, kCommitLogFileName);
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("no commit log at ", path));
  }
  JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  CommitLog log;
  if (!log.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(
        "commit log ", path, " cannot be parsed; the file is damaged"));
  }
  // An empty or zeroed file parses as a valid empty message; every commit
  // log jobgraph writes has a version, so a missing one means damage.
  if (log.format_version() < 1) {
    return absl::DataLossError(absl::StrCat(
        "commit log ", path, " has no format version; the file is damaged"));
  }
  if (log.format_version() > kCommitLogFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("commit log ", path, " has format version ",
                     log.format_version(), "; this build reads up to ",
                     kCommitLogFormatVersion, ". Use a newer jobgraph."));
  }
  return log;
}

absl::Status WriteCommitLog(const std::string& dir, const CommitLog& log,
                            bool is_commit) {
  std::string bytes;
  if (!log.SerializeToString(&bytes)) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the commit log of ", dir));
  }
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.before_manifest"));
  JG_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(dir, kCommitLogFileName), bytes, [is_commit]() -> absl::Status {
        if (!is_commit) return absl::OkStatus();
        return Failpoint("commit.after_manifest_tmp");
      }));
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.after_manifest"));
  return absl::OkStatus();
}

absl::Status CommitEpoch(const std::string& dir, const std::string& db_type,
                         const EpochCommit& commit) {
  CommitLog log;
  absl::StatusOr<CommitLog> existing = ReadCommitLog(dir);
  if (existing.ok()) {
    log = *std::move(existing);
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  log.set_format_version(kCommitLogFormatVersion);
  log.set_db_type(db_type);
  CommittedEpoch entry;
  entry.set_epoch(commit.epoch);
  for (const std::string& node : commit.nodes) entry.add_node(node);
  entry.set_total_bytes(commit.total_bytes);
  entry.set_committed_unix_micros(absl::ToUnixMicros(absl::Now()));
  entry.set_save_micros(commit.save_micros);
  std::vector<CommittedEpoch> kept;
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.epoch() < commit.epoch) kept.push_back(e);
  }
  kept.push_back(std::move(entry));
  log.clear_epoch();
  for (CommittedEpoch& e : kept) *log.add_epoch() = std::move(e);
  return WriteCommitLog(dir, log, /*is_commit=*/true);
}

const CommittedEpoch* FindCommittedEpoch(const CommitLog& log, int64_t epoch) {
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.epoch() == epoch) return &e;
  }
  return nullptr;
}

std::string CommittedEpochList(const CommitLog& log) {
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : log.epoch()) epochs.push_back(e.epoch());
  return epochs.empty() ? "none" : absl::StrJoin(epochs, ", ");
}

}  // namespace jobgraph

// The commit log: the file "<dir>/MANIFEST.jobgraph" (a CommitLog
// proto, see checkpoint/FORMAT.md) that says which epochs of a checkpoint
// directory are complete.
//
// An epoch is committed exactly when the commit log lists it. Every node's
// database is moved into place under its final name before the log is
// touched, and the log itself is replaced atomically (temp file, fsync,
// rename, fsync of the directory), so a crash at any instant leaves either
// the old or the new list of committed epochs, and every epoch listed has all
// of its databases in place.
//
// Functions only; each call reads or replaces the file. Callers serialise
// writers of one directory (one JobRunner per directory).

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_LOG_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The version written into commit logs; readers reject newer ones.
inline constexpr int kCommitLogFormatVersion = 1;

// The commit log of `dir`: NotFound if the directory has none yet, DataLoss
// if it cannot be parsed or has no version, FailedPrecondition for a newer
// format. Messages name the file.
absl::StatusOr<CommitLog> ReadCommitLog(const std::string& dir);

// Replaces the commit log of `dir` atomically. The commit failpoints
// ("commit.before_manifest", "commit.after_manifest_tmp",
// "commit.after_manifest") fire only when `is_commit` is set, so that
// retention's rewrite of the log does not trigger them.
absl::Status WriteCommitLog(const std::string& dir, const CommitLog& log,
                            bool is_commit);

// What a commit records about one epoch.
struct EpochCommit {
  int64_t epoch = 0;
  // Every node whose database makes up the epoch.
  std::vector<std::string> nodes;
  int64_t total_bytes = 0;
  // Wall time of the save, from its start to the commit.
  int64_t save_micros = 0;
};

// Commits `commit.epoch` in the commit log of `dir` (creating the log if it
// is missing). A re-saved epoch replaces its entry; entries of later epochs
// are dropped, because they belong to a run that was abandoned when the job
// resumed from an earlier epoch. Call only after every node's database of
// the epoch is durable under its final name.
absl::Status CommitEpoch(const std::string& dir, const std::string& db_type,
                         const EpochCommit& commit);

// The entry of `epoch`, or null.
const CommittedEpoch* FindCommittedEpoch(const CommitLog& log, int64_t epoch);

// "0, 1, 2" or "none", for messages.
std::string CommittedEpochList(const CommitLog& log);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_LOG_H_

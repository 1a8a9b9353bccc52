#include "checkpoint/commit_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checksummed.h"
#include "checkpoint/failpoint.h"
#include "checkpoint/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

std::string LogPath(const std::string& dir) {
  return JoinPath(dir, kCommitLogFileName);
}

std::string PreviousPath(const std::string& dir) {
  return absl::StrCat(LogPath(dir), kPreviousCommitLogSuffix);
}

// The commit log in the file at `path`: NotFound if absent.
absl::StatusOr<CommitLog> ReadLogFile(const std::string& path) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("no commit log at ", path));
  }
  JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  JG_ASSIGN_OR_RETURN(
      Unframed unframed,
      UnframeChecksummed(bytes, absl::StrCat("commit log ", path)));
  CommitLog log;
  if (!log.ParseFromString(unframed.payload)) {
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

// An exclusive flock(2) on a directory, held for the object's life.
class DirLock {
 public:
  static absl::StatusOr<DirLock> Acquire(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return absl::Status(
          err == ENOENT ? absl::StatusCode::kNotFound
                        : absl::StatusCode::kUnavailable,
          absl::StrCat("cannot open checkpoint directory ", dir,
                       " to lock its commit log: ", std::strerror(err)));
    }
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat(
          "cannot lock the commit log of ", dir, ": ", std::strerror(err)));
    }
    return DirLock(fd);
  }
  DirLock(DirLock&& other) : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor drops the lock
  }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

absl::StatusOr<CommitLog> ReadCommitLog(const std::string& dir) {
  return ReadLogFile(LogPath(dir));
}

absl::StatusOr<CommitLogRead> ReadCommitLogWithFallback(
    const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (log.ok()) return CommitLogRead{*std::move(log), absl::OkStatus()};
  if (!absl::IsNotFound(log.status()) && !absl::IsDataLoss(log.status())) {
    return log.status();
  }
  absl::StatusOr<CommitLog> previous = ReadLogFile(PreviousPath(dir));
  if (!previous.ok()) return log.status();
  absl::Status damage =
      absl::IsNotFound(log.status())
          ? absl::DataLossError(absl::StrCat("commit log ", LogPath(dir),
                                             " is missing, but its previous "
                                             "copy ",
                                             PreviousPath(dir),
                                             " exists; the log was deleted"))
          : log.status();
  return CommitLogRead{*std::move(previous), std::move(damage)};
}

absl::Status WriteCommitLog(const std::string& dir, const CommitLog& log,
                            bool is_commit) {
  std::string bytes;
  if (!log.SerializeToString(&bytes)) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the commit log of ", dir));
  }
  const std::string framed = FrameChecksummed(bytes);
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.before_manifest"));
  // The previous copy is written first, and only from an intact log, so
  // that at every instant at least one of the two files is intact.
  if (ReadCommitLog(dir).ok()) {
    JG_ASSIGN_OR_RETURN(std::string current, ReadFileToString(LogPath(dir)));
    JG_RETURN_IF_ERROR(WriteFileAtomically(PreviousPath(dir), current));
  }
  JG_RETURN_IF_ERROR(
      WriteFileAtomically(LogPath(dir), framed, [is_commit]() -> absl::Status {
        if (!is_commit) return absl::OkStatus();
        return Failpoint("commit.after_manifest_tmp");
      }));
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.after_manifest"));
  return absl::OkStatus();
}

absl::Status UpdateCommitLog(
    const std::string& dir, bool is_commit,
    const std::function<absl::StatusOr<bool>(CommitLog&)>& edit) {
  JG_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(dir));
  CommitLog log;
  absl::StatusOr<CommitLogRead> existing = ReadCommitLogWithFallback(dir);
  if (existing.ok()) {
    if (!existing->damage.ok()) {
      LOG(WARNING) << existing->damage.message()
                   << "; rewriting it from its previous copy";
    }
    log = std::move(existing->log);
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  JG_ASSIGN_OR_RETURN(bool changed, edit(log));
  if (!changed) return absl::OkStatus();
  log.set_format_version(kCommitLogFormatVersion);
  return WriteCommitLog(dir, log, is_commit);
}

absl::Status CreateCommitLogIfMissing(const std::string& dir,
                                      const std::string& db_type) {
  JG_ASSIGN_OR_RETURN(DirLock lock, DirLock::Acquire(dir));
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(LogPath(dir)));
  JG_ASSIGN_OR_RETURN(bool previous, PathExists(PreviousPath(dir)));
  // A missing log beside a previous copy is damage for readers to report,
  // not a new directory.
  if (exists || previous) return absl::OkStatus();
  CommitLog log;
  log.set_format_version(kCommitLogFormatVersion);
  log.set_db_type(db_type);
  return WriteCommitLog(dir, log, /*is_commit=*/false);
}

bool BelongsToJob(const CommittedEpoch& entry,
                  absl::Span<const std::string> nodes) {
  if (nodes.empty()) return true;
  for (const std::string& node : entry.node()) {
    if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
      return true;
    }
  }
  return false;
}

absl::Status CommitEpoch(const std::string& dir, const std::string& db_type,
                         const EpochCommit& commit) {
  CommittedEpoch entry;
  entry.set_epoch(commit.epoch);
  for (const std::string& node : commit.nodes) entry.add_node(node);
  entry.set_total_bytes(commit.total_bytes);
  entry.set_save_micros(commit.save_micros);
  if (commit.preemption.has_value()) {
    *entry.mutable_preemption() = *commit.preemption;
  }
  return UpdateCommitLog(
      dir, /*is_commit=*/true, [&](CommitLog& log) -> absl::StatusOr<bool> {
        log.set_db_type(db_type);
        entry.set_committed_unix_micros(absl::ToUnixMicros(absl::Now()));
        std::vector<CommittedEpoch> kept;
        for (const CommittedEpoch& e : log.epoch()) {
          if (BelongsToJob(e, commit.nodes) && e.epoch() >= commit.epoch)
            continue;
          kept.push_back(e);
        }
        kept.push_back(entry);
        // Increasing epochs; entries of one epoch (several jobs) stay in commit
        // order.
        std::stable_sort(kept.begin(), kept.end(),
                         [](const CommittedEpoch& a, const CommittedEpoch& b) {
                           return a.epoch() < b.epoch();
                         });
        log.clear_epoch();
        for (CommittedEpoch& e : kept) *log.add_epoch() = std::move(e);
        return true;
      });
}

absl::Status ForgetEpoch(const std::string& dir, int64_t epoch,
                         absl::Span<const std::string> nodes) {
  return UpdateCommitLog(
      dir, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        std::vector<CommittedEpoch> kept;
        for (const CommittedEpoch& e : log.epoch()) {
          if (e.epoch() == epoch && BelongsToJob(e, nodes)) continue;
          kept.push_back(e);
        }
        if (static_cast<int>(kept.size()) == log.epoch_size()) return false;
        log.clear_epoch();
        for (CommittedEpoch& e : kept) *log.add_epoch() = std::move(e);
        return true;
      });
}

absl::Status MarkEpochLoopFinished(const std::string& dir, int64_t epoch,
                                   absl::Span<const std::string> nodes,
                                   const Preemption& preemption) {
  return UpdateCommitLog(
      dir, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        for (CommittedEpoch& e : *log.mutable_epoch()) {
          if (e.epoch() == epoch && BelongsToJob(e, nodes)) {
            if (e.has_preemption() && e.preemption().group() != "download") {
              // Its databases hold the middle of a group, not the state
              // after the loop: a resume must continue that group.
              return absl::FailedPreconditionError(absl::StrCat(
                  "epoch ", epoch, " in ", dir,
                  " is a preemption checkpoint of the middle of its ",
                  e.preemption().group(),
                  " group, so it cannot be marked as the last epoch"));
            }
            *e.mutable_preemption() = preemption;
            return true;
          }
        }
        return absl::NotFoundError(absl::StrCat(
            "epoch ", epoch, " is not committed in ", dir,
            ", so it cannot be marked as the last epoch of a preempted run"));
      });
}

const CommittedEpoch* FindCommittedEpoch(const CommitLog& log, int64_t epoch,
                                         absl::Span<const std::string> nodes) {
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.epoch() == epoch && BelongsToJob(e, nodes)) return &e;
  }
  return nullptr;
}

std::string CommittedEpochList(const CommitLog& log,
                               absl::Span<const std::string> nodes) {
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : log.epoch()) {
    if (BelongsToJob(e, nodes)) epochs.push_back(e.epoch());
  }
  return epochs.empty() ? "none" : absl::StrJoin(epochs, ", ");
}

}  // namespace jobgraph

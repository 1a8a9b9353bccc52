#include "checkpoint/commit/commit_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/job_group.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
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

// Logs written before Preemption.group existed name the group only in
// group_name: readers see it in `group`, like every other log.
void UpgradeLegacyFields(CommitLog& log) {
  for (CommittedEpoch& e : *log.mutable_epoch()) {
    if (e.has_preemption() && e.preemption().group() == JOB_GROUP_UNSPECIFIED) {
      Preemption& p = *e.mutable_preemption();
      p.set_group(JobGroupFromName(p.group_name()));
    }
  }
}

// While the format version is 1, every written entry names its group in
// group_name too, the only field that readers of version 1 know.
void FillGroupNames(CommitLog& log) {
  for (CommittedEpoch& e : *log.mutable_epoch()) {
    if (e.has_preemption() && e.preemption().group() != JOB_GROUP_UNSPECIFIED) {
      Preemption& p = *e.mutable_preemption();
      p.set_group_name(std::string(JobGroupName(p.group())));
    }
  }
}

// Whether FillGroupNames would change an entry of `log`: a group_name that
// does not name the entry's group (written by another version, or damaged
// in a way the checksum did not catch because it was written so).
bool HasStaleGroupNames(const CommitLog& log) {
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.has_preemption() && e.preemption().group() != JOB_GROUP_UNSPECIFIED &&
        e.preemption().group_name() != JobGroupName(e.preemption().group())) {
      return true;
    }
  }
  return false;
}

// A commit log and the bytes of the file it was read from (or written to).
struct LogFile {
  CommitLog log;
  std::string bytes;
};

// The commit log in the file at `path`: NotFound if absent. When the file
// holds exactly `known->bytes`, `known->log` is taken instead of parsing
// them again.
absl::StatusOr<LogFile> ReadLogFile(const std::string& path,
                                    LogFile* known = nullptr) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(path));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("no commit log at ", path));
  }
  LogFile file;
  JG_ASSIGN_OR_RETURN(file.bytes, ReadFileToString(path));
  if (known != nullptr && known->bytes == file.bytes) {
    file.log = std::move(known->log);
    return file;
  }
  JG_ASSIGN_OR_RETURN(
      Unframed unframed,
      UnframeChecksummed(file.bytes, absl::StrCat("commit log ", path)));
  if (!file.log.ParseFromString(unframed.payload)) {
    return absl::DataLossError(absl::StrCat(
        "commit log ", path, " cannot be parsed; the file is damaged"));
  }
  // An empty or zeroed file parses as a valid empty message; every commit
  // log jobgraph writes has a version, so a missing one means damage.
  if (file.log.format_version() < 1) {
    return absl::DataLossError(absl::StrCat(
        "commit log ", path, " has no format version; the file is damaged"));
  }
  if (file.log.format_version() > kCommitLogFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("commit log ", path, " has format version ",
                     file.log.format_version(), "; this build reads up to ",
                     kCommitLogFormatVersion, ". Use a newer jobgraph."));
  }
  UpgradeLegacyFields(file.log);
  return file;
}

// The commit log this process last wrote into each directory, with its
// bytes. An update that finds the same bytes on disk takes the message from
// here instead of parsing every epoch's entry again, so a commit costs a read
// and a compare, not a parse that grows with the epochs. Comparing the bytes
// keeps it exact whoever else writes the log.
class WrittenLogs {
 public:
  static WrittenLogs& Get() {
    static WrittenLogs* logs = new WrittenLogs;
    return *logs;
  }
  // The entry for `dir`, removed (it is put back after a write).
  std::optional<LogFile> Take(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_dir_.find(dir);
    if (it == by_dir_.end()) return std::nullopt;
    LogFile file = std::move(it->second);
    by_dir_.erase(it);
    return file;
  }
  void Put(const std::string& dir, LogFile file) {
    std::lock_guard<std::mutex> lock(mu_);
    by_dir_[dir] = std::move(file);
  }

 private:
  std::mutex mu_;
  std::map<std::string, LogFile> by_dir_ ABSL_GUARDED_BY(mu_);
};

// What ReadWithFallback found: the log, or its previous copy with the
// reason the log itself could not be used (`damage`, OK for the log).
struct FallbackRead {
  LogFile file;
  absl::Status damage;
};

absl::StatusOr<FallbackRead> ReadWithFallback(const std::string& dir,
                                              LogFile* known) {
  absl::StatusOr<LogFile> log = ReadLogFile(LogPath(dir), known);
  if (log.ok()) return FallbackRead{*std::move(log), absl::OkStatus()};
  if (!absl::IsNotFound(log.status()) && !absl::IsDataLoss(log.status())) {
    return log.status();
  }
  absl::StatusOr<LogFile> previous = ReadLogFile(PreviousPath(dir));
  if (!previous.ok()) {
    // No log but a previous copy that cannot be read: epochs were committed
    // here, and which ones is unknown. Not a new directory: a commit must
    // not start a log that forgets them.
    if (absl::IsNotFound(log.status()) &&
        !absl::IsNotFound(previous.status())) {
      return absl::DataLossError(absl::StrCat(
          "commit log ", LogPath(dir), " is missing and its previous copy ",
          PreviousPath(dir), " cannot be read (", previous.status().message(),
          "); the epochs committed in ", dir,
          " are unknown: rebuild the log from the databases that verify "
          "with `ckpt recover ",
          dir, "`, or restore MANIFEST.jobgraph"));
    }
    return log.status();
  }
  absl::Status damage =
      absl::IsNotFound(log.status())
          ? absl::DataLossError(absl::StrCat("commit log ", LogPath(dir),
                                             " is missing, but its previous "
                                             "copy ",
                                             PreviousPath(dir),
                                             " exists; the log was deleted"))
          : log.status();
  return FallbackRead{*std::move(previous), std::move(damage)};
}

// Makes the intact log now in place, whose bytes are `current`, the
// previous copy: a second name for the same file where the file system
// allows it, since its bytes are durable already; else a copy. Done before
// the log is replaced, so that at every instant at least one of the two
// files is intact.
absl::Status KeepPreviousCopy(const std::string& dir,
                              const std::string& current) {
  JG_ASSIGN_OR_RETURN(bool linked,
                      LinkFileAtomically(LogPath(dir), PreviousPath(dir)));
  if (linked) return absl::OkStatus();
  return WriteFileAtomically(PreviousPath(dir), current);
}

// `log` and its framed bytes.
absl::StatusOr<LogFile> Encode(const std::string& dir, CommitLog log) {
  FillGroupNames(log);
  std::string bytes;
  if (!log.SerializeToString(&bytes)) {
    return absl::InternalError(
        absl::StrCat("cannot serialize the commit log of ", dir));
  }
  return LogFile{std::move(log), FrameChecksummed(bytes)};
}

// `log`, which is the log framed in `current` with one more entry at the
// end, and its framed bytes: that log's payload followed by the entry's
// field. The encoding of the rest is not repeated, so a commit costs the
// same whatever the number of epochs listed. The bytes parse to `log`
// exactly; with no unknown fields in `current` they are also the bytes
// Encode would give. nullopt if `current` is not a framed log.
// `log` is taken only when the result has a value.
std::optional<LogFile> EncodeAppended(CommitLog& log,
                                      const std::string& current) {
  if (log.epoch_size() == 0 || !absl::StartsWith(current, kChecksummedMagic) ||
      current.size() < kChecksummedHeaderBytes) {
    return std::nullopt;
  }
  // The entry alone in a log of its own encodes as that field (the other
  // fields, at their defaults, encode as nothing).
  CommitLog tail;
  *tail.add_epoch() = log.epoch(log.epoch_size() - 1);
  std::string payload = current.substr(kChecksummedHeaderBytes);
  tail.AppendToString(&payload);
#ifndef NDEBUG
  // The bytes must say what the cache will hold beside them (EpochCommit's
  // `also` may only take entries out, for one).
  CommitLog parsed;
  CHECK(parsed.ParseFromString(payload));
  UpgradeLegacyFields(parsed);
  CHECK_EQ(parsed.SerializeAsString(), log.SerializeAsString())
      << "an appended commit-log entry does not give the edited log";
#endif
  return LogFile{std::move(log), FrameChecksummed(payload)};
}

// Replaces the commit log of `dir` with `written`. `current` holds the
// bytes of the intact log now in place, if any: it becomes the previous
// copy first. `out`, when it holds a writer, is the new log's file made
// ahead of time, after the previous copy was kept (CommitLogUpdate::Prepare);
// `dir_fd`, if not -1, is an open descriptor of `dir`, for its fsync.
absl::Status ReplaceLog(const std::string& dir, const LogFile& written,
                        const std::string* current, bool is_commit,
                        std::optional<AtomicFileWriter> out = {},
                        int dir_fd = -1) {
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.before_commit_log"));
  if (!out.has_value()) {
    if (current != nullptr) JG_RETURN_IF_ERROR(KeepPreviousCopy(dir, *current));
    JG_ASSIGN_OR_RETURN(AtomicFileWriter created,
                        AtomicFileWriter::Create(LogPath(dir)));
    out.emplace(std::move(created));
  }
  JG_RETURN_IF_ERROR(out->Commit(
      written.bytes,
      [is_commit]() -> absl::Status {
        if (!is_commit) return absl::OkStatus();
        return Failpoint("commit.after_commit_log_tmp");
      },
      dir_fd));
  if (is_commit) JG_RETURN_IF_ERROR(Failpoint("commit.after_commit_log"));
  return absl::OkStatus();
}

}  // namespace

int CommitLogVersionFor(const CommitLog& log) {
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.referenced_epoch_size() > 0) return kCommitLogFormatVersion;
  }
  return 1;
}

absl::StatusOr<std::optional<CommitLogLock>> CommitLogLock::Lock(
    const std::string& dir, bool wait) {
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
    rc = ::flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    if (!wait && err == EWOULDBLOCK) return std::nullopt;
    return absl::UnavailableError(absl::StrCat("cannot lock the commit log of ",
                                               dir, ": ", std::strerror(err)));
  }
  return CommitLogLock(fd);
}

absl::StatusOr<CommitLogLock> CommitLogLock::Acquire(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(std::optional<CommitLogLock> lock,
                      Lock(dir, /*wait=*/true));
  return *std::move(lock);
}

absl::StatusOr<std::optional<CommitLogLock>> CommitLogLock::TryAcquire(
    const std::string& dir) {
  return Lock(dir, /*wait=*/false);
}

CommitLogLock::CommitLogLock(CommitLogLock&& other)
    : fd_(std::exchange(other.fd_, -1)) {}

CommitLogLock::~CommitLogLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor drops the lock
}

absl::StatusOr<CommitLog> ReadCommitLog(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(LogFile file, ReadLogFile(LogPath(dir)));
  return std::move(file.log);
}

absl::StatusOr<CommitLogRead> ReadCommitLogWithFallback(
    const std::string& dir) {
  JG_ASSIGN_OR_RETURN(FallbackRead read, ReadWithFallback(dir, nullptr));
  return CommitLogRead{std::move(read.file.log), std::move(read.damage)};
}

absl::Status WriteCommitLog(const std::string& dir, const CommitLog& log,
                            bool is_commit) {
  absl::StatusOr<LogFile> current = ReadLogFile(LogPath(dir));
  JG_ASSIGN_OR_RETURN(LogFile written, Encode(dir, log));
  return ReplaceLog(dir, written, current.ok() ? &current->bytes : nullptr,
                    is_commit);
}

struct CommitLogUpdate::State {
  std::string dir;
  CommitLogLock lock;
  CommitLog log;
  // The bytes of the intact log in place, if any.
  std::optional<std::string> current;
  // The new log's file, once Prepare made it.
  std::optional<AtomicFileWriter> out;
};

CommitLogUpdate::CommitLogUpdate(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
CommitLogUpdate::CommitLogUpdate(CommitLogUpdate&&) = default;
CommitLogUpdate& CommitLogUpdate::operator=(CommitLogUpdate&&) = default;
CommitLogUpdate::~CommitLogUpdate() {
  // Abandoned unedited: the log read stays known, so the next update need
  // not parse it again.
  if (state_ != nullptr && state_->current.has_value()) {
    WrittenLogs::Get().Put(
        state_->dir, {std::move(state_->log), *std::move(state_->current)});
  }
}

const std::string& CommitLogUpdate::dir() const { return state_->dir; }

absl::StatusOr<CommitLogUpdate> CommitLogUpdate::Begin(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(CommitLogLock lock, CommitLogLock::Acquire(dir));
  auto state = std::make_unique<State>(State{dir, std::move(lock)});
  std::optional<LogFile> known = WrittenLogs::Get().Take(dir);
  absl::StatusOr<FallbackRead> existing =
      ReadWithFallback(dir, known.has_value() ? &*known : nullptr);
  if (existing.ok()) {
    if (!existing->damage.ok()) {
      LOG(WARNING) << existing->damage.message()
                   << "; rewriting it from its previous copy";
    } else {
      state->current = std::move(existing->file.bytes);
    }
    state->log = std::move(existing->file.log);
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  return CommitLogUpdate(std::move(state));
}

absl::Status CommitLogUpdate::Prepare() {
  CHECK(state_ != nullptr) << "CommitLogUpdate used after Finish";
  State& s = *state_;
  if (s.out.has_value()) return absl::OkStatus();
  if (s.current.has_value()) {
    JG_RETURN_IF_ERROR(KeepPreviousCopy(s.dir, *s.current));
  }
  JG_ASSIGN_OR_RETURN(AtomicFileWriter out,
                      AtomicFileWriter::Create(LogPath(s.dir)));
  s.out.emplace(std::move(out));
  return absl::OkStatus();
}

absl::Status CommitLogUpdate::Finish(
    bool is_commit,
    const std::function<absl::StatusOr<bool>(CommitLog&)>& edit) && {
  return std::move(*this).FinishEdit(
      is_commit, [&](CommitLog& log) -> absl::StatusOr<Edit> {
        JG_ASSIGN_OR_RETURN(bool changed, edit(log));
        return changed ? Edit::kChanged : Edit::kNone;
      });
}

absl::Status CommitLogUpdate::FinishEdit(
    bool is_commit,
    const std::function<absl::StatusOr<Edit>(CommitLog&)>& edit) && {
  CHECK(state_ != nullptr) << "CommitLogUpdate finished twice";
  std::unique_ptr<State> s = std::move(state_);
  const int version_before = s->log.format_version();
  // Appending to the bytes in place keeps the old entries' bytes, so it
  // needs them to be what FillGroupNames leaves.
  const bool stale_names = HasStaleGroupNames(s->log);
  JG_ASSIGN_OR_RETURN(Edit edited, edit(s->log));
  FillGroupNames(s->log);
  if (edited == Edit::kNone) {
    if (s->current.has_value()) {
      WrittenLogs::Get().Put(s->dir,
                             {std::move(s->log), *std::move(s->current)});
    }
    return absl::OkStatus();
  }
  std::optional<LogFile> written;
  const int version = CommitLogVersionFor(s->log);
  if (edited == Edit::kAppendedLast && version_before == version &&
      !stale_names && s->current.has_value()) {
    written = EncodeAppended(s->log, *s->current);
  }
  if (!written.has_value()) {
    s->log.set_format_version(version);
    JG_ASSIGN_OR_RETURN(written, Encode(s->dir, std::move(s->log)));
  }
  JG_RETURN_IF_ERROR(ReplaceLog(s->dir, *written,
                                s->current ? &*s->current : nullptr, is_commit,
                                std::move(s->out), s->lock.fd()));
  WrittenLogs::Get().Put(s->dir, *std::move(written));
  return absl::OkStatus();
}

absl::Status UpdateCommitLog(
    const std::string& dir, bool is_commit,
    const std::function<absl::StatusOr<bool>(CommitLog&)>& edit) {
  JG_ASSIGN_OR_RETURN(CommitLogUpdate update, CommitLogUpdate::Begin(dir));
  return std::move(update).Finish(is_commit, edit);
}

absl::Status CreateCommitLogIfMissing(const std::string& dir,
                                      const std::string& db_type) {
  JG_ASSIGN_OR_RETURN(CommitLogLock lock, CommitLogLock::Acquire(dir));
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(LogPath(dir)));
  JG_ASSIGN_OR_RETURN(bool previous, PathExists(PreviousPath(dir)));
  // A missing log beside a previous copy is damage for readers to report,
  // not a new directory.
  if (exists || previous) return absl::OkStatus();
  CommitLog log;
  log.set_format_version(CommitLogVersionFor(log));
  log.set_db_type(db_type);
  return WriteCommitLog(dir, log, /*is_commit=*/false);
}

bool BelongsToJob(const CommittedEpoch& entry,
                  absl::Span<const std::string> nodes) {
  return JobNodes(nodes).Owns(entry);
}

JobNodes::JobNodes(absl::Span<const std::string> nodes)
    : nodes_(nodes.begin(), nodes.end()) {}

bool JobNodes::Owns(const CommittedEpoch& entry) const {
  if (nodes_.empty()) return true;
  for (const std::string& node : entry.node()) {
    if (nodes_.contains(node)) return true;
  }
  return false;
}

absl::Status CommitEpoch(const std::string& dir, const std::string& db_type,
                         const EpochCommit& commit) {
  JG_ASSIGN_OR_RETURN(CommitLogUpdate update, CommitLogUpdate::Begin(dir));
  return CommitEpoch(std::move(update), db_type, commit);
}

absl::Status CommitEpoch(CommitLogUpdate update, const std::string& db_type,
                         const EpochCommit& commit) {
  CommittedEpoch entry;
  entry.set_epoch(commit.epoch);
  for (const std::string& node : commit.nodes) entry.add_node(node);
  for (const std::string& node : commit.held_nodes) entry.add_held_node(node);
  if (!commit.host.empty()) entry.set_host(commit.host);
  entry.set_total_bytes(commit.total_bytes);
  entry.set_save_micros(commit.save_micros);
  entry.set_referenced_bytes(commit.referenced_bytes);
  for (int64_t referenced : commit.referenced_epochs) {
    entry.add_referenced_epoch(referenced);
  }
  if (commit.preemption.has_value()) {
    *entry.mutable_preemption() = *commit.preemption;
  }
  const JobNodes own(commit.nodes);
  const std::string update_dir = update.dir();
  return std::move(update).FinishEdit(
      /*is_commit=*/true,
      [&](CommitLog& log) -> absl::StatusOr<CommitLogUpdate::Edit> {
        // The databases refer to these epochs' databases: listing the
        // epoch without them would list one that cannot be restored. Only
        // another writer of the log (`ckpt gc` while the job runs) can have
        // taken them out.
        for (int64_t referenced : commit.referenced_epochs) {
          bool listed = false;
          for (const CommittedEpoch& e : log.epoch()) {
            listed |= e.epoch() == referenced && own.Owns(e);
          }
          if (!listed) {
            return absl::FailedPreconditionError(absl::StrCat(
                "epoch ", commit.epoch, " refers to the databases of epoch ",
                referenced, ", which the commit log of ", update_dir,
                " no longer lists (did `ckpt gc` run while the job ran?); "
                "epoch ",
                commit.epoch, " is not committed"));
          }
        }
        const bool same_type = log.db_type() == db_type;
        log.set_db_type(db_type);
        entry.set_committed_unix_micros(commit.committed_unix_micros.value_or(
            absl::ToUnixMicros(absl::Now())));
        const bool dropped = !TakeEntries(log, [&](const CommittedEpoch& e) {
                                return e.epoch() >= commit.epoch && own.Owns(e);
                              }).empty();
        auto* epochs = log.mutable_epoch();
        // Increasing epochs; entries of one epoch (several jobs) stay in
        // commit order. The new entry goes last unless another job listed
        // a later epoch (or the log was out of order): then it is sorted.
        bool in_order = true;
        int64_t previous = INT64_MIN;
        for (const CommittedEpoch& e : *epochs) {
          if (e.epoch() < previous || e.epoch() > commit.epoch) {
            in_order = false;
          }
          previous = e.epoch();
        }
        *epochs->Add() = std::move(entry);
        if (!in_order) {
          std::stable_sort(
              epochs->pointer_begin(), epochs->pointer_end(),
              [](const CommittedEpoch* a, const CommittedEpoch* b) {
                return a->epoch() < b->epoch();
              });
        }
        const int entries = epochs->size();
        if (commit.also) commit.also(log);
        const bool retired = log.epoch_size() != entries;
        return same_type && !dropped && in_order && !retired
                   ? CommitLogUpdate::Edit::kAppendedLast
                   : CommitLogUpdate::Edit::kChanged;
      });
}

absl::StatusOr<int64_t> ForgetEpoch(const std::string& dir, int64_t epoch,
                                    absl::Span<const std::string> nodes) {
  const JobNodes own(nodes);
  int64_t newest = -1;
  JG_RETURN_IF_ERROR(UpdateCommitLog(
      dir, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        // The epoch, the entries that reference it, the ones that reference
        // those, ...: references point to earlier epochs, so one pass in
        // increasing order finds them all.
        std::vector<const CommittedEpoch*> entries;
        for (const CommittedEpoch& e : log.epoch()) {
          if (own.Owns(e)) entries.push_back(&e);
        }
        std::stable_sort(entries.begin(), entries.end(),
                         [](const CommittedEpoch* a, const CommittedEpoch* b) {
                           return a->epoch() < b->epoch();
                         });
        absl::flat_hash_set<int64_t> gone = {epoch};
        for (const CommittedEpoch* e : entries) {
          for (int64_t referenced : e->referenced_epoch()) {
            if (gone.contains(referenced)) gone.insert(e->epoch());
          }
        }
        const bool taken = !TakeEntries(log, [&](const CommittedEpoch& e) {
                              return own.Owns(e) && gone.contains(e.epoch());
                            }).empty();
        for (const CommittedEpoch& e : log.epoch()) {
          if (own.Owns(e)) newest = std::max(newest, e.epoch());
        }
        return taken;
      }));
  return newest;
}

absl::Status MarkEpochLoopFinished(const std::string& dir, int64_t epoch,
                                   absl::Span<const std::string> nodes,
                                   const Preemption& preemption) {
  JG_ASSIGN_OR_RETURN(CommitLogUpdate update, CommitLogUpdate::Begin(dir));
  return MarkEpochLoopFinished(std::move(update), epoch, nodes, preemption);
}

absl::Status MarkEpochLoopFinished(CommitLogUpdate update, int64_t epoch,
                                   absl::Span<const std::string> nodes,
                                   const Preemption& preemption) {
  const std::string dir = update.dir();
  return std::move(update).Finish(
      /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        for (CommittedEpoch& e : *log.mutable_epoch()) {
          if (e.epoch() == epoch && BelongsToJob(e, nodes)) {
            if (e.has_preemption() &&
                e.preemption().group() != JOB_GROUP_DOWNLOAD) {
              // Its databases hold the middle of a group, not the state
              // after the loop: a resume must continue that group.
              return absl::FailedPreconditionError(absl::StrCat(
                  "epoch ", epoch, " in ", dir,
                  " is a preemption checkpoint of the middle of its ",
                  JobGroupName(e.preemption().group()),
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

std::vector<CommittedEpoch> TakeEntries(
    CommitLog& log, absl::FunctionRef<bool(const CommittedEpoch&)> drop) {
  auto* epochs = log.mutable_epoch();
  std::vector<CommittedEpoch> taken;
  int kept = 0;
  for (int i = 0; i < epochs->size(); ++i) {
    if (drop(epochs->Get(i))) {
      taken.push_back(std::move(*epochs->Mutable(i)));
      continue;
    }
    if (kept != i) epochs->SwapElements(kept, i);
    ++kept;
  }
  epochs->DeleteSubrange(kept, epochs->size() - kept);
  return taken;
}

const CommittedEpoch* FindCommittedEpoch(const CommitLog& log, int64_t epoch,
                                         absl::Span<const std::string> nodes) {
  const JobNodes own(nodes);
  for (const CommittedEpoch& e : log.epoch()) {
    if (e.epoch() == epoch && own.Owns(e)) return &e;
  }
  return nullptr;
}

std::string CommittedEpochList(const CommitLog& log,
                               absl::Span<const std::string> nodes) {
  const JobNodes own(nodes);
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : log.epoch()) {
    if (own.Owns(e)) epochs.push_back(e.epoch());
  }
  return epochs.empty() ? "none" : absl::StrJoin(epochs, ", ");
}

std::vector<std::string> HeldNodes(const CommittedEpoch& entry) {
  if (entry.held_node().empty()) {
    return {entry.node().begin(), entry.node().end()};
  }
  return {entry.held_node().begin(), entry.held_node().end()};
}

}  // namespace jobgraph

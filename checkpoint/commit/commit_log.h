// The commit log: the file "<dir>/MANIFEST.jobgraph" (a CommitLog proto in a
// checksummed frame, see checkpoint/FORMAT.md) that says which epochs of a
// checkpoint directory are complete.
//
// An epoch is committed exactly when the commit log lists it. Every node's
// database is moved into place under its final name before the log is
// touched, and the log itself is replaced atomically (temp file, fsync,
// rename, fsync of the directory), so a crash at any instant leaves either
// the old or the new list of committed epochs, and every epoch listed has all
// of its databases in place.
//
// The log checks itself: its frame carries the length and CRC-32C of its
// bytes, so a truncation or a flipped bit is DataLoss naming the file. Before
// each replacement the current log, if intact, becomes
// "MANIFEST.jobgraph.prev" (a hard link, or a copy where the file system has
// none), so one damaged copy never loses the history:
// readers that can fall back use the previous copy, which lists at most one
// commit less.
//
// Several jobs (with disjoint nodes) may share a directory: an entry belongs
// to the job whose nodes it lists, and a job's commit or retention never
// touches another job's entries. Every read-modify-write of the log holds an
// exclusive flock(2) on the directory, so concurrent writers, in this process
// or in others, never lose an entry.
//
// The functions are thread-safe (writers serialise on the directory lock);
// a CommitLogUpdate is used by one thread at a time.

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_COMMIT_LOG_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_COMMIT_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The newest commit-log version this code reads; readers reject newer ones.
// A log is written as version 1 unless an entry references other epochs'
// databases (incremental saves), which readers of version 1 would not keep
// when they apply retention: then it is version 2.
inline constexpr int kCommitLogFormatVersion = 2;

// The version a log with these entries is written as (see above).
int CommitLogVersionFor(const CommitLog& log);

// The previous copy of the commit log, beside it.
inline constexpr char kPreviousCommitLogSuffix[] = ".prev";

// The commit log of `dir`: NotFound if the directory has none, DataLoss if
// it is damaged (frame, CRC-32C, parse, missing version), FailedPrecondition
// for a newer format. Messages name the file. Never falls back.
absl::StatusOr<CommitLog> ReadCommitLog(const std::string& dir);

// What ReadCommitLogWithFallback found.
struct CommitLogRead {
  CommitLog log;
  // OK, or why the commit log itself could not be used (DataLoss naming the
  // file): `log` is then the previous copy.
  absl::Status damage;
};

// The commit log of `dir`, or its previous copy when the log is damaged or
// missing while the copy is intact. NotFound when neither exists; the log's
// own error when it is damaged and there is no intact copy.
absl::StatusOr<CommitLogRead> ReadCommitLogWithFallback(const std::string& dir);

// Reads the commit log of `dir` (with fallback; an empty log if there is
// none), lets `edit` change it, and, when `edit` returns true, replaces the
// log with the result, all under the directory lock. `edit` leaves the log
// as it was when it returns false or an error. `is_commit` arms the
// commit failpoints
// ("commit.before_commit_log", "commit.after_commit_log_tmp",
// "commit.after_commit_log"); retention's rewrite passes false. An error from
// `edit` leaves the log untouched.
absl::Status UpdateCommitLog(
    const std::string& dir, bool is_commit,
    const std::function<absl::StatusOr<bool>(CommitLog&)>& edit);

struct EpochCommit;

// The lock of the commit log of a directory: an exclusive flock(2) on the
// directory, which every writer of the log holds for its read-modify-write,
// and for as long as its temporary file of the new log exists. Held for the
// object's life. Movable; not thread-safe.
class CommitLogLock {
 public:
  // Waits for the lock. NotFound if `dir` does not exist.
  static absl::StatusOr<CommitLogLock> Acquire(const std::string& dir);
  // The lock if it is free now, else nullopt (no wait).
  static absl::StatusOr<std::optional<CommitLogLock>> TryAcquire(
      const std::string& dir);

  CommitLogLock(CommitLogLock&& other);
  CommitLogLock& operator=(CommitLogLock&&) = delete;
  ~CommitLogLock();

  // The directory's descriptor, for its fsync.
  int fd() const { return fd_; }

 private:
  explicit CommitLogLock(int fd) : fd_(fd) {}
  static absl::StatusOr<std::optional<CommitLogLock>> Lock(
      const std::string& dir, bool wait);
  int fd_;
};

// An update of the commit log of one directory (UpdateCommitLog in steps),
// split so that its slow part can run ahead of the edit: Begin locks the
// directory and reads the log; Prepare keeps the previous copy and creates
// the new log's file; Finish edits the log and, if the edit changed it,
// writes, fsyncs and renames that file (preparing first if Prepare was not
// called). An MPI job's rank 0 begins and prepares its commit while the
// ranks agree on their saves, so that what follows the agreement is one
// write, two fsyncs and a rename.
//
// The directory stays locked (CommitLogLock) from Begin until Finish
// returns or the update is destroyed; an update destroyed unfinished
// removes the new log's file and leaves the log as it was (its previous
// copy, if Prepare kept it, is then a second name of the log in place).
// While an update is held, any other writer of the directory's log waits:
// in this process or another, of this job or another. The holder must not
// wait for a process that may be waiting for the lock (rank 0 of an MPI job
// holds it through its save and the ranks' agreement, so no other rank of
// the job may write the same directory's log). Movable; not thread-safe.
class CommitLogUpdate {
 public:
  // Locks the commit log of `dir` and reads it, with fallback to the
  // previous copy (an empty log if there is none).
  static absl::StatusOr<CommitLogUpdate> Begin(const std::string& dir);

  CommitLogUpdate(CommitLogUpdate&&);
  CommitLogUpdate& operator=(CommitLogUpdate&&);
  ~CommitLogUpdate();

  // The directory whose log this updates.
  const std::string& dir() const;

  // Keeps the intact log in place as the previous copy and creates the file
  // the new log will be written into. Errors name the file.
  absl::Status Prepare();

  // As UpdateCommitLog's `edit` and `is_commit`; ends the update (and the
  // lock) whatever the outcome.
  absl::Status Finish(
      bool is_commit,
      const std::function<absl::StatusOr<bool>(CommitLog&)>& edit) &&;

 private:
  friend absl::Status CommitEpoch(CommitLogUpdate update,
                                  const std::string& db_type,
                                  const EpochCommit& commit);
  struct State;
  // What an edit did to the log. A commit usually appends one entry at the
  // end: the log's bytes then grow by that entry's, and the rest is not
  // encoded again.
  enum class Edit { kNone, kChanged, kAppendedLast };

  explicit CommitLogUpdate(std::unique_ptr<State> state);
  absl::Status FinishEdit(
      bool is_commit,
      const std::function<absl::StatusOr<Edit>(CommitLog&)>& edit) &&;

  std::unique_ptr<State> state_;
};

// Replaces the commit log of `dir` with `log` (copying the current log, if
// intact, to the previous copy first), without the directory lock: for
// writers that hold it (UpdateCommitLog), tools and tests. `is_commit` as
// for UpdateCommitLog. Like every write of the log, it names each entry's
// group in Preemption.group_name (FORMAT.md, section 2), replacing the name
// there: `log` reads back the same but for those names.
absl::Status WriteCommitLog(const std::string& dir, const CommitLog& log,
                            bool is_commit);

// Writes an empty commit log into `dir` unless it has one (intact or not), so
// that databases found later without any log are known to be damage, not a
// job that never committed.
absl::Status CreateCommitLogIfMissing(const std::string& dir,
                                      const std::string& db_type);

// What a commit records about one epoch.
struct EpochCommit {
  int64_t epoch = 0;
  // Every node whose database makes up the epoch.
  std::vector<std::string> nodes;
  int64_t total_bytes = 0;
  // Wall time of the save, from its start to the commit.
  int64_t save_micros = 0;
  // Set for a preemption checkpoint: where the run stopped.
  std::optional<Preemption> preemption;
  // Of total_bytes, those the databases hold by reference, and the epochs
  // whose databases hold them (increasing); empty for a full save.
  int64_t referenced_bytes = 0;
  std::vector<int64_t> referenced_epochs;
  // When the epoch was committed (CommittedEpoch.committed_unix_micros).
  // Default: now. A flush to another tier (checkpoint/tier/flush.h) gives
  // the time of the commit it copies, so that both logs name the same
  // commit.
  std::optional<int64_t> committed_unix_micros;
  // CommittedEpoch.held_node: in a host's local tier of a job on several
  // hosts, the nodes whose databases the directory holds. Empty: all.
  std::vector<std::string> held_nodes;
  // CommittedEpoch.host: the host of that local tier.
  std::string host;
  // Applied to the log in the same write, after the commit's own edit: the
  // Checkpointer's retention (RetireEpochs), so that an epoch is listed and
  // the epochs it retires are unlisted at once. It may take entries out of
  // the log and must change nothing else. May be empty.
  std::function<void(CommitLog&)> also;
};

// Commits `commit.epoch` in the commit log of `dir` (creating the log if it
// is missing). Entries that share a node with the commit are this job's: a
// re-saved epoch replaces its entry, and entries of later epochs are dropped,
// because they belong to a run that was abandoned when the job resumed from
// an earlier epoch. Other jobs' entries are kept. Call only after every
// node's database of the epoch is durable under its final name.
absl::Status CommitEpoch(const std::string& dir, const std::string& db_type,
                         const EpochCommit& commit);
// CommitEpoch through an update begun (and perhaps prepared) ahead.
absl::Status CommitEpoch(CommitLogUpdate update, const std::string& db_type,
                         const EpochCommit& commit);

// The nodes whose databases the directory of `entry`'s log holds: its
// held_node (a host's local tier of a job on several hosts), else all of
// its nodes.
std::vector<std::string> HeldNodes(const CommittedEpoch& entry);

// Takes the entry of `epoch` of the job of `nodes` out of the commit log of
// `dir`, if it has one, and every entry of the job that references it
// (directly, or through another entry that goes): done
// before that epoch's databases are replaced, so that the log never lists
// an epoch whose databases (or those it reads from) are being rewritten
// (say, a preemption checkpoint by the epoch's ordinary save). OK if there
// is no such entry. Returns the newest epoch of the job's entries left in the
// log, -1 if none: no later save of a newer epoch needs to forget anything.
absl::StatusOr<int64_t> ForgetEpoch(const std::string& dir, int64_t epoch,
                                    absl::Span<const std::string> nodes);

// Marks the committed `epoch` of the job of `nodes` as the one at which the
// run's epoch loop ended before a preemption (Preemption.group
// JOB_GROUP_DOWNLOAD),
// so a resume from it runs the download and exit groups instead of another
// epoch. NotFound if the job has no such entry; FailedPrecondition if that
// entry is a preemption checkpoint of the middle of a group.
absl::Status MarkEpochLoopFinished(const std::string& dir, int64_t epoch,
                                   absl::Span<const std::string> nodes,
                                   const Preemption& preemption);
// MarkEpochLoopFinished through an update begun (and perhaps prepared)
// ahead.
absl::Status MarkEpochLoopFinished(CommitLogUpdate update, int64_t epoch,
                                   absl::Span<const std::string> nodes,
                                   const Preemption& preemption);

// Whether `entry` lists at least one of `nodes`, i.e. belongs to the job of
// those nodes. Every entry belongs to an empty node list.
bool BelongsToJob(const CommittedEpoch& entry,
                  absl::Span<const std::string> nodes);

// BelongsToJob for many entries of one job: the nodes in a hash set, built
// once, so a check costs one lookup per node of the entry. Borrows `nodes`.
class JobNodes {
 public:
  explicit JobNodes(absl::Span<const std::string> nodes);
  bool Owns(const CommittedEpoch& entry) const;

 private:
  absl::flat_hash_set<absl::string_view> nodes_;
};

// Takes the entries of `log` for which `drop` is true out of it, keeping the
// others in their order (moving pointers only: a log may hold many entries),
// and returns them in their order.
std::vector<CommittedEpoch> TakeEntries(
    CommitLog& log, absl::FunctionRef<bool(const CommittedEpoch&)> drop);

// The entry of `epoch` that belongs to the job of `nodes` (all entries if
// `nodes` is empty), or null.
const CommittedEpoch* FindCommittedEpoch(const CommitLog& log, int64_t epoch,
                                         absl::Span<const std::string> nodes);

// "0, 1, 2" or "none", for messages: the epochs of the entries that belong to
// the job of `nodes` (all if empty).
std::string CommittedEpochList(const CommitLog& log,
                               absl::Span<const std::string> nodes = {});

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_COMMIT_LOG_H_

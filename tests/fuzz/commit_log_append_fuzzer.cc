// Fuzzes the append path of the commit log (checkpoint/commit/commit_log.h):
// a commit (CommitEpoch) that adds an epoch to an existing MANIFEST.jobgraph
// whose bytes come from the input, a damaged or odd log (other jobs'
// entries, entries out of order, the old bare format, unknown fields,
// preemption records, a missing log beside its previous copy).
// commit_log_fuzzer fuzzes the readers of the log; this one checks what a
// commit leaves behind.
//
// Input:
//   log mode     1 byte:
//      1  frame the log with a correct checksum (so the payload is what
//         varies)
//      2  write the previous copy MANIFEST.jobgraph.prev
//      4  frame the previous copy
//      8  leave MANIFEST.jobgraph out
//   commit mode  1 byte:
//      1  commit through CommitLogUpdate::Begin and Prepare, as rank 0 of an
//         MPI job does, instead of CommitEpoch(dir, ...)
//      2  a preemption checkpoint (group epoch, "SIGTERM")
//      4  an incremental save: the commit references the job's newest epoch
//         listed before its own, or, when there is none, the epoch before
//         it (which the job then has not listed)
//      8  then commit the next epoch over the log the first commit wrote
//     16  the job has a second node, "trainer_1"
//     32  retention in the same write (EpochCommit::also): retire the job's
//         oldest entry of an earlier epoch that the commit does not reference
//     64  the epoch byte is relative: the epoch is the newest epoch listed
//         (of any job), plus one, plus the byte
//    128  the job's first node is "reader_0" instead of "trainer_0" (the
//         seeds' job)
//   epoch        1 byte
//   n            2 bytes, little-endian
//   the log      n bytes
//   the previous copy: the rest of the input
//
// The contract checked for each commit, against what
// ReadCommitLogWithFallback read just before it (a missing log and copy,
// NotFound, is an empty log):
// - When that read failed otherwise (a damaged log without an intact copy, a
//   newer format), the commit fails with the same status code and leaves
//   the directory as it was, byte for byte: a commit never replaces a log
//   it cannot read.
// - When the commit references an epoch the job has not listed, it fails
//   with FailedPrecondition and leaves the directory as it was (except that
//   Prepare, when it ran, made the intact log its own previous copy, as
//   commit_log.h says).
// - Otherwise it succeeds, and the log itself (no fallback) reads back as
//   the log before with the job's entries of the committed epoch and later
//   taken out (replaced or abandoned), the new entry exactly as committed
//   added, in increasing epoch order (stable: entries of one epoch keep
//   their order, the new one last), the entry retention retired taken out,
//   every other entry unchanged (with its group_name filled in from its
//   group, as every write does), the database type committed and the format
//   version its entries need. When the log was intact before the commit,
//   the previous copy now holds its old bytes; when it was not, the previous
//   copy is untouched. No temporary file is left behind.
// Outcome (fuzz::NoteOutcome): accepted when the first commit succeeds,
// refused when it fails.

#include <dirent.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/job_group.h"
#include "checkpoint/util/checksummed.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

constexpr char kDbType[] = "leveldb";

using Files = std::map<std::string, std::string>;

std::string LogName() { return std::string(kCommitLogFileName); }
std::string PreviousName() {
  return absl::StrCat(kCommitLogFileName, kPreviousCommitLogSuffix);
}

// Every file of the (flat) directory `dir`, by name.
Files ReadFiles(const std::string& dir) {
  Files files;
  DIR* d = ::opendir(dir.c_str());
  FUZZ_CHECK(d != nullptr, dir);
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::ifstream in(absl::StrCat(dir, "/", name), std::ios::binary);
    FUZZ_CHECK(in.good(), absl::StrCat("cannot read ", dir, "/", name));
    files[name] = std::string((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  }
  ::closedir(d);
  return files;
}

// What the directory held just before a commit, and what readers saw.
struct Before {
  Files files;
  // Whether the log itself (not its copy) was read.
  bool intact = false;
  // The read with fallback: OK, NotFound (an empty log) or why it failed.
  absl::Status status;
  CommitLog log;
};

Before ReadBefore(const std::string& dir) {
  Before before;
  before.files = ReadFiles(dir);
  before.intact = ReadCommitLog(dir).ok();
  absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(dir);
  before.status = read.status();
  if (read.ok()) {
    FUZZ_CHECK(before.intact == read->damage.ok(),
               "the fallback reader and ReadCommitLog disagree");
    before.log = std::move(read->log);
  }
  return before;
}

// What every write of the log does to an entry: it names its group in
// group_name too.
void FillGroupName(CommittedEpoch& entry) {
  if (entry.has_preemption() &&
      entry.preemption().group() != JOB_GROUP_UNSPECIFIED) {
    entry.mutable_preemption()->set_group_name(
        std::string(JobGroupName(entry.preemption().group())));
  }
}

// EpochCommit::also: retires the job's oldest entry of an epoch before
// `epoch` that `commit` does not reference, as retention would.
void RetireOldest(const EpochCommit& commit, CommitLog& log) {
  const JobNodes own(commit.nodes);
  int oldest = -1;
  for (int i = 0; i < log.epoch_size(); ++i) {
    const CommittedEpoch& e = log.epoch(i);
    if (!own.Owns(e) || e.epoch() >= commit.epoch) continue;
    if (std::find(commit.referenced_epochs.begin(),
                  commit.referenced_epochs.end(),
                  e.epoch()) != commit.referenced_epochs.end()) {
      continue;
    }
    if (oldest < 0 || e.epoch() < log.epoch(oldest).epoch()) oldest = i;
  }
  if (oldest >= 0) log.mutable_epoch()->DeleteSubrange(oldest, 1);
}

// The log that committing `commit` over `before` must give (commit_log.h),
// and the index of the new entry in it, whose commit time is unknown.
std::pair<CommitLog, int> ExpectedLog(const CommitLog& before,
                                      const EpochCommit& commit) {
  const JobNodes own(commit.nodes);
  CommitLog log = before;
  log.set_db_type(kDbType);
  TakeEntries(log, [&](const CommittedEpoch& e) {
    return e.epoch() >= commit.epoch && own.Owns(e);
  });
  CommittedEpoch* entry = log.add_epoch();
  entry->set_epoch(commit.epoch);
  for (const std::string& node : commit.nodes) entry->add_node(node);
  entry->set_total_bytes(commit.total_bytes);
  entry->set_save_micros(commit.save_micros);
  entry->set_referenced_bytes(commit.referenced_bytes);
  for (int64_t referenced : commit.referenced_epochs) {
    entry->add_referenced_epoch(referenced);
  }
  if (commit.preemption.has_value()) {
    *entry->mutable_preemption() = *commit.preemption;
  }
  std::stable_sort(log.mutable_epoch()->pointer_begin(),
                   log.mutable_epoch()->pointer_end(),
                   [](const CommittedEpoch* a, const CommittedEpoch* b) {
                     return a->epoch() < b->epoch();
                   });
  if (commit.also) commit.also(log);
  // Sorting and retention move the entries' pointers, not the entries.
  int index = -1;
  for (int i = 0; i < log.epoch_size(); ++i) {
    FillGroupName(*log.mutable_epoch(i));
    if (&log.epoch(i) == entry) index = i;
  }
  FUZZ_CHECK(index >= 0, "retention retired the new entry");
  log.set_format_version(CommitLogVersionFor(log));
  return {std::move(log), index};
}

// Commits `commit` over what `before` describes and checks the outcome
// (the contract in this file's comment). Returns whether it succeeded.
bool CommitAndCheck(const std::string& dir, const Before& before,
                    const EpochCommit& commit, bool through_update) {
  // What must happen.
  std::optional<absl::StatusCode> must_fail;
  if (!before.status.ok() && !absl::IsNotFound(before.status)) {
    must_fail = before.status.code();
  } else {
    for (int64_t referenced : commit.referenced_epochs) {
      const CommittedEpoch* listed =
          FindCommittedEpoch(before.log, referenced, commit.nodes);
      if (listed == nullptr) must_fail = absl::StatusCode::kFailedPrecondition;
    }
  }

  absl::Status status;
  bool prepared = false;
  if (through_update) {
    absl::StatusOr<CommitLogUpdate> update = CommitLogUpdate::Begin(dir);
    if (!update.ok()) {
      status = update.status();
    } else {
      status = update->Prepare();
      prepared = status.ok();
      if (status.ok())
        status = CommitEpoch(*std::move(update), kDbType, commit);
    }
  } else {
    status = CommitEpoch(dir, kDbType, commit);
  }

  const Files after_files = ReadFiles(dir);
  const auto log_before = before.files.find(LogName());
  if (must_fail.has_value()) {
    FUZZ_CHECK(!status.ok(),
               absl::StrCat("a commit succeeded where it must fail with ",
                            absl::StatusCodeToString(*must_fail), " (",
                            before.status.ToString(), ")"));
    FUZZ_CHECK(status.code() == *must_fail,
               absl::StrCat("a commit failed with ", status.ToString(),
                            ", not ", absl::StatusCodeToString(*must_fail)));
    Files expected = before.files;
    if (prepared && before.intact) {
      expected[PreviousName()] = log_before->second;
    }
    FUZZ_CHECK(after_files == expected,
               absl::StrCat("a failed commit changed the directory: ",
                            status.ToString()));
    return false;
  }
  FUZZ_CHECK(status.ok(), absl::StrCat("a commit over a readable log failed: ",
                                       status.ToString()));

  for (const auto& [name, bytes] : after_files) {
    FUZZ_CHECK(name == LogName() || name == PreviousName(),
               absl::StrCat("a commit left the file ", name));
  }
  const auto previous_after = after_files.find(PreviousName());
  if (before.intact) {
    FUZZ_CHECK(previous_after != after_files.end() &&
                   previous_after->second == log_before->second,
               "the previous copy is not the log the commit replaced");
  } else {
    const auto previous_before = before.files.find(PreviousName());
    FUZZ_CHECK((previous_before == before.files.end()) ==
                       (previous_after == after_files.end()) &&
                   (previous_after == after_files.end() ||
                    previous_after->second == previous_before->second),
               "a commit over a log that was not intact changed its "
               "previous copy");
  }

  absl::StatusOr<CommitLog> after = ReadCommitLog(dir);
  FUZZ_CHECK(after.ok(), absl::StrCat("the log a commit wrote does not read: ",
                                      after.status().ToString()));
  // (A NotFound read left before.log empty.)
  auto [expected, index] = ExpectedLog(before.log, commit);
  FUZZ_CHECK(after->epoch_size() == expected.epoch_size(),
             absl::StrCat("the log lists epochs ", CommittedEpochList(*after),
                          " after the commit of epoch ", commit.epoch,
                          " over epochs ", CommittedEpochList(before.log),
                          ", not ", CommittedEpochList(expected)));
  FUZZ_CHECK(after->epoch(index).committed_unix_micros() > 0,
             "the new entry has no commit time");
  expected.mutable_epoch(index)->set_committed_unix_micros(
      after->epoch(index).committed_unix_micros());
  for (int i = 0; i < expected.epoch_size(); ++i) {
    FUZZ_CHECK(
        after->epoch(i).SerializeAsString() ==
            expected.epoch(i).SerializeAsString(),
        absl::StrCat("entry ", i, " of the log after the commit of epoch ",
                     commit.epoch, " is not the expected one (",
                     i == index ? "the new entry" : "an entry listed before",
                     ")"));
  }
  FUZZ_CHECK(after->db_type() == kDbType, "the database type was not set");
  FUZZ_CHECK(after->format_version() == expected.format_version(),
             absl::StrCat("a log written with format version ",
                          after->format_version(), " needs version ",
                          expected.format_version()));
  FUZZ_CHECK(after->SerializeAsString() == expected.SerializeAsString(),
             "the log after a commit differs from the expected one");
  FUZZ_CHECK(FindCommittedEpoch(*after, commit.epoch, commit.nodes) ==
                 &after->epoch(index),
             "FindCommittedEpoch does not find the new entry");
  return true;
}

// The newest epoch listed in `log` below `below` (if set), of the job of
// `own` (if set); nullopt if there is none.
std::optional<int64_t> Newest(const CommitLog& log,
                              const std::optional<JobNodes>& own,
                              std::optional<int64_t> below) {
  std::optional<int64_t> newest;
  for (const CommittedEpoch& e : log.epoch()) {
    if (own.has_value() && !own->Owns(e)) continue;
    if (below.has_value() && e.epoch() >= *below) continue;
    if (!newest.has_value() || e.epoch() > *newest) newest = e.epoch();
  }
  return newest;
}

// The commit of `epoch` that `commit_mode` describes, over `before`.
EpochCommit MakeCommit(uint8_t commit_mode, int64_t epoch,
                       const CommitLog& before) {
  EpochCommit commit;
  commit.epoch = epoch;
  commit.nodes = {(commit_mode & 128) ? "reader_0" : "trainer_0"};
  if (commit_mode & 16) commit.nodes.push_back("trainer_1");
  commit.total_bytes = 1000 + epoch % 1000;
  commit.save_micros = 250;
  if (commit_mode & 2) {
    Preemption preemption;
    preemption.set_group(JOB_GROUP_EPOCH);
    preemption.set_signal("SIGTERM");
    preemption.set_preempted_unix_micros(1234);
    commit.preemption = preemption;
  }
  if (commit_mode & 4) {
    std::optional<int64_t> referenced =
        Newest(before, JobNodes(commit.nodes), epoch);
    commit.referenced_epochs = {referenced.value_or(epoch - 1)};
    commit.referenced_bytes = 100;
  }
  if (commit_mode & 32) {
    // Copies of what the callback needs: `commit` is copied around.
    const int64_t own_epoch = commit.epoch;
    const std::vector<std::string> nodes = commit.nodes;
    const std::vector<int64_t> referenced = commit.referenced_epochs;
    commit.also = [own_epoch, nodes, referenced](CommitLog& log) {
      EpochCommit view;
      view.epoch = own_epoch;
      view.nodes = nodes;
      view.referenced_epochs = referenced;
      RetireOldest(view, log);
    };
  }
  return commit;
}

bool Run(fuzz::FuzzInput& input) {
  static fuzz::ScratchDir* const scratch =
      new fuzz::ScratchDir("commit_log_append");
  const std::string& dir = scratch->path();
  fuzz::RemoveContents(dir);

  const uint8_t log_mode = input.Byte();
  const uint8_t commit_mode = input.Byte();
  const uint8_t epoch_byte = input.Byte();
  std::string log(input.Bytes(input.Length16()));
  std::string previous(input.Rest());
  if (log_mode & 1) log = FrameChecksummed(log);
  if (log_mode & 4) previous = FrameChecksummed(previous);
  if (!(log_mode & 8))
    fuzz::WriteFileOrDie(absl::StrCat(dir, "/", LogName()), log);
  if (log_mode & 2) {
    fuzz::WriteFileOrDie(absl::StrCat(dir, "/", PreviousName()), previous);
  }

  Before before = ReadBefore(dir);
  int64_t epoch = epoch_byte;
  if (commit_mode & 64) {
    // Far from overflow whatever the log lists.
    constexpr int64_t kLimit = int64_t{1} << 60;
    const std::optional<int64_t> newest = Newest(before.log, std::nullopt, {});
    if (newest.has_value() && *newest < kLimit && *newest >= -kLimit) {
      epoch += *newest + 1;
    }
  }
  const bool through_update = commit_mode & 1;
  const EpochCommit commit = MakeCommit(commit_mode, epoch, before.log);
  const bool committed = CommitAndCheck(dir, before, commit, through_update);
  if (committed && (commit_mode & 8)) {
    // The next epoch over the log just written (which the commit code
    // remembers, so it is not parsed again).
    Before again = ReadBefore(dir);
    const EpochCommit next = MakeCommit(commit_mode, epoch + 1, again.log);
    FUZZ_CHECK(CommitAndCheck(dir, again, next, through_update),
               "the commit of the next epoch failed");
  }
  return committed;
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

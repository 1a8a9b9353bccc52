// Fuzzes the commit log reader (checkpoint/commit/commit_log.h) on a damaged
// MANIFEST.jobgraph and its previous copy, and a commit over them.
//
// Input: a mode byte, a 16-bit length n, n bytes of the log, then the bytes
// of the previous copy. Mode bits:
//   1  frame the log with a correct checksum (so the payload is what varies)
//   2  write the previous copy MANIFEST.jobgraph.prev
//   4  frame the previous copy
//   8  leave MANIFEST.jobgraph out
//  16  then commit an epoch over whatever is there (CommitEpoch)
// Invariants: an accepted log has a known format version; writing it back
// and reading it again gives the same log, except for the group names that
// every write fills in (see WithoutFilledGroupNames); and a log as written
// reads back exactly the same when written again.
// Outcome (fuzz::NoteOutcome): accepted when the fallback reader found a
// usable log (the log, or its previous copy), refused otherwise.
// commit_log_append_fuzzer checks what a commit does to the log in depth.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/checksummed.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

void CheckSameLog(const CommitLog& a, const CommitLog& b) {
  FUZZ_CHECK(a.SerializeAsString() == b.SerializeAsString(),
             "the commit log changed when written and read back");
}

// `log` without the group_name of each entry that has a group. Every write
// sets that field to the name of the entry's group (for readers of format
// version 1, which know only the name), replacing whatever it held: a name
// from another writer, damage the frame did not catch, or any name beside a
// group this build does not know. Readers take the group, never that name,
// so a write back may change those names and must change nothing else.
// commit_log_append_fuzzer and commit_log_test check the names written.
CommitLog WithoutFilledGroupNames(CommitLog log) {
  for (CommittedEpoch& e : *log.mutable_epoch()) {
    if (e.has_preemption() && e.preemption().group() != JOB_GROUP_UNSPECIFIED) {
      e.mutable_preemption()->clear_group_name();
    }
  }
  return log;
}

// Writes `log` into `dir` as tools do and reads it back.
CommitLog WriteAndRead(const std::string& dir, const CommitLog& log) {
  absl::Status written = WriteCommitLog(dir, log, /*is_commit=*/false);
  FUZZ_CHECK(written.ok(), written.ToString());
  absl::StatusOr<CommitLog> again = ReadCommitLog(dir);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  return *std::move(again);
}

bool Run(fuzz::FuzzInput& input) {
  static fuzz::ScratchDir* const scratch = new fuzz::ScratchDir("commit_log");
  const std::string& dir = scratch->path();
  fuzz::RemoveContents(dir);
  const std::string log_path =
      absl::StrCat(dir, "/", std::string(kCommitLogFileName));

  const uint8_t mode = input.Byte();
  std::string log(input.Bytes(input.Length16()));
  std::string previous(input.Rest());
  if (mode & 1) log = FrameChecksummed(log);
  if (mode & 4) previous = FrameChecksummed(previous);
  if (!(mode & 8)) fuzz::WriteFileOrDie(log_path, log);
  if (mode & 2) {
    fuzz::WriteFileOrDie(absl::StrCat(log_path, kPreviousCommitLogSuffix),
                         previous);
  }

  absl::StatusOr<CommitLog> read = ReadCommitLog(dir);
  if (read.ok()) {
    FUZZ_CHECK(read->format_version() >= 1 &&
                   read->format_version() <= kCommitLogFormatVersion,
               "a commit log with an unknown version was accepted");
    // The helpers that every reader of the log uses.
    CommittedEpochList(*read);
    for (const CommittedEpoch& entry : read->epoch()) {
      std::vector<std::string> nodes(entry.node().begin(), entry.node().end());
      FUZZ_CHECK(FindCommittedEpoch(*read, entry.epoch(), nodes) != nullptr,
                 "a listed epoch is not found");
      BelongsToJob(entry, nodes);
    }
  }
  absl::StatusOr<CommitLogRead> fallback = ReadCommitLogWithFallback(dir);
  if (read.ok()) {
    FUZZ_CHECK(fallback.ok() && fallback->damage.ok(),
               "an intact commit log was not used by the fallback reader");
    CheckSameLog(*read, fallback->log);
  }

  if (read.ok() && !(mode & 16)) {
    const CommitLog again = WriteAndRead(dir, *read);
    CheckSameLog(WithoutFilledGroupNames(*read),
                 WithoutFilledGroupNames(again));
    // Its names are filled in now: nothing is left for a write to change.
    CheckSameLog(again, WriteAndRead(dir, again));
  }
  if (mode & 16) {
    EpochCommit commit;
    commit.epoch = mode >> 5;
    commit.nodes = {"trainer_0"};
    absl::Status committed = CommitEpoch(dir, "leveldb", commit);
    if (committed.ok()) {
      absl::StatusOr<CommitLog> after = ReadCommitLog(dir);
      FUZZ_CHECK(after.ok(), after.status().ToString());
      FUZZ_CHECK(
          FindCommittedEpoch(*after, commit.epoch, commit.nodes) != nullptr,
          "a committed epoch is not listed");
    }
  }
  return fallback.ok();
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

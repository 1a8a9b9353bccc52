// Asynchronous saves interrupted at the moment that matters: the save of
// epoch N is held at failpoint "save.after_snapshot" (its blobs frozen,
// shared copy-on-write, nothing written) while the job runs epoch N + 1 and
// overwrites those very blobs.
//  - Let go, the save writes epoch N's values, byte for byte, and commits
//    epoch N (in process, the Caffe2 pipeline on two nodes).
//  - Killed there, the process leaves `latest` at exactly N - 1, and a resume
//    ends as an uninterrupted run does (examples/sum_pipeline in a child
//    process).
// Nothing is decided by time: the test acts when the save is held
// (Failpoints::WaitForHold, or the child's "failpoint_hold=" line) and when
// the next epoch has run (the child's log lines).

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/job.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "engine/blob.h"
#include "engine/serialization.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::Caffe2Total;
using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;
using ::jobgraph::testing::RunBinary;
using ::jobgraph::testing::RunBinaryWatched;
using ::jobgraph::testing::RunfilesPath;
using ::jobgraph::testing::WatchedChild;
using ::jobgraph::testing::WatchOptions;

// Where the save stands still: its blobs are frozen, nothing is written.
constexpr char kHeldSave[] = "save.after_snapshot";
// A guard against a hold that never comes; it decides nothing.
constexpr absl::Duration kHoldTimeout = absl::Seconds(60);

// The epochs the commit log of `dir` lists ("0, 1"), or its error.
std::string Listed(const std::string& dir) {
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  return log.ok() ? CommittedEpochList(*log) : log.status().ToString();
}

// A checkpoint database's values, by key: every key but the blob index.
using DbValues = std::map<std::string, std::string>;

// What a save of `node`'s checkpointed blobs as they are now writes: each
// blob serialized as a save serializes it (the same chunking).
DbValues SerializedNow(LocalSession& session, const std::string& node,
                       const CheckpointOptions& options) {
  DbValues values;
  absl::StatusOr<Tensor> names = session.FetchBlob(node, kBlobNamesBlob);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return values;
  const Workspace* workspace = session.NodeWorkspace(node);
  for (int64_t i = 0; i < names->numel(); ++i) {
    const std::string& name = names->data<std::string>()[i];
    const Blob* blob = workspace->GetBlob(name);
    EXPECT_NE(blob, nullptr) << node << ": " << name;
    if (blob == nullptr) continue;
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
        SerializeBlobToPairs(name, *blob, {.chunk_bytes = options.chunk_bytes});
    EXPECT_TRUE(pairs.ok()) << pairs.status();
    if (pairs.ok()) values.insert(pairs->begin(), pairs->end());
  }
  return values;
}

// Every value the database at `path` holds, as stored.
DbValues StoredValues(const std::string& path) {
  DbValues values;
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kRead);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return values;
  {
    std::unique_ptr<Cursor> cursor = (*db)->NewCursor();
    for (; cursor->Valid(); cursor->Next()) {
      if (cursor->key() == kBlobIndexKey) continue;
      values.emplace(cursor->key(), cursor->value());
    }
    EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  }
  EXPECT_TRUE((*db)->Close().ok());
  return values;
}

// The keys whose values differ between `a` and `b` (or that only one has).
std::vector<std::string> DifferingKeys(const DbValues& a, const DbValues& b) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) keys.push_back(key);
  }
  for (const auto& [key, value] : b) {
    if (a.find(key) == a.end()) keys.push_back(key);
  }
  return keys;
}

// The save of epoch kHeld is held while epoch kHeld + 1 runs and overwrites
// the blobs it froze. While held, the commit log lists epochs up to
// kHeld - 1 and no database of kHeld exists; let go, the save writes every
// blob exactly as it was when epoch kHeld ended and commits kHeld (and only
// kHeld: the next epoch's save has not begun). Then that save commits
// kHeld + 1 with the new values.
TEST(AsyncCrashTest, AHeldSaveWritesTheFrozenValuesWhileTheNextEpochRuns) {
  constexpr int64_t kHeld = 2;  // totals 115; epoch 3 makes them 136
  const std::string dir = NewTempDir("held");
  Job job;
  for (int id = 0; id < 2; ++id) testing::BuildCaffe2Pipeline(job, id);
  const std::vector<std::string> nodes = job.nodes_to_checkpoint();
  ASSERT_EQ(nodes, (std::vector<std::string>{"trainer_0", "trainer_1"}));

  LocalSession session;
  MultiNodeCheckpointManager checkpointer({.directory = dir, .async = true});
  // Declared after the checkpointer, so it runs first: should an assertion
  // return early, a held save goes on and the checkpointer's end does not
  // wait for it forever.
  absl::Cleanup release_holds = [] { Failpoints::DisableAll(); };
  ASSERT_EQ(checkpointer.Start(session, nodes, ResumeFrom::Scratch()).value(),
            std::nullopt);
  ASSERT_TRUE(session.Run(job.init_group()).ok());
  ASSERT_TRUE(checkpointer.CaptureBlobNames(session).ok());
  ASSERT_TRUE(checkpointer.SaveEpoch(session, 0).ok());
  for (int64_t epoch = 1; epoch < kHeld; ++epoch) {
    ASSERT_TRUE(session.Run(job.epoch_group()).ok());
    ASSERT_TRUE(checkpointer.SaveEpoch(session, epoch).ok());
  }
  checkpointer.WaitForBackgroundSave();
  for (const SaveOutcome& outcome : checkpointer.TakeFinishedSaves()) {
    ASSERT_TRUE(outcome.stats.ok()) << outcome.stats.status();
  }
  ASSERT_EQ(Listed(dir), "0, 1");

  // Epoch kHeld runs; its save freezes the blobs and holds before writing.
  ASSERT_TRUE(session.Run(job.epoch_group()).ok());
  std::map<std::string, DbValues> frozen;
  for (const std::string& node : nodes) {
    frozen[node] = SerializedNow(session, node, checkpointer.options());
  }
  ASSERT_TRUE(Failpoints::Enable(kHeldSave, FailpointAction::kHold).ok());
  absl::StatusOr<CheckpointStats> saved =
      checkpointer.SaveEpoch(session, kHeld);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_TRUE(saved->in_background);
  ASSERT_TRUE(Failpoints::WaitForHold(kHeldSave, kHoldTimeout));

  // Epoch kHeld + 1 runs while the save is held, and overwrites its blobs:
  // the totals, the readers' cursors.
  ASSERT_TRUE(session.Run(job.epoch_group()).ok());
  std::map<std::string, DbValues> overwritten;
  for (int id = 0; id < 2; ++id) {
    const std::string& node = nodes[id];
    EXPECT_EQ(Caffe2Total(session, id), 136) << node;
    overwritten[node] = SerializedNow(session, node, checkpointer.options());
    EXPECT_THAT(DifferingKeys(frozen[node], overwritten[node]),
                ::testing::Contains("total#%0"))
        << node;
  }
  // The save is still held there: nothing of epoch kHeld is written, nor
  // committed.
  EXPECT_TRUE(Failpoints::WaitForHold(kHeldSave, absl::ZeroDuration()));
  EXPECT_TRUE(checkpointer.TakeFinishedSaves().empty());
  EXPECT_EQ(Listed(dir), "0, 1");
  for (const std::string& node : nodes) {
    EXPECT_FALSE(PathExists(CheckpointDbPath(dir, node, kHeld)).value())
        << node;
  }

  // Let go: the save writes what it froze and commits epoch kHeld; the save
  // of kHeld + 1 has not begun, so the newest committed epoch is kHeld.
  ASSERT_TRUE(Failpoints::Release(kHeldSave).ok());
  checkpointer.WaitForBackgroundSave();
  std::vector<SaveOutcome> outcomes = checkpointer.TakeFinishedSaves();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].epoch, kHeld);
  EXPECT_TRUE(outcomes[0].in_background);
  ASSERT_TRUE(outcomes[0].stats.ok()) << outcomes[0].stats.status();
  EXPECT_EQ(Listed(dir), "0, 1, 2");
  for (const std::string& node : nodes) {
    const DbValues stored =
        StoredValues(checkpointer.DbPath(node, kHeld).value());
    // Byte for byte what epoch kHeld left, not what overwrote it.
    EXPECT_TRUE(stored == frozen[node])
        << node << ": keys that differ: "
        << absl::StrJoin(DifferingKeys(stored, frozen[node]), ", ");
    EXPECT_FALSE(stored == overwritten[node]) << node;
  }

  // The next epoch's own save commits the new values.
  ASSERT_TRUE(checkpointer.SaveEpoch(session, kHeld + 1).ok());
  checkpointer.WaitForBackgroundSave();
  outcomes = checkpointer.TakeFinishedSaves();
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_TRUE(outcomes[0].stats.ok()) << outcomes[0].stats.status();
  EXPECT_EQ(Listed(dir), "0, 1, 2, 3");
  for (const std::string& node : nodes) {
    EXPECT_TRUE(StoredValues(checkpointer.DbPath(node, kHeld + 1).value()) ==
                overwritten[node])
        << node;
  }
  checkpointer.End();
}

// ---------------------------------------------------------------------------
// A child killed while its save is held.

constexpr int kNodes = 2;
// sum_pipeline's defaults: 10 values read 3 per epoch, so epochs 1..3 read 3
// records on every node, epoch 4 reads the last one and the job ends.
constexpr int64_t kLastEpoch = 4;

// The records every node has read once epoch `epoch` has run.
int RecordsThrough(int64_t epoch) {
  return static_cast<int>(std::min<int64_t>(3 * epoch, 10));
}

// sum_pipeline --async_checkpoint, with JOBGRAPH_FAILPOINT holding the save
// of epoch N (the (N + 1)-th save: epochs 0..N). The test kills the child
// once the save is held (the "failpoint_hold=" line) and epoch N + 1 has
// read all its records on every node ("record done" is logged after the
// record's Add wrote the total): the blobs the save froze are overwritten,
// and the job waits at epoch N + 1's save for the held one. Then the commit
// log lists exactly epochs 0..N - 1 (epoch N - 1's commit ended before
// epoch N's snapshot began), no database of N or later exists, and a resume
// from `latest` loads N - 1 and ends as an uninterrupted run.
TEST(AsyncCrashTest, SigkillWhileASaveIsHeldLeavesThePreviousEpochAsLatest) {
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  for (bool incremental : {false, true}) {
    for (int64_t held = 1; held < kLastEpoch; ++held) {
      const std::string trace = absl::StrCat(
          "save of epoch ", held, " held", incremental ? ", incremental" : "");
      SCOPED_TRACE(trace);
      const std::string dir = NewTempDir(absl::StrCat("kill", held));
      std::vector<std::string> args = {
          absl::StrCat("--nodes=", kNodes), "--async_checkpoint",
          // Only for the "record done" line after each record; 1 ms.
          "--record_delay_ms=1", absl::StrCat("--checkpoint_dir=", dir)};
      if (incremental) args.push_back("--incremental_checkpoint");

      WatchOptions options;
      options.extra_env = {
          absl::StrCat(kFailpointEnvVar, "=", kHeldSave, ":hold@", held + 1)};
      const int records_wanted = kNodes * RecordsThrough(held + 1);
      bool hold_seen = false;
      int records = 0;
      bool signalled = false;
      ChildRun killed = RunBinaryWatched(
          binary, args, options,
          [&](WatchedChild& child, const std::string& line, bool from_stderr) {
            if (!from_stderr) return;
            if (line == absl::StrCat(kFailpointHoldLinePrefix, kHeldSave)) {
              hold_seen = true;
            } else if (absl::StrContains(line, "] record done")) {
              ++records;
            }
            if (hold_seen && records == records_wanted && !signalled) {
              signalled = child.SignalIfRunning(SIGKILL);
            }
          });
      ASSERT_TRUE(signalled) << killed.Describe();
      ASSERT_TRUE(killed.killed()) << killed.Describe();
      EXPECT_EQ(killed.Result(), std::nullopt) << killed.Describe();
      // The job's thread got past epoch N's save (its line is logged when
      // the save returns, before epoch N + 1 runs) and not past epoch
      // N + 1's, which waits for the held one: no record of a later epoch.
      EXPECT_THAT(killed.log,
                  ::testing::HasSubstr(absl::StrCat("] epoch ", held, ": ")));
      EXPECT_THAT(killed.log, ::testing::Not(::testing::HasSubstr(
                                  absl::StrCat("] epoch ", held + 1, ": "))));
      EXPECT_EQ(records, records_wanted) << killed.Describe();

      std::vector<std::string> committed;
      for (int64_t epoch = 0; epoch < held; ++epoch) {
        committed.push_back(absl::StrCat(epoch));
      }
      EXPECT_EQ(Listed(dir), absl::StrJoin(committed, ", "));
      for (int id = 0; id < kNodes; ++id) {
        const std::string node = absl::StrCat("trainer_", id);
        for (int64_t epoch = 0; epoch <= kLastEpoch; ++epoch) {
          EXPECT_EQ(PathExists(CheckpointDbPath(dir, node, epoch)).value(),
                    epoch < held)
              << node << " epoch " << epoch;
        }
      }
      // Not even a temporary database: the held save wrote nothing.
      const std::vector<std::string> names = ListDir(dir).value();
      for (const std::string& name : names) {
        EXPECT_FALSE(absl::StrContains(name, ".tmp-")) << name;
      }

      args.push_back("--resume_from_epoch=latest");
      ChildRun resumed = RunBinary(binary, args);
      ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
      EXPECT_THAT(resumed.log,
                  ::testing::HasSubstr(absl::StrCat(
                      "resumed from epoch ", held - 1, " of ", dir, "\n")))
          << resumed.Describe();
      EXPECT_EQ(resumed.Result(), "result: epochs=4 totals=145,145")
          << resumed.Describe();
      EXPECT_EQ(Listed(dir), "0, 1, 2, 3, 4");
    }
  }
}

}  // namespace
}  // namespace jobgraph

// Damage tests: a finished checkpoint directory of the Caffe2 pipeline (two
// nodes, epochs 0..4) has one node's newest database damaged in one way:
// bytes flipped, a file truncated or deleted, the whole database deleted, or
// its jobgraph manifest rewritten. Then
//  - resuming from that epoch explicitly fails with DataLoss naming the
//    damaged database, and
//  - resuming from `latest` reports it, falls back to epoch 3 and ends
//    exactly as an uninterrupted run does, re-saving a good epoch 4.
// Damage to the commit log itself stops a resume with DataLoss naming the
// commit log, and leaves every file as it was.
//
// A finished database holds its values in a table file (.ldb), its blob
// index in a second one (the index's key sorts before the blob names, and
// Save writes it last), LevelDB's MANIFEST-* and CURRENT, LOCK and
// JOBGRAPH_FILES; no log (leveldb_direct.h).

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "leveldb/db.h"
#include "leveldb/options.h"
#include "proto/jobgraph.pb.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::NewTempDir;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kNodes = 2;
// The node whose database is damaged, and the epoch.
constexpr char kDamagedNode[] = "trainer_1";
constexpr int64_t kDamagedEpoch = 4;

struct RunOutcome {
  absl::StatusOr<int64_t> epochs;
  JobRunStats stats;
  std::vector<int64_t> totals;  // only when the run succeeded
};

// One run of the two-node pipeline in `dir` in a fresh session and manager.
RunOutcome RunPipeline(const std::string& dir, const std::string& resume) {
  Job job;
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir});
  JobRunner runner(job, &manager,
                   {.resume_from = ResumeFrom::Parse(resume).value()});
  RunOutcome outcome{runner.Train(session), runner.stats(), {}};
  if (outcome.epochs.ok()) {
    for (int id = 0; id < kNodes; ++id) {
      outcome.totals.push_back(testing::Caffe2Total(session, id));
    }
  }
  return outcome;
}

std::vector<int64_t> CommittedEpochs(const std::string& dir) {
  absl::StatusOr<CommitLog> commit_log = ReadCommitLog(dir);
  CHECK(commit_log.ok()) << commit_log.status();
  std::vector<int64_t> epochs;
  for (const CommittedEpoch& e : commit_log->epoch()) {
    epochs.push_back(e.epoch());
  }
  return epochs;
}

// Every path below `dir` with its size (-1 for directories) and, for files,
// its bytes: a snapshot that shows any change.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::function<void(const std::string&)> walk = [&](const std::string& d) {
    absl::StatusOr<std::vector<std::string>> names = ListDir(d);
    CHECK(names.ok()) << names.status();
    for (const std::string& name : *names) {
      const std::string path = JoinPath(d, name);
      struct stat st;
      CHECK_EQ(::lstat(path.c_str(), &st), 0) << path;
      if (S_ISDIR(st.st_mode)) {
        files[path + "/"] = "";
        walk(path);
      } else {
        absl::StatusOr<std::string> bytes = ReadFileToString(path);
        CHECK(bytes.ok()) << bytes.status();
        files[path] = *std::move(bytes);
      }
    }
  };
  walk(dir);
  return files;
}

// --- Ways to damage one database -----------------------------------------

// The one file in `db` whose name ends with `suffix` (or starts with it, for
// a prefix such as "MANIFEST-").
std::string FindFile(const std::string& db, absl::string_view pattern) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(db);
  CHECK(names.ok()) << names.status();
  std::vector<std::string> found;
  for (const std::string& name : *names) {
    if (absl::EndsWith(name, pattern) || absl::StartsWith(name, pattern)) {
      found.push_back(JoinPath(db, name));
    }
  }
  CHECK_EQ(found.size(), 1u) << "files matching '" << pattern << "' in " << db;
  return found[0];
}

// The table files of `db`, by whether they hold the blob index.
struct Tables {
  std::vector<std::string> with_index;
  std::vector<std::string> without_index;
};

Tables TablesOf(const std::string& db) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(db);
  CHECK(names.ok()) << names.status();
  Tables tables;
  for (const std::string& name : *names) {
    if (!absl::EndsWith(name, ".ldb")) continue;
    const std::string path = JoinPath(db, name);
    const bool has_index =
        absl::StrContains(ReadFileToString(path).value(), kBlobIndexKey);
    (has_index ? tables.with_index : tables.without_index).push_back(path);
  }
  return tables;
}

std::string IndexTable(const std::string& db) {
  const Tables tables = TablesOf(db);
  CHECK_EQ(tables.with_index.size(), 1u) << "tables with the index in " << db;
  return tables.with_index[0];
}

// The table with the values: the one without the index, or the only one.
std::string DataTable(const std::string& db) {
  const Tables tables = TablesOf(db);
  if (tables.without_index.empty()) return IndexTable(db);
  CHECK_EQ(tables.without_index.size(), 1u)
      << "tables without the index in " << db;
  return tables.without_index[0];
}

void WriteInPlace(const std::string& path, const std::string& bytes) {
  // In place, not atomically: damage does not respect the commit protocol.
  FILE* file = std::fopen(path.c_str(), "r+b");
  CHECK(file != nullptr) << path;
  CHECK_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  CHECK_EQ(std::fclose(file), 0);
}

void XorByte(const std::string& path, size_t offset, unsigned char mask) {
  std::string bytes = ReadFileToString(path).value();
  CHECK_LT(offset, bytes.size()) << path;
  bytes[offset] = static_cast<char>(bytes[offset] ^ mask);
  WriteInPlace(path, bytes);
}

void Truncate(const std::string& path, int64_t size) {
  CHECK_EQ(::truncate(path.c_str(), size), 0) << path;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  CHECK_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_size;
}

// Flips one bit in the tensor data of blob "val" (the int64 values 0..9,
// stored raw): the 5 becomes a 4. Sizes and LevelDB's structure stay intact.
void FlipBitInValue(const std::string& db) {
  const std::string table = DataTable(db);
  const std::string bytes = ReadFileToString(table).value();
  std::string pattern(16, '\0');
  pattern[0] = 5;
  pattern[8] = 6;
  const size_t at = bytes.find(pattern);
  CHECK_NE(at, std::string::npos) << "no value 5, 6 in " << table;
  XorByte(table, at, 0x01);
}

void FlipMiddleByteOfTable(const std::string& db) {
  const std::string table = DataTable(db);
  XorByte(table, FileSize(table) / 2, 0xff);
}

void TruncateTableToHalf(const std::string& db) {
  const std::string table = DataTable(db);
  Truncate(table, FileSize(table) / 2);
}

void TruncateTableByOneByte(const std::string& db) {
  const std::string table = DataTable(db);
  Truncate(table, FileSize(table) - 1);
}

void TruncateLevelDbManifestToHalf(const std::string& db) {
  const std::string manifest = FindFile(db, "MANIFEST-");
  Truncate(manifest, FileSize(manifest) / 2);
}

void DeleteTable(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(DataTable(db)).ok());
}

// Flips a bit in the blob index, inside the node's name that it records: the
// index still parses, so only the table block's checksum can tell.
void FlipBitInBlobIndex(const std::string& db) {
  const std::string table = IndexTable(db);
  const std::string bytes = ReadFileToString(table).value();
  const size_t at = bytes.find("trainer_1");
  CHECK_NE(at, std::string::npos) << "no node name in " << table;
  XorByte(table, at + 2, 0x01);
}

void DeleteIndexTable(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(IndexTable(db)).ok());
}

void DeleteCurrent(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(JoinPath(db, "CURRENT")).ok());
}

void DeleteLevelDbManifest(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(FindFile(db, "MANIFEST-")).ok());
}

void DeleteFileList(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(JoinPath(db, "JOBGRAPH_FILES")).ok());
}

void TruncateFileListByOneByte(const std::string& db) {
  const std::string list = JoinPath(db, "JOBGRAPH_FILES");
  Truncate(list, FileSize(list) - 1);
}

// A log with data, which jobgraph never writes: only LevelDB's recovery
// would read it.
void AddLevelDbLog(const std::string& db) {
  ASSERT_TRUE(WriteFileAtomically(JoinPath(db, "000009.log"), "extra").ok());
}

void DeleteDatabase(const std::string& db) {
  ASSERT_TRUE(RemoveRecursively(db).ok());
}

// Rewrites the value under the jobgraph manifest's key with LevelDB itself,
// as a buggy or foreign writer would; `edit` gets the current value and
// returns the new one, or nullopt to delete the key. The database's file
// list goes too (LevelDB rewrites its files, which the list would catch
// first), so that what is checked is the blob index, as in a database
// written before file lists existed.
void EditBlobIndexValue(
    const std::string& db,
    const std::function<std::optional<std::string>(const std::string&)>& edit) {
  leveldb::DB* raw = nullptr;
  leveldb::Options options;
  ASSERT_TRUE(leveldb::DB::Open(options, db, &raw).ok()) << db;
  std::unique_ptr<leveldb::DB> ldb(raw);
  std::string value;
  ASSERT_TRUE(ldb->Get(leveldb::ReadOptions(), kBlobIndexKey, &value).ok());
  std::optional<std::string> edited = edit(value);
  leveldb::WriteOptions sync;
  sync.sync = true;
  if (edited.has_value()) {
    ASSERT_TRUE(ldb->Put(sync, kBlobIndexKey, *edited).ok());
  } else {
    ASSERT_TRUE(ldb->Delete(sync, kBlobIndexKey).ok());
  }
  ASSERT_TRUE(RemoveRecursively(JoinPath(db, "JOBGRAPH_FILES")).ok());
}

// Applies `change` to the parsed manifest of `db` and stores it back.
void ChangeBlobIndex(const std::string& db,
                     const std::function<void(BlobIndex&)>& change) {
  EditBlobIndexValue(db, [&](const std::string& value) {
    BlobIndex manifest;
    CHECK(manifest.ParseFromString(value));
    manifest.clear_files_listed();
    change(manifest);
    return std::optional<std::string>(manifest.SerializeAsString());
  });
}

void GarbageBlobIndex(const std::string& db) {
  // 'g' (0x67) is field 12 with wire type 7, which does not exist: no
  // parser accepts it.
  EditBlobIndexValue(db, [](const std::string&) {
    return std::optional<std::string>("garbage\xff\xff\xff");
  });
}

void DeleteBlobIndex(const std::string& db) {
  EditBlobIndexValue(db, [](const std::string&) { return std::nullopt; });
}

void WrongChecksumInBlobIndex(const std::string& db) {
  ChangeBlobIndex(db, [](BlobIndex& manifest) {
    for (CheckpointBlobInfo& blob : *manifest.mutable_blob()) {
      if (blob.name() == "total") {
        blob.set_value_crc32c(0, blob.value_crc32c(0) ^ 1);
      }
    }
  });
}

void WrongEpochInBlobIndex(const std::string& db) {
  ChangeBlobIndex(
      db, [](BlobIndex& manifest) { manifest.set_epoch(kDamagedEpoch - 1); });
}

void WrongNodeInBlobIndex(const std::string& db) {
  ChangeBlobIndex(db,
                  [](BlobIndex& manifest) { manifest.set_node("trainer_0"); });
}

struct DamageCase {
  std::string name;
  std::function<void(const std::string& db)> damage;
  // What the error of an explicit resume from the damaged epoch must say,
  // besides the database's path.
  std::string message;
};

void PrintTo(const DamageCase& c, std::ostream* os) { *os << c.name; }

// Every case must be DataLoss naming the database's path. The comments say
// what each gave when this test was written, where that differed.
std::vector<DamageCase> AllDamageCases() {
  return {
      // (a) Bytes flipped in the table file. LevelDB's block checksums are
      // not read during verification (verify_checksums is off there), so
      // jobgraph's own per-value CRC-32C or key lookup catches these.
      {"FlipBitInValue", FlipBitInValue,
       "value of key 'val#%0' (blob 'val') fails its CRC-32C check"},
      // Lands in a key: "key 'dataset:1_cursor' ... is listed in the
      // manifest but missing".
      {"FlipMiddleByteOfTable", FlipMiddleByteOfTable,
       "the database is damaged"},
      // (b) Truncated files. A truncated table gave INTERNAL ("IO error:
      // <db>/000005.ldb: Invalid argument"): LevelDB reports reading past
      // the end of a table file as an I/O error, and leveldb_db.cc maps
      // every I/O error to Internal.
      {"TruncateTableToHalf", TruncateTableToHalf, ".ldb"},
      {"TruncateTableByOneByte", TruncateTableByOneByte, ".ldb"},
      // LevelDB's recovery kept the descriptor's complete records and
      // dropped the rest, losing the table that holds the blob index ("has
      // no blob index"); the read-only reader (leveldb_tables.h) checks
      // every record and names the file.
      {"TruncateLevelDbManifestToHalf", TruncateLevelDbManifestToHalf,
       "/MANIFEST-000001 is damaged at offset "},
      // Went unnoticed by a resume (the index was read without checksums,
      // and a name changed by one bit still parses); ckpt verify saw it.
      {"FlipBitInBlobIndex", FlipBitInBlobIndex, "checksum mismatch"},
      // (c) Deleted files. "Corruption: 1 missing files; e.g.: <db>/...ldb".
      {"DeleteTable", DeleteTable, ".ldb"},
      {"DeleteIndexTable", DeleteIndexTable, ".ldb is missing"},
      // Gave NOT_FOUND ("no LevelDB database at <db>: it has no CURRENT
      // file"), from OpenLevelDb's own check; and the fallback run could
      // not re-save epoch 4 over the damaged directory (Save refuses a
      // non-empty directory without CURRENT).
      {"DeleteCurrent", DeleteCurrent, "CURRENT"},
      // "Corruption: CURRENT points to a non-existent file".
      {"DeleteLevelDbManifest", DeleteLevelDbManifest, "MANIFEST-"},
      // Went unnoticed: without its file list a database looked like one
      // written before the list existed. Its blob index says it has one.
      {"DeleteFileList", DeleteFileList,
       "its file list JOBGRAPH_FILES is missing"},
      {"TruncateFileListByOneByte", TruncateFileListByOneByte,
       "JOBGRAPH_FILES"},
      // Went unnoticed: LevelDB's recovery (on a copy) skips a log too
      // short for a record, and the file list was only checked for the
      // files it lists. (A log of jobgraph's own, listed with 0 bytes, was
      // caught by its size.)
      {"AddLevelDbLog", AddLevelDbLog,
       "it holds 000009.log, which it was not written with"},
      // (d) The whole database deleted. Gave NOT_FOUND ("LevelDB database
      // <db> does not exist").
      {"DeleteDatabase", DeleteDatabase, "does not exist"},
      // (e) The database's jobgraph manifest damaged.
      {"GarbageBlobIndex", GarbageBlobIndex, "blob index does not parse"},
      {"DeleteBlobIndex", DeleteBlobIndex, "has no blob index"},
      {"WrongChecksumInBlobIndex", WrongChecksumInBlobIndex,
       "value of key 'total#%0' (blob 'total') fails its CRC-32C check"},
      {"WrongEpochInBlobIndex", WrongEpochInBlobIndex, "holds epoch 3, not 4"},
      {"WrongNodeInBlobIndex", WrongNodeInBlobIndex,
       "belongs to node 'trainer_0', not 'trainer_1'"},
  };
}

class DamagedDatabaseTest : public ::testing::TestWithParam<DamageCase> {};

TEST_P(DamagedDatabaseTest, ExplicitResumeFailsAndLatestFallsBack) {
  const DamageCase& c = GetParam();
  const std::string dir = NewTempDir(c.name);
  {
    RunOutcome full = RunPipeline(dir, "");
    ASSERT_TRUE(full.epochs.ok()) << full.epochs.status();
    ASSERT_EQ(*full.epochs, 4);
    ASSERT_THAT(full.totals, ElementsAre(145, 145));
  }
  ASSERT_THAT(CommittedEpochs(dir), ElementsAre(0, 1, 2, 3, 4));
  const std::string db = CheckpointDbPath(dir, kDamagedNode, kDamagedEpoch);
  c.damage(db);
  if (::testing::Test::HasFatalFailure()) return;

  // (i) The damaged epoch itself cannot be loaded.
  {
    RunOutcome explicit_resume = RunPipeline(dir, absl::StrCat(kDamagedEpoch));
    const absl::Status& status = explicit_resume.epochs.status();
    LOG(INFO) << c.name << ": resume from epoch 4: " << status;
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(db));
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
  // (ii) latest skips it and resumes from epoch 3, and the run ends as an
  // uninterrupted one does, with a good epoch 4 saved over the damaged one.
  {
    RunOutcome latest = RunPipeline(dir, "latest");
    ASSERT_TRUE(latest.epochs.ok()) << latest.epochs.status();
    EXPECT_EQ(latest.stats.resumed_from, 3);
    EXPECT_EQ(*latest.epochs, 4);
    EXPECT_THAT(latest.totals, ElementsAre(145, 145));
    EXPECT_EQ(latest.stats.save_failures, 0)
        << (latest.stats.save_errors.empty() ? ""
                                             : latest.stats.save_errors[0]);
  }
  EXPECT_THAT(CommittedEpochs(dir), ElementsAre(0, 1, 2, 3, 4));
  for (int id = 0; id < kNodes; ++id) {
    const std::string node = absl::StrCat("trainer_", id);
    absl::StatusOr<CompactBlobIndex> verified = VerifyCheckpointDb(
        "leveldb", CheckpointDbPath(dir, node, kDamagedEpoch), node,
        kDamagedEpoch);
    EXPECT_TRUE(verified.ok()) << verified.status();
  }
}

INSTANTIATE_TEST_SUITE_P(AllDamage, DamagedDatabaseTest,
                         ::testing::ValuesIn(AllDamageCases()),
                         [](const ::testing::TestParamInfo<DamageCase>& info) {
                           return info.param.name;
                         });

// --- Damage to the commit log ----------------------------------------------

struct CommitLogDamage {
  std::string name;
  std::function<void(const std::string& path)> damage;
};

void PrintTo(const CommitLogDamage& c, std::ostream* os) { *os << c.name; }

class DamagedCommitLogTest : public ::testing::TestWithParam<CommitLogDamage> {
};

// The previous copy (written before each commit) lists epochs 0..3 when the
// log listed 0..4; a resume proves no more than that.
TEST_P(DamagedCommitLogTest, ResumeFallsBackToThePreviousCopy) {
  const CommitLogDamage& c = GetParam();
  for (const char* resume : {"latest", "3"}) {
    SCOPED_TRACE(absl::StrCat("resume_from_epoch=", resume));
    const std::string dir = NewTempDir(c.name);
    {
      RunOutcome full = RunPipeline(dir, "");
      ASSERT_TRUE(full.epochs.ok()) << full.epochs.status();
    }
    c.damage(JoinPath(dir, kCommitLogFileName));

    RunOutcome run = RunPipeline(dir, resume);
    ASSERT_TRUE(run.epochs.ok()) << run.epochs.status();
    EXPECT_EQ(run.stats.resumed_from, std::optional<int64_t>(3));
    EXPECT_EQ(*run.epochs, 4);
    EXPECT_THAT(run.totals, ElementsAre(145, 145));
    // The commit of epoch 4 rewrote the log from its previous copy.
    EXPECT_THAT(CommittedEpochs(dir), ElementsAre(0, 1, 2, 3, 4));
  }
}

TEST_P(DamagedCommitLogTest, BothCopiesDamagedFailsAndChangesNothing) {
  const CommitLogDamage& c = GetParam();
  for (const char* resume : {"latest", "3"}) {
    SCOPED_TRACE(absl::StrCat("resume_from_epoch=", resume));
    const std::string dir = NewTempDir(c.name);
    {
      RunOutcome full = RunPipeline(dir, "");
      ASSERT_TRUE(full.epochs.ok()) << full.epochs.status();
    }
    const std::string log = JoinPath(dir, kCommitLogFileName);
    c.damage(log);
    WriteInPlace(absl::StrCat(log, kPreviousCommitLogSuffix), "\xff\xff");
    const std::map<std::string, std::string> before = Snapshot(dir);

    RunOutcome run = RunPipeline(dir, resume);
    const absl::Status& status = run.epochs.status();
    LOG(INFO) << c.name << ": resume " << resume << ": " << status;
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(log));
    // Neither a database nor the log was touched: the damaged directory is
    // left for a person (or `ckpt verify`, `ckpt recover`) to look at.
    EXPECT_TRUE(Snapshot(dir) == before) << "the failed resume changed files";
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDamage, DamagedCommitLogTest,
    ::testing::Values(
        CommitLogDamage{
            "GarbageBytes",
            [](const std::string& path) {
              ASSERT_TRUE(
                  WriteFileAtomically(path, "garbage\xff\xff\xff").ok());
            }},
        CommitLogDamage{"FlippedBytes",
                        [](const std::string& path) {
                          // Overwrites the start: format_version's tag.
                          WriteInPlace(path, "\xff\xff\xff\xff");
                        }},
        CommitLogDamage{"TruncatedByOneByte",
                        [](const std::string& path) {
                          // Cuts into the last epoch's entry, so its length
                          // prefix overruns the file.
                          Truncate(path, FileSize(path) - 1);
                        }},
        // A zero-length file parses as an empty message, which would list
        // no committed epoch: a resume must not take it for a fresh start
        // and overwrite the checkpoints.
        CommitLogDamage{"Empty",
                        [](const std::string& path) { Truncate(path, 0); }},
        CommitLogDamage{"OneBitFlippedInTheLastEntry",
                        [](const std::string& path) {
                          XorByte(path, FileSize(path) - 1, 0x01);
                        }},
        CommitLogDamage{"Deleted",
                        [](const std::string& path) {
                          ASSERT_TRUE(RemoveRecursively(path).ok());
                        }}),
    [](const ::testing::TestParamInfo<CommitLogDamage>& info) {
      return info.param.name;
    });

// Both copies of the commit log deleted: a latest resume must not take the
// directory for a new one and overwrite five epochs; `ckpt recover` rebuilds
// the log from the databases, and the resume then continues exactly.
TEST(LostCommitLogTest, LatestRefusesAndRecoverRebuildsTheLog) {
  const std::string dir = NewTempDir("lost_log");
  {
    RunOutcome full = RunPipeline(dir, "");
    ASSERT_TRUE(full.epochs.ok()) << full.epochs.status();
  }
  const std::string log = JoinPath(dir, kCommitLogFileName);
  ASSERT_TRUE(RemoveRecursively(log).ok());
  ASSERT_TRUE(
      RemoveRecursively(absl::StrCat(log, kPreviousCommitLogSuffix)).ok());
  const std::map<std::string, std::string> before = Snapshot(dir);

  RunOutcome refused = RunPipeline(dir, "latest");
  EXPECT_EQ(refused.epochs.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(refused.epochs.status().message(),
            absl::StrCat("resume_from_epoch=latest: ", dir,
                         " holds 10 database(s) of this job (trainer_0.0, "
                         "trainer_0.1, trainer_0.2, trainer_0.3, ...) but no "
                         "commit log ",
                         log,
                         ", so which epochs are complete cannot be known. "
                         "Rebuild the log from the databases that verify "
                         "with `ckpt recover ",
                         dir,
                         "`, or start from scratch on purpose: run without "
                         "--resume_from_epoch, or with another "
                         "--checkpoint_dir."));
  EXPECT_TRUE(Snapshot(dir) == before) << "the refused resume changed files";

  // One database of epoch 4 is damaged: recover lists epochs 0..3 only.
  XorByte(DataTable(CheckpointDbPath(dir, "trainer_1", 4)), 100, 0x10);
  testing::ChildRun recover =
      testing::RunBinary(testing::RunfilesPath("tools/ckpt"), {"recover", dir});
  EXPECT_EQ(recover.exit_code(), 0) << recover.Describe();
  ASSERT_EQ(recover.lines.size(), 6u) << recover.Describe();
  EXPECT_EQ(recover.lines[0],
            "recovered epoch 0: trainer_0, trainer_1 (582 bytes)");
  EXPECT_TRUE(absl::StartsWith(recover.lines[4],
                               "skipped epoch 4: no database that verifies for "
                               "trainer_1; "))
      << recover.lines[4];
  EXPECT_EQ(recover.lines[5],
            absl::StrCat("wrote ", log, " listing epochs 0, 1, 2, 3"));
  EXPECT_THAT(CommittedEpochs(dir), ElementsAre(0, 1, 2, 3));

  RunOutcome resumed = RunPipeline(dir, "latest");
  ASSERT_TRUE(resumed.epochs.ok()) << resumed.epochs.status();
  EXPECT_EQ(resumed.stats.resumed_from, std::optional<int64_t>(3));
  EXPECT_THAT(resumed.totals, ElementsAre(145, 145));
}

}  // namespace
}  // namespace jobgraph

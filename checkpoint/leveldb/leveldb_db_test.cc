// LevelDB-specific behaviour; the general DB contract is in db_test.cc.

#include "checkpoint/leveldb/leveldb_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "leveldb/db.h"
#include "leveldb/options.h"

namespace jobgraph {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing_util::TempDir;

int64_t FileSize(const std::string& path) {
  struct stat st;
  CHECK_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_size;
}

std::vector<std::string> FilesWithSuffix(const std::string& dir,
                                         absl::string_view suffix) {
  std::vector<std::string> result;
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    if (absl::EndsWith(name, suffix)) result.push_back(name);
  }
  return result;
}

std::string Value(int i, size_t size) {
  std::string value(size, '\0');
  for (size_t j = 0; j < size; ++j) {
    value[j] = static_cast<char>((i * 131 + j * 7) >> 3);
  }
  return value;
}

// 40 values of 256 KiB with a 1 MiB memtable: the log rotates ~10 times, so
// without the durability pass most of the data would sit in logs that
// LevelDB closed without fsync.
void WriteRotatingDb(const std::string& path, const LevelDbOptions& options) {
  std::unique_ptr<DB> db =
      LevelDbType(options).Open(path, DbMode::kNew).value();
  {
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(
          writer->Put(absl::StrFormat("blob_%04d", i), Value(i, 256 << 10))
              .ok());
    }
  }
  ASSERT_TRUE(db->Close().ok());
}

void ExpectRotatingDbIntact(const std::string& path) {
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  int i = 0;
  for (; cursor->Valid(); cursor->Next(), ++i) {
    ASSERT_EQ(cursor->key(), absl::StrFormat("blob_%04d", i));
    ASSERT_TRUE(cursor->value() == Value(i, 256 << 10)) << i;
  }
  EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  EXPECT_EQ(i, 40);
}

LevelDbOptions SmallMemtable() {
  LevelDbOptions options;
  options.write_buffer_size = 1 << 20;
  options.max_file_size = 1 << 20;
  return options;
}

// WriteRotatingDb without the memtable flush at close: the last values stay
// in the log, which only LevelDB's recovery reads.
void WriteUnflushedDb(const std::string& path) {
  LevelDbOptions options = SmallMemtable();
  options.flush_memtable_on_close = false;
  WriteRotatingDb(path, options);
}

TEST(LevelDbTest, CloseFlushesTheMemtableAndSyncsEverything) {
  TempDir dir;
  const std::string path = dir.Join("node.1");
  WriteRotatingDb(path, SmallMemtable());
  // Every value now lives in a table file; what is left of the logs is at most
  // the empty batch written to check for background errors.
  EXPECT_THAT(FilesWithSuffix(path, ".ldb"), Not(IsEmpty()));
  for (const std::string& log : FilesWithSuffix(path, ".log")) {
    EXPECT_LT(FileSize(JoinPath(path, log)), 100) << log;
  }
  // LevelDB's info log goes to VLOG, not into the checkpoint.
  EXPECT_THAT(ListDir(path).value(), Not(Contains("LOG")));
  ExpectRotatingDbIntact(path);
}

// Every file of `dir` with its size, modification time (ns) and bytes.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name);
    struct stat st;
    CHECK_EQ(::stat(path.c_str(), &st), 0) << path;
    files[name] =
        absl::StrCat(st.st_size, " ", st.st_mtim.tv_sec, ".",
                     st.st_mtim.tv_nsec, " ", ReadFileToString(path).value());
  }
  return files;
}

TEST(LevelDbTest, WithoutMemtableFlushTheLogsHoldTheTailAndReplay) {
  TempDir dir;
  const std::string path = dir.Join("node.1");
  WriteUnflushedDb(path);
  int64_t log_bytes = 0;
  for (const std::string& log : FilesWithSuffix(path, ".log")) {
    log_bytes += FileSize(JoinPath(path, log));
  }
  EXPECT_GT(log_bytes, 256 << 10);  // At least one value only in a log.
  const std::map<std::string, std::string> before = Snapshot(path);
  ExpectRotatingDbIntact(path);  // The open replays it...
  // ... in a private copy: LevelDB's recovery never touches the database.
  EXPECT_TRUE(Snapshot(path) == before) << "recovery changed the database";
  ExpectRotatingDbIntact(path);
}

// Points $TMPDIR, where recovery copies go, at a directory of the test's.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const std::string& dir) {
    const char* old = std::getenv("TMPDIR");
    if (old != nullptr) old_ = old;
    CHECK(CreateDir(dir).ok());
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_.has_value()) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

// A database read through LevelDB's recovery is checked like any other, and
// the copy the recovery ran on is gone once the database is closed.
TEST(LevelDbTest, RecoveredDatabaseIsVerifiedAndItsCopyRemoved) {
  TempDir dir;
  const std::string scratch = dir.Join("tmp");
  ScopedTmpdir tmpdir(scratch);
  const std::string path = dir.Join("node.1");
  WriteUnflushedDb(path);
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
    EXPECT_THAT(ListDir(scratch).value(), ::testing::SizeIs(1));
    DB::FileCheck check;
    check.record_required = true;
    EXPECT_TRUE(db->VerifyFiles(check).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());

  ASSERT_TRUE(RemoveRecursively(JoinPath(path, "JOBGRAPH_FILES")).ok());
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
    DB::FileCheck check;
    check.record_required = true;
    const absl::Status status = db->VerifyFiles(check);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("LevelDB database ", path,
                                       " is damaged: its file list "
                                       "JOBGRAPH_FILES is missing")));
  }
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());
}

// LevelDB's recovery asserts (aborts) on a log numbered 0, a name it never
// writes: such a file is damage, reported before the recovery runs.
TEST(LevelDbTest, RecoveryOfADatabaseWithALogNumberedZeroIsDataLoss) {
  TempDir dir;
  const std::string scratch = dir.Join("tmp");
  ScopedTmpdir tmpdir(scratch);
  const std::string path = dir.Join("node.1");
  WriteUnflushedDb(path);
  ASSERT_TRUE(RemoveRecursively(JoinPath(path, "JOBGRAPH_FILES")).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(path, "000000.log"), "").ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType().Open(path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(),
              HasSubstr(absl::StrCat("LevelDB database ", path,
                                     " is damaged: it holds 000000.log")));
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());
  // The path is free again.
  ASSERT_TRUE(RemoveRecursively(JoinPath(path, "000000.log")).ok());
  EXPECT_TRUE(LevelDbType().Open(path, DbMode::kRead).ok());
}

// The recovery of a database with data in its log (LevelDB's DB::Open, on a
// copy) checks the database against its file list first: a log that grew
// after the database was closed is damage, not data to replay.
TEST(LevelDbTest, DataAddedToTheLogOfAFinishedDatabaseIsDataLoss) {
  TempDir dir;
  const std::string scratch = dir.Join("tmp");
  ScopedTmpdir tmpdir(scratch);
  const std::string path = dir.Join("node.1");
  WriteUnflushedDb(path);
  std::vector<std::string> logs = FilesWithSuffix(path, ".log");
  ASSERT_FALSE(logs.empty());
  const std::string log = JoinPath(path, logs.back());
  const std::string bytes = ReadFileToString(log).value();
  ASSERT_TRUE(WriteFileAtomically(log, bytes + "x").ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType().Open(path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(),
              HasSubstr(absl::StrCat(log, " has ", bytes.size() + 1, " bytes, ",
                                     bytes.size(), " were written")));
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());
}

// A committed checkpoint is immutable: reading it (cursor, Get, twice over)
// creates, writes, renames and deletes nothing, where LevelDB's DB::Open
// would write a new MANIFEST-* file and log and delete the old ones.
TEST(LevelDbTest, ReadingAFinishedDatabaseChangesNothing) {
  TempDir dir;
  const std::string path = dir.Join("node.1");
  WriteRotatingDb(path, SmallMemtable());
  const std::map<std::string, std::string> before = Snapshot(path);
  for (int pass = 0; pass < 2; ++pass) {
    ExpectRotatingDbIntact(path);
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
    EXPECT_EQ(db->Get("blob_0007").value(), Value(7, 256 << 10));
    EXPECT_EQ(db->Get("blob_0007x").status().code(),
              absl::StatusCode::kNotFound);
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    cursor->Seek("blob_0039");
    ASSERT_TRUE(cursor->Valid());
    EXPECT_EQ(cursor->key(), "blob_0039");
    cursor->Next();
    EXPECT_FALSE(cursor->Valid());
    cursor.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  EXPECT_TRUE(Snapshot(path) == before) << "a read changed the database";
}

// Many small batches into a small memtable: many table files, some merged
// by compactions; the read-only reader merges them back in key order.
TEST(LevelDbTest, ReadingManyTablesMergesThemInKeyOrder) {
  TempDir dir;
  const std::string path = dir.Join("node.1");
  {
    DbOptions small_batches;
    small_batches.writer_batch_bytes = 64 << 10;
    std::unique_ptr<DB> db = LevelDbType(SmallMemtable())
                                 .Open(path, DbMode::kNew, small_batches)
                                 .value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    // Written in an order unlike the key order.
    for (int k = 0; k < 40; ++k) {
      const int i = (k * 17) % 40;
      ASSERT_TRUE(
          writer->Put(absl::StrFormat("blob_%04d", i), Value(i, 256 << 10))
              .ok());
    }
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  ASSERT_GT(FilesWithSuffix(path, ".ldb").size(), 2u);
  const std::map<std::string, std::string> before = Snapshot(path);
  ExpectRotatingDbIntact(path);
  EXPECT_TRUE(Snapshot(path) == before) << "a read changed the database";
}

// Every byte of every file of a finished database, flipped one at a time,
// is detected: opening fails or VerifyFiles does, always as DataLoss.
TEST(LevelDbTest, EveryFlippedByteOfEveryFileIsDetected) {
  TempDir dir;
  const std::string path = dir.Join("node.1");
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(writer->Put(absl::StrCat("k", i), Value(i, 100)).ok());
    }
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  auto verify = [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<DB>> db =
        LevelDbType().Open(path, DbMode::kRead);
    if (!db.ok()) return db.status();
    absl::Status status = (*db)->VerifyFiles(DB::FileCheck{});
    (*db)->Close().IgnoreError();
    return status;
  };
  ASSERT_TRUE(verify().ok()) << verify();
  const std::vector<std::string> names = ListDir(path).value();
  EXPECT_THAT(names, Contains("JOBGRAPH_FILES"));
  int flips = 0;
  for (const std::string& name : names) {
    const std::string file = JoinPath(path, name);
    const std::string original = ReadFileToString(file).value();
    for (size_t offset = 0; offset < original.size(); ++offset) {
      std::string damaged = original;
      damaged[offset] = static_cast<char>(damaged[offset] ^ 0x04);
      ASSERT_TRUE(WriteFileAtomically(file, damaged).ok());
      const absl::Status status = verify();
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss)
          << name << " offset " << offset << ": " << status;
      ++flips;
    }
    ASSERT_TRUE(WriteFileAtomically(file, original).ok());
  }
  EXPECT_GT(flips, 200);
  EXPECT_TRUE(verify().ok()) << verify();
}

TEST(LevelDbTest, NewNeverCreatesParentDirectories) {
  TempDir dir;
  const std::string path = dir.Join("no_such_dir/node.0");
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  EXPECT_THAT(db.status().message(), HasSubstr("does not exist"));
  EXPECT_FALSE(PathExists(dir.Join("no_such_dir")).value());
}

TEST(LevelDbTest, NewOnAnExistingEmptyDirectoryIsAlreadyExists) {
  TempDir dir;
  const std::string path = dir.Join("node.0");
  ASSERT_TRUE(CreateDir(path).ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  EXPECT_THAT(ListDir(path).value(), IsEmpty());
}

TEST(LevelDbTest, ReadOfADirectoryThatIsNotADatabaseTouchesNothing) {
  TempDir dir;
  const std::string path = dir.Join("node.0");
  ASSERT_TRUE(CreateDir(path).ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  EXPECT_THAT(db.status().message(), HasSubstr("CURRENT"));
  EXPECT_THAT(ListDir(path).value(), IsEmpty());  // No LOCK file left.
}

TEST(LevelDbTest, ReadOfARegularFileFails) {
  TempDir dir;
  const std::string path = dir.Join("file");
  ASSERT_TRUE(WriteFileAtomically(path, "not a db").ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kRead);
  EXPECT_FALSE(db.ok());
  EXPECT_THAT(db.status().message(), HasSubstr(path));
}

TEST(LevelDbTest, OutOfRangeTuningIsRejectedNotClipped) {
  TempDir dir;
  const std::string path = dir.Join("db");
  LevelDbOptions options;
  // LevelDB 1.23 would silently turn this into a 64 KiB memtable.
  options.write_buffer_size = size_t{2} << 30;
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType(options).Open(path, DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(db.status().message(), HasSubstr("write_buffer_size"));
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  EXPECT_FALSE(PathExists(path).value());

  options = LevelDbOptions();
  options.max_file_size = 1000;
  db = LevelDbType(options).Open(path, DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(db.status().message(), HasSubstr("max_file_size"));
}

TEST(LevelDbTest, CorruptTableIsDataLossWhenVerifying) {
  TempDir dir;
  const std::string path = dir.Join("db");
  const std::string value = Value(1, 1 << 20);
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->Put("weights", value).ok());
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  std::vector<std::string> tables = FilesWithSuffix(path, ".ldb");
  ASSERT_EQ(tables.size(), 1u);
  const std::string table = JoinPath(path, tables[0]);
  {
    int fd = ::open(table.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char byte;
    ASSERT_EQ(::pread(fd, &byte, 1, 4096), 1);
    byte = static_cast<char>(byte ^ 0x40);
    ASSERT_EQ(::pwrite(fd, &byte, 1, 4096), 1);
    ::close(fd);
  }
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  EXPECT_FALSE(cursor->Valid());
  EXPECT_EQ(cursor->status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cursor->status().message(), HasSubstr(path));
  EXPECT_EQ(db->Get("weights").status().code(), absl::StatusCode::kDataLoss);
  cursor.reset();

  // Without verification the flipped bit goes unnoticed: the caller's own
  // checksums must catch it.
  ASSERT_TRUE(db->Close().ok());
  DbOptions no_verify;
  no_verify.verify_checksums = false;
  db = LevelDbType().Open(path, DbMode::kRead, no_verify).value();
  cursor = db->NewCursor();
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->value().size(), value.size());
  EXPECT_FALSE(cursor->value() == value);
}

// The footer of a table has no checksum; LevelDB allocates the index block
// at the size it records before reading it. A size past the end of the file
// is damage, not a 2^56-byte allocation (found by ckpt_fuzzer).
TEST(LevelDbTest, TableFooterPointingPastTheEndIsDataLoss) {
  TempDir dir;
  const std::string path = dir.Join("db");
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
    ASSERT_TRUE(db->NewWriter().value()->Put("k", "v").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  std::vector<std::string> tables = FilesWithSuffix(path, ".ldb");
  ASSERT_EQ(tables.size(), 1u);
  const std::string table = JoinPath(path, tables[0]);
  std::string bytes = ReadFileToString(table).value();
  ASSERT_GT(bytes.size(), 48u);
  // Metaindex handle (0, 0); index handle (0, 2^56), as varints; padding;
  // the magic number stays.
  std::string footer = {0, 0, 0};
  for (int i = 0; i < 8; ++i) footer.push_back(static_cast<char>(0x80));
  footer.push_back(1);
  footer.resize(40, '\0');
  bytes.replace(bytes.size() - 48, 40, footer);
  ASSERT_TRUE(WriteFileAtomically(table, bytes).ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType().Open(path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(),
              HasSubstr("places its index block (72057594037927936 bytes at "
                        "offset 0) past the end"));
}

// A database that has no file list (written by another program) and data in
// its log is recovered by LevelDB on a copy; its table footers are checked
// first, since LevelDB's Table::Open would trust them with an allocation.
TEST(LevelDbTest, RecoveredDatabaseWithAFooterPastTheEndIsDataLoss) {
  TempDir dir;
  const std::string scratch = dir.Join("tmp");
  ScopedTmpdir tmpdir(scratch);
  const std::string path = dir.Join("node.1");
  WriteRotatingDb(path, SmallMemtable());
  {
    // Another program adds a key: LevelDB leaves it in the log.
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), path, &raw).ok());
    std::unique_ptr<leveldb::DB> other(raw);
    leveldb::WriteOptions sync;
    sync.sync = true;
    ASSERT_TRUE(other->Put(sync, "zzz", "added").ok());
  }
  ASSERT_TRUE(RemoveRecursively(JoinPath(path, "JOBGRAPH_FILES")).ok());
  std::vector<std::string> tables = FilesWithSuffix(path, ".ldb");
  ASSERT_FALSE(tables.empty());
  const std::string table = JoinPath(path, tables[0]);
  std::string bytes = ReadFileToString(table).value();
  std::string footer = {0, 0, 0};
  for (int i = 0; i < 8; ++i) footer.push_back(static_cast<char>(0x80));
  footer.push_back(1);
  footer.resize(40, '\0');
  bytes.replace(bytes.size() - 48, 40, footer);
  ASSERT_TRUE(WriteFileAtomically(table, bytes).ok());
  const std::map<std::string, std::string> before = Snapshot(path);
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType().Open(path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(),
              HasSubstr(absl::StrCat("the footer of table ", table,
                                     " places its index block")));
  EXPECT_TRUE(Snapshot(path) == before);
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());
}

// LevelDB's block reader adds an entry's key and value lengths in 32 bits:
// a damaged entry whose lengths overflow would make it copy 4 GiB from past
// the block. Every block is checked first, whatever the read verifies.
TEST(LevelDbTest, BlockEntryWhoseLengthsOverflowIsDataLoss) {
  TempDir dir;
  const std::string path = dir.Join("db");
  {
    std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
    ASSERT_TRUE(
        db->NewWriter().value()->Put("key", std::string(100, 'v')).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  std::vector<std::string> tables = FilesWithSuffix(path, ".ldb");
  ASSERT_EQ(tables.size(), 1u);
  const std::string table = JoinPath(path, tables[0]);
  std::string bytes = ReadFileToString(table).value();
  // The first entry of the data block at offset 0: shared 0, non_shared 11
  // ("key" and LevelDB's 8-byte tag), value length 100, then the key.
  ASSERT_EQ(bytes.substr(0, 6), std::string("\x00\x0b\x64key", 6));
  // non_shared 0xfffffff7 (five bytes) and value length 32, over the key:
  // the sum wraps to 23 bytes, which fit.
  bytes.replace(1, 6, std::string("\xf7\xff\xff\xff\x0f\x20", 6));
  ASSERT_TRUE(WriteFileAtomically(table, bytes).ok());
  for (bool verify_checksums : {false, true}) {
    DbOptions options;
    options.verify_checksums = verify_checksums;
    std::unique_ptr<DB> db =
        LevelDbType().Open(path, DbMode::kRead, options).value();
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    EXPECT_FALSE(cursor->Valid());
    EXPECT_EQ(cursor->status().code(), absl::StatusCode::kDataLoss)
        << cursor->status();
    if (!verify_checksums) {
      EXPECT_THAT(cursor->status().message(),
                  HasSubstr("malformed entries in the block at offset 0"));
    }
  }
}

}  // namespace
}  // namespace jobgraph

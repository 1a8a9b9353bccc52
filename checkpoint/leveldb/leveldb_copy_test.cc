// LevelDbType::Copy (leveldb_copy.cc): the checked file copy of a finished
// database. CopyCheckpointDb, which installs such a copy, is tested in
// checkpoint/ops/copy_db_test.cc.

#include <errno.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
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
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "checkpoint/util/pause_gate.h"
#include "checkpoint/util/test_util.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Gt;
using ::testing::IsEmpty;
using testing_util::TempDir;

constexpr int kValues = 40;

std::string Key(int i) { return absl::StrFormat("blob_%04d", i); }

std::string Value(int i, size_t size) {
  std::string value(size, '\0');
  for (size_t j = 0; j < size; ++j) {
    value[j] = static_cast<char>((i * 131 + j * 7) >> 3);
  }
  return value;
}

// 1 MiB tables and memtable: 40 values of 256 KiB make about ten tables.
LevelDbOptions SmallTables() {
  LevelDbOptions options;
  options.write_buffer_size = 1 << 20;
  options.max_file_size = 1 << 20;
  return options;
}

// A database of `values` values of 256 KiB, written with `options` (`db`
// write_only: by the direct writer, as Save writes; else through LevelDB).
void WriteDb(const std::string& path, const LevelDbOptions& options,
             const DbOptions& db_options, int values = kValues) {
  std::unique_ptr<DB> db =
      LevelDbType(options).Open(path, DbMode::kNew, db_options).value();
  {
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (int i = 0; i < values; ++i) {
      ASSERT_TRUE(writer->Put(Key(i), Value(i, 256 << 10)).ok());
    }
  }
  ASSERT_TRUE(db->Close().ok());
}

void WriteDirectDb(const std::string& path) {
  DbOptions db_options;
  db_options.write_only = true;
  WriteDb(path, SmallTables(), db_options);
}

// Written through LevelDB without the memtable flush at close: the last
// values stay in a log, which only LevelDB's recovery reads.
void WriteUnflushedDb(const std::string& path) {
  LevelDbOptions options = SmallTables();
  options.flush_memtable_on_close = false;
  WriteDb(path, options, DbOptions());
}

// Reads every value back with the registered type's reader and checks the
// files against their record.
void ExpectDbIntact(const std::string& path) {
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
  {
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    int i = 0;
    for (; cursor->Valid(); cursor->Next(), ++i) {
      ASSERT_EQ(cursor->key(), Key(i));
      ASSERT_TRUE(cursor->value() == Value(i, 256 << 10)) << i;
    }
    EXPECT_TRUE(cursor->status().ok()) << cursor->status();
    EXPECT_EQ(i, kValues);
  }
  DB::FileCheck check;
  check.record_required = true;
  check.read_contents = true;
  const absl::Status verified = db->VerifyFiles(check);
  EXPECT_TRUE(verified.ok()) << verified;
  ASSERT_TRUE(db->Close().ok());
}

// Every file of `dir` and its bytes.
std::map<std::string, std::string> Contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    files[name] = ReadFileToString(JoinPath(dir, name)).value();
  }
  return files;
}

int64_t TotalBytes(const std::map<std::string, std::string>& files) {
  int64_t bytes = 0;
  for (const auto& [name, contents] : files) bytes += contents.size();
  return bytes;
}

std::vector<std::string> Tables(const std::string& dir) {
  std::vector<std::string> tables;
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    if (absl::EndsWith(name, ".ldb")) tables.push_back(name);
  }
  return tables;
}

void FlipByte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x01));
  ASSERT_TRUE(f.good()) << path;
}

std::string Hex8(uint32_t crc) {
  return absl::StrCat(absl::Hex(crc, absl::kZeroPad8));
}

// Copy's message for `table`, whose bytes are `damaged` where its record
// says `original`.
std::string CrcMismatch(const std::string& from, const std::string& to,
                        const std::string& table, const std::string& damaged,
                        const std::string& original) {
  return absl::StrCat("cannot copy LevelDB database ", from, " to ", to, ": ",
                      table, " has CRC-32C ", Hex8(Crc32c(damaged)),
                      ", JOBGRAPH_FILES records ", Hex8(Crc32c(original)),
                      "; the database is damaged");
}

// Points $TMPDIR, where recovery copies go, at `dir` while it lives.
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

class LevelDbCopyTest : public ::testing::Test {
 protected:
  void TearDown() override { io_faults::Disarm(); }

  TempDir dir_;
  const std::string from_ = dir_.Join("trainer_0.3");
  const std::string to_ = dir_.Join("copy");
};

TEST_F(LevelDbCopyTest, CopiesEveryListedFileByteForByte) {
  WriteDirectDb(from_);
  ASSERT_THAT(Tables(from_).size(), Gt(3u));
  const std::map<std::string, std::string> source = Contents(from_);

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // The direct writer lists every file of the directory, LOCK included:
  // the copy has them all, and JOBGRAPH_FILES, with the same bytes.
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_THAT(source, Contains(::testing::Key("LOCK")));
  EXPECT_EQ(*bytes, TotalBytes(source));
  // The source was only read.
  EXPECT_TRUE(Contents(from_) == source);
  ExpectDbIntact(to_);
  EXPECT_TRUE(LevelDbType().Exists(to_).value());
}

// A copy given a pause gate that a save holds waits before its first
// chunk, with nothing of the database written yet, and copies it all once
// the gate opens.
TEST_F(LevelDbCopyTest, WaitsAtItsPauseGateBeforeWriting) {
  WriteDirectDb(from_);
  const std::map<std::string, std::string> source = Contents(from_);
  PauseGate gate;
  CopyOptions options;
  options.pause = &gate;
  absl::StatusOr<int64_t> bytes = absl::UnknownError("not run");
  EXPECT_TRUE(testing_util::RunStoppedAtGate(
      gate, [&] { bytes = LevelDbType().Copy(from_, to_, options); },
      [&] { EXPECT_EQ(TotalBytes(Contents(to_)), 0); }));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_EQ(*bytes, TotalBytes(source));
  EXPECT_EQ(gate.blocked(), 1);
}

// A database whose log still holds data opens through LevelDB's recovery
// (on a private copy), which checks the copy's files against its record.
// One table past StagedDirectWriter::kLargeAfterBytes (large staging
// buffers, several reads into them) and a byte flipped near its end: copied
// byte for byte with O_DIRECT and without it (where each path reads into a
// buffer of its own), the damage found either way; the copy checks its
// pause gate chunk by chunk.
TEST_F(LevelDbCopyTest, CopiesALargeTableWithAndWithoutDirectIo) {
  LevelDbOptions options;
  options.write_buffer_size = 64 << 20;
  options.max_file_size = 64 << 20;
  DbOptions db_options;
  db_options.write_only = true;
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, options, db_options, 100));  // 25 MiB
  ASSERT_EQ(Tables(from_).size(), 1u);
  const std::string table = JoinPath(from_, Tables(from_)[0]);
  const std::map<std::string, std::string> source = Contents(from_);
  ASSERT_GT(source.at(Tables(from_)[0]).size(), size_t{20} << 20);

  // A copy given a gate checks it before every chunk: at least once per
  // 8 MiB (the largest chunk) of every file, and before its fsyncs.
  int64_t least_checks = 1;
  for (const auto& [name, contents] : source) {
    least_checks +=
        (static_cast<int64_t>(contents.size()) + (8 << 20) - 1) / (8 << 20);
  }
  ASSERT_GE(least_checks, 5);
  for (bool direct_io : {true, false}) {
    SCOPED_TRACE(direct_io ? "O_DIRECT" : "through the page cache");
    LevelDbOptions copy_options;
    copy_options.direct_io = direct_io;
    PauseGate gate;
    CopyOptions options;
    options.pause = &gate;
    absl::StatusOr<int64_t> bytes =
        LevelDbType(copy_options).Copy(from_, to_, options);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(Contents(to_) == source);
    EXPECT_EQ(*bytes, TotalBytes(source));
    EXPECT_GE(gate.checks(), least_checks);
    EXPECT_EQ(gate.blocked(), 0);
    ASSERT_TRUE(RemoveRecursively(to_).ok());
  }

  const std::string original = source.at(Tables(from_)[0]);
  ASSERT_NO_FATAL_FAILURE(FlipByte(table, original.size() - 5000));
  const std::string damaged = ReadFileToString(table).value();
  for (bool direct_io : {true, false}) {
    SCOPED_TRACE(direct_io ? "O_DIRECT" : "through the page cache");
    LevelDbOptions copy_options;
    copy_options.direct_io = direct_io;
    absl::StatusOr<int64_t> bytes =
        LevelDbType(copy_options).Copy(from_, to_, CopyOptions());
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(bytes.status().message(),
              CrcMismatch(from_, to_, table, damaged, original));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }
}

TEST_F(LevelDbCopyTest, CopiesADatabaseThatNeedsRecovery) {
  const std::string scratch = dir_.Join("tmp");
  ScopedTmpdir tmpdir(scratch);
  WriteUnflushedDb(from_);
  const std::map<std::string, std::string> source = Contents(from_);
  int64_t log_bytes = 0;
  for (const auto& [name, contents] : source) {
    if (absl::EndsWith(name, ".log")) log_bytes += contents.size();
  }
  ASSERT_GT(log_bytes, 256 << 10);  // At least one value only in a log.

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_EQ(*bytes, TotalBytes(source));
  ExpectDbIntact(to_);
  // The recovery's copy is gone with the DB that read it.
  EXPECT_THAT(ListDir(scratch).value(), IsEmpty());
}

TEST_F(LevelDbCopyTest, FilesTheListDoesNotNameStayBehind) {
  WriteDirectDb(from_);
  const std::map<std::string, std::string> listed = Contents(from_);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(from_, "LOG"), "info").ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(from_, "LOG.old"), "old").ok());
  ASSERT_TRUE(LevelDbType().Copy(from_, to_, CopyOptions()).ok());
  EXPECT_TRUE(Contents(to_) == listed);
  ExpectDbIntact(to_);
}

TEST_F(LevelDbCopyTest, AFlippedByteIsDataLossNamingTheFile) {
  WriteDirectDb(from_);
  const std::string table = JoinPath(from_, Tables(from_)[1]);
  const std::string original = ReadFileToString(table).value();
  ASSERT_NO_FATAL_FAILURE(FlipByte(table, original.size() / 2));
  const std::string damaged = ReadFileToString(table).value();

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bytes.status().message(),
            CrcMismatch(from_, to_, table, damaged, original));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbCopyTest, ATruncatedFileIsDataLossNamingTheFile) {
  WriteDirectDb(from_);
  const std::string table = JoinPath(from_, Tables(from_)[2]);
  const int64_t size = ReadFileToString(table).value().size();
  ASSERT_EQ(::truncate(table.c_str(), size - 100), 0);

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": ", table, " has ", size - 100,
                         " bytes, JOBGRAPH_FILES records ", size,
                         "; the database is damaged"));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbCopyTest, AMissingListedFileIsDataLossNamingTheFile) {
  WriteDirectDb(from_);
  const std::string table = JoinPath(from_, Tables(from_).back());
  ASSERT_EQ(::unlink(table.c_str()), 0);

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": ", table,
                         " is missing, though JOBGRAPH_FILES lists it; the "
                         "database is damaged"));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbCopyTest, ADamagedFileListIsDataLossNamingIt) {
  WriteDirectDb(from_);
  const std::string list = JoinPath(from_, "JOBGRAPH_FILES");
  const int64_t size = ReadFileToString(list).value().size();
  ASSERT_EQ(::truncate(list.c_str(), size - 1), 0);

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(bytes.status().message()),
      ::testing::StartsWith(absl::StrCat("cannot copy LevelDB database ", from_,
                                         " to ", to_, ": file list ", list)));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

// A list naming a path outside the database (a damaged or forged one) is
// refused before anything is read or written through it.
TEST_F(LevelDbCopyTest, AListedNameThatIsNotAFileNameIsDataLoss) {
  WriteDirectDb(from_);
  ASSERT_TRUE(WriteFileAtomically(dir_.Join("outside"), "secret").ok());
  const std::string list = JoinPath(from_, "JOBGRAPH_FILES");
  DbFileList forged;
  DbFile* file = forged.add_file();
  file->set_name("../outside");
  file->set_size(6);
  file->set_crc32c(Crc32c("secret"));
  ASSERT_TRUE(
      WriteFileAtomically(list, FrameChecksummed(forged.SerializeAsString()))
          .ok());

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": file list ", list,
                         " is damaged: it lists '../outside', which is not a "
                         "file of the database"));
  EXPECT_THAT(ListDir(dir_.path()).value(),
              ElementsAre("outside", "trainer_0.3"));
}

TEST_F(LevelDbCopyTest, WithoutAFileListTheFilesCannotBeChecked) {
  WriteDirectDb(from_);
  ASSERT_EQ(::unlink(JoinPath(from_, "JOBGRAPH_FILES").c_str()), 0);

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": it has no file list JOBGRAPH_FILES (it was "
                         "written by another program, or by jobgraph before "
                         "the list existed), so its files cannot be checked "
                         "as they are copied"));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbCopyTest, NoDatabaseAtTheSourceIsNotFound) {
  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": it does not exist"));

  // An empty directory (a database whose creation did not finish).
  ASSERT_TRUE(CreateDir(from_).ok());
  bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_,
                         ": it has neither CURRENT nor JOBGRAPH_FILES, so it "
                         "holds no finished database"));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbCopyTest, SomethingAtTheTargetIsLeftAlone) {
  WriteDirectDb(from_);
  ASSERT_TRUE(CreateDir(to_).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(to_, "mine"), "keep").ok());

  absl::StatusOr<int64_t> bytes = LevelDbType().Copy(from_, to_, CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      bytes.status().message(),
      absl::StrCat("cannot copy LevelDB database ", from_, " to ", to_, ": ",
                   to_, " already exists; a copy needs a fresh path"));
  EXPECT_THAT(ListDir(to_).value(), ElementsAre("mine"));
}

// Every write-side call of the copy failing in turn (a full disk): each
// failure is reported and leaves nothing at the target.
TEST_F(LevelDbCopyTest, AFailedWriteLeavesNoCopy) {
  WriteDirectDb(from_);
  io_faults::Arm(/*fail_at=*/int64_t{1} << 40, ENOSPC);  // only counts
  ASSERT_TRUE(LevelDbType().Copy(from_, to_, CopyOptions()).ok());
  const int64_t calls = io_faults::Calls();
  io_faults::Disarm();
  // mkdir, and per file a create, writes and a close; the fsyncs; the list.
  ASSERT_GT(calls, 3 * static_cast<int64_t>(Tables(from_).size()));
  ASSERT_TRUE(RemoveRecursively(to_).ok());
  for (int64_t fail_at = 1; fail_at <= calls; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("I/O call ", fail_at, " of ", calls));
    io_faults::Arm(fail_at, ENOSPC);
    absl::StatusOr<int64_t> bytes =
        LevelDbType().Copy(from_, to_, CopyOptions());
    io_faults::Disarm();
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(bytes.status().message()),
                ::testing::HasSubstr("No space left on device"));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }
  ASSERT_TRUE(LevelDbType().Copy(from_, to_, CopyOptions()).ok());
  ExpectDbIntact(to_);
}

}  // namespace
}  // namespace jobgraph

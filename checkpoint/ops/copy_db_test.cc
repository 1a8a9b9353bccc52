// CopyCheckpointDb (save_load_ops.h): a checked copy of a checkpoint
// database, put in place by the commit protocol of WriteCheckpointDb; and
// PackCheckpointDb / InstallPackedCheckpointDb, the same copy split between
// two machines. The LevelDB file copy itself is tested in
// checkpoint/leveldb/leveldb_copy_test.cc, the default copy in
// checkpoint/db/memory_db_test.cc.

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/db/memory_db.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using testing_util::TempDir;

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

std::vector<std::string> Tables(const std::string& db) {
  std::vector<std::string> tables;
  const std::vector<std::string> names = ListDir(db).value();
  for (const std::string& name : names) {
    if (absl::EndsWith(name, ".ldb")) tables.push_back(JoinPath(db, name));
  }
  return tables;
}

std::string Hex8(uint32_t crc) {
  return absl::StrCat(absl::Hex(crc, absl::kZeroPad8));
}

// The message as a std::string, for gMock's string matchers.
std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// LevelDB with tables of 1 MiB (the least it allows), so that a few MiB of
// values make several table files.
LevelDbOptions SmallTables() {
  LevelDbOptions options;
  options.max_file_size = 1 << 20;
  return options;
}

// The LevelDB type, except that Install always fails: an error after the
// copy (or the unpacked copy) is complete.
class InstallFailsType final : public DbType {
 public:
  absl::StatusOr<bool> Exists(const std::string& path) const override {
    return leveldb_.Exists(path);
  }
  absl::Status CheckInstallable(const std::string& path) const override {
    return leveldb_.CheckInstallable(path);
  }
  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override {
    return absl::UnavailableError(
        absl::StrCat("install of ", temp_path, " refused by the test"));
  }
  absl::Status Remove(const std::string& path) const override {
    return leveldb_.Remove(path);
  }
  absl::StatusOr<int64_t> Copy(const std::string& from, const std::string& to,
                               const CopyOptions& options) const override {
    return leveldb_.Copy(from, to, options);
  }
  absl::StatusOr<std::string> Pack(const std::string& from) const override {
    return leveldb_.Pack(from);
  }
  absl::StatusOr<int64_t> Unpack(absl::string_view packed,
                                 const std::string& to) const override {
    return leveldb_.Unpack(packed, to);
  }

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override {
    return leveldb_.Open(path, mode, options);
  }

 private:
  const LevelDbType leveldb_;
};

class CopyCheckpointDbTest : public ::testing::Test {
 protected:
  CopyCheckpointDbTest() {
    CHECK(CreateDir(local_).ok());
    CHECK(CreateDir(shared_).ok());
  }

  void TearDown() override {
    Failpoints::DisableAll();
    WaitForBackgroundDeletes();
    memory_db::Clear();
  }

  // Writes epoch `epoch` of trainer_0 into `path`: "big", 3 MiB in chunks
  // of 256 KiB, larger than a table, and "small"; `seed` varies the values.
  void Save(const DbType& type, const std::string& path, int64_t epoch,
            int64_t seed) {
    Tensor* big = big_.Reset(
        std::make_unique<Tensor>(INT64, std::vector<int64_t>{3 << 20 >> 3}));
    for (int64_t i = 0; i < big->numel(); ++i) {
      big->mutable_data<int64_t>()[i] = i * 1000003 + seed;
    }
    small_.Reset(std::make_unique<Tensor>(Tensor::FromVector<float>(
        {1.5f, -2.0f, static_cast<float>(seed)}, {3})));
    CheckpointDbOptions options;
    options.node = "trainer_0";
    options.epoch = epoch;
    options.serialization.chunk_bytes = 256 << 10;
    absl::StatusOr<int64_t> written = WriteCheckpointDb(
        type, path, {{"big", &big_}, {"small", &small_}}, options);
    ASSERT_TRUE(written.ok()) << written.status();
  }

  // Loads "big" and "small" from the LevelDB database at `path` with the
  // Load op and compares them with the ones saved last.
  void ExpectLoads(const std::string& path) {
    OperatorDef def;
    def.set_type("Load");
    def.add_output("big");
    def.add_output("small");
    Argument* db = def.add_arg();
    db->set_name("db");
    db->set_s(path);
    Argument* db_type = def.add_arg();
    db_type->set_name("db_type");
    db_type->set_s("leveldb");
    Workspace ws;
    absl::StatusOr<std::unique_ptr<OperatorBase>> op =
        OperatorRegistry::Global().Create(def, &ws);
    ASSERT_TRUE(op.ok()) << op.status();
    const absl::Status loaded = (*op)->Run();
    ASSERT_TRUE(loaded.ok()) << loaded;
    EXPECT_TRUE(ws.GetTensor("big").value()->BitwiseEquals(big_.Get<Tensor>()));
    EXPECT_TRUE(
        ws.GetTensor("small").value()->BitwiseEquals(small_.Get<Tensor>()));
  }

  TempDir dirs_;
  const std::string local_ = dirs_.Join("local");
  const std::string shared_ = dirs_.Join("shared");
  const std::string from_ = JoinPath(local_, "trainer_0.3");
  const std::string to_ = JoinPath(shared_, "trainer_0.3");
  const LevelDbType leveldb_{SmallTables()};
  Blob big_;
  Blob small_;
};

TEST_F(CopyCheckpointDbTest, PutsAVerifiedCopyInPlace) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  ASSERT_GE(Tables(from_).size(), 3u);
  const std::map<std::string, std::string> source = Contents(from_);

  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, TotalBytes(source));
  // Every file the source lists, and its list, byte for byte; nothing else
  // in the shared directory (no temporary).
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_TRUE(Contents(from_) == source);

  absl::StatusOr<CompactBlobIndex> index =
      VerifyDbAt("leveldb", to_, VerifyDepth::kValuesAndFiles);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->node(), "trainer_0");
  EXPECT_EQ(index->epoch(), 3);
  EXPECT_TRUE(index->files_listed());
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(to_));
}

TEST_F(CopyCheckpointDbTest, ReplacesTheDatabaseAtTheTarget) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, to_, 3, 1));
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 2));
  const std::map<std::string, std::string> source = Contents(from_);

  // By the registered type's name.
  absl::StatusOr<int64_t> bytes = CopyCheckpointDb("leveldb", from_, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WaitForBackgroundDeletes();  // the replaced database
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(to_));
}

TEST_F(CopyCheckpointDbTest, AFlippedByteIsDataLossAndLeavesNoCopy) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  const std::string table = Tables(from_)[1];
  const std::string original = ReadFileToString(table).value();
  {
    std::fstream f(table, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(original.size() / 2);
    f.put(static_cast<char>(original[original.size() / 2] ^ 0x01));
    ASSERT_TRUE(f.good());
  }
  const std::string damaged = ReadFileToString(table).value();

  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                                      ": cannot copy LevelDB database ", from_,
                                      " to ", shared_, "/.trainer_0.3.tmp-")));
  EXPECT_THAT(
      Message(bytes.status()),
      EndsWith(absl::StrCat(": ", table, " has CRC-32C ", Hex8(Crc32c(damaged)),
                            ", JOBGRAPH_FILES records ", Hex8(Crc32c(original)),
                            "; the database is damaged")));
  // Neither the copy nor its temporary.
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

// A damaged source leaves the database already at the target as it was.
TEST_F(CopyCheckpointDbTest, ATruncatedFileIsDataLossAndKeepsTheOldCopy) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, to_, 3, 1));
  const std::map<std::string, std::string> old = Contents(to_);
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 2));
  const std::string table = Tables(from_)[0];
  const int64_t size = ReadFileToString(table).value().size();
  ASSERT_EQ(::truncate(table.c_str(), size / 2), 0);

  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                                      ": cannot copy LevelDB database ", from_,
                                      " to ", shared_, "/.trainer_0.3.tmp-")));
  EXPECT_THAT(Message(bytes.status()),
              EndsWith(absl::StrCat(": ", table, " has ", size / 2,
                                    " bytes, JOBGRAPH_FILES records ", size,
                                    "; the database is damaged")));
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_TRUE(Contents(to_) == old);
}

TEST_F(CopyCheckpointDbTest, WithoutItsFileListADatabaseIsNotCopied) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  ASSERT_EQ(::unlink(JoinPath(from_, "JOBGRAPH_FILES").c_str()), 0);

  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                                      ": cannot copy LevelDB database ", from_,
                                      " to ")));
  EXPECT_THAT(Message(bytes.status()),
              EndsWith(": it has no file list JOBGRAPH_FILES (it was written "
                       "by another program, or by jobgraph before the list "
                       "existed), so its files cannot be checked as they are "
                       "copied"));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

TEST_F(CopyCheckpointDbTest, AMissingSourceIsNotFound) {
  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                                      ": cannot copy LevelDB database ", from_,
                                      " to ")));
  EXPECT_THAT(Message(bytes.status()), EndsWith(": it does not exist"));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

// A target that is not a database (a file here) is never replaced, and
// nothing is copied.
TEST_F(CopyCheckpointDbTest, ATargetThatCannotTakeADatabaseIsRefusedFirst) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  ASSERT_TRUE(WriteFileAtomically(to_, "not a database").ok());
  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      Message(bytes.status()),
      StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_, ": ",
                              to_, " exists and is not a directory")));
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_EQ(ReadFileToString(to_).value(), "not a database");
}

TEST_F(CopyCheckpointDbTest, AnErrorAfterTheCopyRemovesIt) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  absl::StatusOr<int64_t> bytes =
      CopyCheckpointDb(InstallFailsType(), from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(
      Message(bytes.status()),
      StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                              ": install of ", shared_, "/.trainer_0.3.tmp-")));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

TEST_F(CopyCheckpointDbTest, AnErrorAtFailpointFlushAfterCopyLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  ASSERT_TRUE(
      Failpoints::Enable("flush.after_copy", FailpointAction::kError).ok());
  absl::StatusOr<int64_t> bytes = CopyCheckpointDb(leveldb_, from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("copying checkpoint ", from_, " to ", to_,
                         ": failpoint flush.after_copy"));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

// The "memory" type has no files: DbType::Copy's default copies its entries.
TEST_F(CopyCheckpointDbTest, MemoryDatabasesAreCopiedEntryByEntry) {
  const DbType& memory = *DbRegistry::Global().Find(kMemoryDbType).value();
  ASSERT_NO_FATAL_FAILURE(Save(memory, "local/trainer_0.3", 3, 1));
  absl::StatusOr<int64_t> bytes =
      CopyCheckpointDb("memory", "local/trainer_0.3", "shared/trainer_0.3");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_GT(*bytes, int64_t{3} << 20);
  EXPECT_THAT(memory_db::Paths(),
              ElementsAre("local/trainer_0.3", "shared/trainer_0.3"));
  absl::StatusOr<CompactBlobIndex> index =
      VerifyDbAt("memory", "shared/trainer_0.3", VerifyDepth::kValuesAndFiles);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->epoch(), 3);

  bytes = CopyCheckpointDb("memory", "local/trainer_0.4", "shared/trainer_0.4");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(bytes.status()),
              HasSubstr("memory DB local/trainer_0.4 does not exist"));
  EXPECT_THAT(memory_db::Paths(),
              ElementsAre("local/trainer_0.3", "shared/trainer_0.3"));
}

// ---------------------------------------------------------------------------
// PackCheckpointDb and InstallPackedCheckpointDb: the copy split between two
// machines. LevelDB's Pack and Unpack themselves are tested in
// checkpoint/leveldb/leveldb_pack_test.cc.

TEST_F(CopyCheckpointDbTest, InstallsAPackedDatabaseInPlace) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  ASSERT_GE(Tables(from_).size(), 3u);
  const std::map<std::string, std::string> source = Contents(from_);

  absl::StatusOr<std::string> packed = PackCheckpointDb(leveldb_, from_);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE(Contents(from_) == source);
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb(leveldb_, *packed, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, TotalBytes(source));
  // Every file, byte for byte, under the final name; no temporary left.
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));

  absl::StatusOr<CompactBlobIndex> index =
      VerifyDbAt("leveldb", to_, VerifyDepth::kValuesAndFiles);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->node(), "trainer_0");
  EXPECT_EQ(index->epoch(), 3);
  EXPECT_TRUE(index->files_listed());
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(to_));
}

// As CopyCheckpointDb: a database at the target is replaced.
TEST_F(CopyCheckpointDbTest, APackedDatabaseReplacesTheOneAtTheTarget) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, to_, 3, 1));
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 2));
  const std::map<std::string, std::string> source = Contents(from_);

  // By the registered type's name.
  absl::StatusOr<std::string> packed = PackCheckpointDb("leveldb", from_);
  ASSERT_TRUE(packed.ok()) << packed.status();
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb("leveldb", *packed, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WaitForBackgroundDeletes();  // the replaced database
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(to_));
}

TEST_F(CopyCheckpointDbTest, PackingADamagedDatabaseIsDataLossNamingTheFile) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  const std::string table = Tables(from_)[1];
  const std::string original = ReadFileToString(table).value();
  std::string damaged = original;
  damaged[damaged.size() / 2] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(table, damaged).ok());

  absl::StatusOr<std::string> packed = PackCheckpointDb(leveldb_, from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(packed.status().message(),
            absl::StrCat("packing checkpoint ", from_,
                         ": cannot pack LevelDB database ", from_, ": ", table,
                         " has CRC-32C ", Hex8(Crc32c(damaged)),
                         ", JOBGRAPH_FILES records ", Hex8(Crc32c(original)),
                         "; the database is damaged"));
}

// Damaged packed bytes install nothing, and the database already at the
// target stays as it was.
TEST_F(CopyCheckpointDbTest, ADamagedPackedDatabaseKeepsTheOldOne) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, to_, 3, 1));
  const std::map<std::string, std::string> old = Contents(to_);
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 2));
  const std::string table = Tables(from_)[0];
  const std::string name = table.substr(table.rfind('/') + 1);
  const std::string contents = ReadFileToString(table).value();
  std::string packed = PackCheckpointDb(leveldb_, from_).value();
  const size_t at = packed.find(contents);
  ASSERT_NE(at, std::string::npos);
  packed[at + contents.size() / 3] ^= 0x01;

  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb(leveldb_, packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("installing packed checkpoint at ", to_,
                                      ": cannot unpack a LevelDB database (",
                                      packed.size(), " packed bytes) into ",
                                      shared_, "/.trainer_0.3.tmp-")));
  EXPECT_THAT(Message(bytes.status()),
              HasSubstr(absl::StrCat(": the packed database is damaged: its "
                                     "file ",
                                     name, " has CRC-32C ")));
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_TRUE(Contents(to_) == old);

  // Truncated in transit.
  packed = PackCheckpointDb(leveldb_, from_).value();
  packed.resize(packed.size() - 1);
  bytes = InstallPackedCheckpointDb(leveldb_, packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(bytes.status()),
              HasSubstr(": the packed database is damaged: "));
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_TRUE(Contents(to_) == old);
}

TEST_F(CopyCheckpointDbTest, APackedDatabaseIsNotInstalledOverAFile) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  const std::string packed = PackCheckpointDb(leveldb_, from_).value();
  ASSERT_TRUE(WriteFileAtomically(to_, "not a database").ok());
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb(leveldb_, packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      Message(bytes.status()),
      StartsWith(absl::StrCat("installing packed checkpoint at ", to_, ": ",
                              to_, " exists and is not a directory")));
  EXPECT_THAT(ListDir(shared_).value(), ElementsAre("trainer_0.3"));
  EXPECT_EQ(ReadFileToString(to_).value(), "not a database");
}

TEST_F(CopyCheckpointDbTest, AnErrorAfterTheUnpackRemovesIt) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  const std::string packed = PackCheckpointDb(leveldb_, from_).value();
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb(InstallFailsType(), packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(
      Message(bytes.status()),
      StartsWith(absl::StrCat("installing packed checkpoint at ", to_,
                              ": install of ", shared_, "/.trainer_0.3.tmp-")));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

TEST_F(CopyCheckpointDbTest,
       AnErrorAtFailpointTransferBeforeInstallLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(Save(leveldb_, from_, 3, 1));
  const std::string packed = PackCheckpointDb(leveldb_, from_).value();
  ASSERT_TRUE(
      Failpoints::Enable("transfer.before_install", FailpointAction::kError)
          .ok());
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb(leveldb_, packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat("installing packed checkpoint at ", to_,
                         ": failpoint transfer.before_install"));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

// The "memory" type has no files to move between machines: DbType's
// defaults refuse.
TEST_F(CopyCheckpointDbTest, MemoryDatabasesCannotBePacked) {
  const DbType& memory = *DbRegistry::Global().Find(kMemoryDbType).value();
  ASSERT_NO_FATAL_FAILURE(Save(memory, "local/trainer_0.3", 3, 1));
  absl::StatusOr<std::string> type_packed = memory.Pack("local/trainer_0.3");
  EXPECT_EQ(type_packed.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(type_packed.status()),
            "cannot pack DB local/trainer_0.3: databases of DB type "
            "MemoryDbType cannot be copied between machines (they are not "
            "files)");
  absl::StatusOr<int64_t> unpacked = memory.Unpack("bytes", "shared/n.0");
  EXPECT_EQ(unpacked.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(unpacked.status()),
            "cannot unpack 5 bytes to DB shared/n.0: databases of DB type "
            "MemoryDbType cannot be copied between machines (they are not "
            "files)");

  absl::StatusOr<std::string> packed =
      PackCheckpointDb("memory", "local/trainer_0.3");
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(packed.status()),
            "packing checkpoint local/trainer_0.3: cannot pack DB "
            "local/trainer_0.3: databases of DB type MemoryDbType cannot be "
            "copied between machines (they are not files)");

  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb("memory", "bytes", "shared/trainer_0.3");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith("installing packed checkpoint at shared/trainer_0.3: "
                         "cannot unpack 5 bytes to DB shared/"
                         ".trainer_0.3.tmp-"));
  EXPECT_THAT(Message(bytes.status()),
              EndsWith(": databases of DB type MemoryDbType cannot be copied "
                       "between machines (they are not files)"));
  EXPECT_THAT(memory_db::Paths(), ElementsAre("local/trainer_0.3"));
}

TEST_F(CopyCheckpointDbTest, PackingWithAnUnknownTypeIsNotFound) {
  absl::StatusOr<std::string> packed = PackCheckpointDb("nosuch", from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(packed.status()),
              StartsWith(absl::StrCat("packing checkpoint ", from_, ": ")));
  absl::StatusOr<int64_t> bytes =
      InstallPackedCheckpointDb("nosuch", "bytes", to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      Message(bytes.status()),
      StartsWith(absl::StrCat("installing packed checkpoint at ", to_, ": ")));
  EXPECT_THAT(Message(bytes.status()), HasSubstr("LevelDB, leveldb, memory"));
  EXPECT_THAT(ListDir(shared_).value(), IsEmpty());
}

TEST_F(CopyCheckpointDbTest, AnUnknownTypeIsNotFound) {
  absl::StatusOr<int64_t> bytes = CopyCheckpointDb("nosuch", from_, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(bytes.status()),
              StartsWith(absl::StrCat("copying checkpoint ", from_, " to ", to_,
                                      ": ")));
  EXPECT_THAT(Message(bytes.status()), HasSubstr("LevelDB, leveldb, memory"));
}

}  // namespace
}  // namespace jobgraph

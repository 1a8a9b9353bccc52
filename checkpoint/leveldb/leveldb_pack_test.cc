// LevelDbType::Pack and Unpack (leveldb_pack.cc): a finished database as
// bytes for another machine, and those bytes as a database again.
// InstallPackedCheckpointDb, which installs what Unpack writes, is tested in
// checkpoint/ops/copy_db_test.cc.

#include <errno.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "checkpoint/util/test_util.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::Gt;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::TempDir;

constexpr int kValues = 40;
constexpr size_t kValueBytes = 256 << 10;

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

// A database of kValues values, written by the direct writer as Save
// writes (`write_only`), or through LevelDB without the memtable flush at
// close, which leaves the last values in a log.
void WriteDb(const std::string& path, bool write_only) {
  LevelDbOptions options = SmallTables();
  DbOptions db_options;
  db_options.write_only = write_only;
  options.flush_memtable_on_close = write_only;
  std::unique_ptr<DB> db =
      LevelDbType(options).Open(path, DbMode::kNew, db_options).value();
  {
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (int i = 0; i < kValues; ++i) {
      ASSERT_TRUE(writer->Put(Key(i), Value(i, kValueBytes)).ok());
    }
  }
  ASSERT_TRUE(db->Close().ok());
}

// Reads every value back and compares it with what was written, and checks
// the files against their record.
void ExpectDbIntact(const std::string& path) {
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
  {
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    int i = 0;
    for (; cursor->Valid(); cursor->Next(), ++i) {
      ASSERT_EQ(cursor->key(), Key(i));
      ASSERT_TRUE(cursor->value() == Value(i, kValueBytes)) << i;
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

std::string Hex8(uint32_t crc) {
  return absl::StrCat(absl::Hex(crc, absl::kZeroPad8));
}

std::string LittleEndian(uint64_t value, int bytes) {
  std::string field(bytes, '\0');
  for (int i = 0; i < bytes; ++i) {
    field[i] = static_cast<char>(value >> (8 * i));
  }
  return field;
}

uint64_t LoadLittleEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  }
  return value;
}

// The packed layout that leveldb_pack.cc documents, taken apart so that a
// test can forge a packed database whose CRC is right but whose files are
// not what its list records.
struct Layout {
  std::string header;  // magic and version
  std::string list;    // the JOBGRAPH_FILES bytes
  std::vector<std::pair<std::string, std::string>> files;  // name, contents
};

Layout Split(absl::string_view packed) {
  Layout layout;
  layout.header = std::string(packed.substr(0, 12));
  absl::string_view rest = packed.substr(12, packed.size() - 12 - 4);
  auto field = [&rest]() {
    const uint64_t length = LoadLittleEndian(rest.substr(0, 8));
    CHECK_LE(length, rest.size() - 8);
    std::string bytes(rest.substr(8, length));
    rest.remove_prefix(8 + length);
    return bytes;
  };
  layout.list = field();
  while (!rest.empty()) {
    std::string name = field();
    layout.files.emplace_back(std::move(name), field());
  }
  return layout;
}

std::string Join(const Layout& layout) {
  std::string packed = layout.header;
  absl::StrAppend(&packed, LittleEndian(layout.list.size(), 8), layout.list);
  for (const auto& [name, contents] : layout.files) {
    absl::StrAppend(&packed, LittleEndian(name.size(), 8), name,
                    LittleEndian(contents.size(), 8), contents);
  }
  absl::StrAppend(&packed, LittleEndian(Crc32c(packed), 4));
  return packed;
}

std::string Flipped(std::string bytes, size_t offset) {
  CHECK_LT(offset, bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
  return bytes;
}

class LevelDbPackTest : public ::testing::Test {
 protected:
  void TearDown() override { io_faults::Disarm(); }

  // The prefix of every error of Unpack(packed, to_).
  std::string UnpackError(absl::string_view packed) const {
    return absl::StrCat("cannot unpack a LevelDB database (", packed.size(),
                        " packed bytes) into ", to_, ": ");
  }

  // Unpack of `packed` fails with DataLoss, whose message ends with
  // `message` (after the prefix naming to_), and leaves nothing at to_.
  void ExpectDamaged(absl::string_view packed, absl::string_view message) {
    absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(packed, to_);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss)
        << bytes.status();
    EXPECT_EQ(bytes.status().message(),
              absl::StrCat(UnpackError(packed), message));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }

  TempDir dir_;
  const std::string from_ = dir_.Join("trainer_0.3");
  const std::string to_ = dir_.Join("copy");
};

TEST_F(LevelDbPackTest, UnpackWritesEveryListedFileByteForByte) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  ASSERT_THAT(Tables(from_).size(), Gt(3u));
  const std::map<std::string, std::string> source = Contents(from_);

  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE(
      absl::StartsWith(*packed, absl::string_view("JGLDBPK\n\1\0\0\0", 12)));
  // The source was only read.
  EXPECT_TRUE(Contents(from_) == source);

  absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(*packed, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // Every file, JOBGRAPH_FILES and LOCK included, with the same bytes;
  // counted as Copy counts them.
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_EQ(*bytes, TotalBytes(source));
  ASSERT_NO_FATAL_FAILURE(ExpectDbIntact(to_));
  EXPECT_TRUE(LevelDbType().Exists(to_).value());
}

// HoldPacked keeps a packed database in memory: a read of its path reads
// it there, every value as written, with nothing on disk at that path, and
// until ReleaseHeld only.
TEST_F(LevelDbPackTest, AHeldDatabaseIsReadFromMemoryUntilReleased) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::map<std::string, std::string> source = Contents(from_);
  std::string packed = LevelDbType().Pack(from_).value();
  const LevelDbType type;
  absl::StatusOr<int64_t> bytes = type.HoldPacked(packed, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, TotalBytes(source));
  EXPECT_TRUE(type.Exists(to_).value());
  ASSERT_NO_FATAL_FAILURE(ExpectDbIntact(to_));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  // One database per path.
  EXPECT_EQ(
      type.HoldPacked(packed, to_).status(),
      absl::AlreadyExistsError(absl::StrCat(
          "a packed LevelDB database is held in memory as ", to_, " already")));

  // A reader open at the release keeps reading what it opened.
  std::unique_ptr<DB> open = type.Open(to_, DbMode::kRead).value();
  type.ReleaseHeld(to_);
  EXPECT_FALSE(type.Exists(to_).value());
  EXPECT_EQ(type.Open(to_, DbMode::kRead).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(open->Get(Key(7)).value(), Value(7, kValueBytes));
  ASSERT_TRUE(open->Close().ok());
}

// A damaged packed database is not held, with Unpack's message.
TEST_F(LevelDbPackTest, ADamagedPackedDatabaseIsNotHeld) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string packed = LevelDbType().Pack(from_).value();
  const std::string name = Tables(from_)[1];
  const std::string table = ReadFileToString(JoinPath(from_, name)).value();
  const size_t in_table = packed.find(table) + table.size() / 2;
  const std::string damaged = Flipped(packed, in_table);
  absl::StatusOr<int64_t> held = LevelDbType().HoldPacked(damaged, to_);
  EXPECT_EQ(held.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(held.status().message(),
            absl::StrCat("cannot hold a packed LevelDB database (",
                         damaged.size(), " bytes) in memory as ", to_,
                         ": the packed database is damaged: its file ", name,
                         " has CRC-32C ",
                         Hex8(Crc32c(Flipped(table, table.size() / 2))),
                         ", its JOBGRAPH_FILES records ", Hex8(Crc32c(table))));
  EXPECT_FALSE(LevelDbType().Exists(to_).value());
}

// A database whose log still holds data (LevelDB's recovery reads it).
TEST_F(LevelDbPackTest, UnpacksADatabaseThatNeedsRecovery) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/false));
  const std::map<std::string, std::string> source = Contents(from_);
  int64_t log_bytes = 0;
  for (const auto& [name, contents] : source) {
    if (absl::EndsWith(name, ".log")) log_bytes += contents.size();
  }
  ASSERT_GT(log_bytes, int64_t{kValueBytes});

  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  ASSERT_TRUE(packed.ok()) << packed.status();
  absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(*packed, to_);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(Contents(to_) == source);
  EXPECT_EQ(*bytes, TotalBytes(source));
  ASSERT_NO_FATAL_FAILURE(ExpectDbIntact(to_));
}

TEST_F(LevelDbPackTest, FilesTheListDoesNotNameStayBehind) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::map<std::string, std::string> listed = Contents(from_);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(from_, "LOG"), "info").ok());
  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(LevelDbType().Unpack(*packed, to_).ok());
  EXPECT_TRUE(Contents(to_) == listed);
}

TEST_F(LevelDbPackTest, AFlippedByteInASourceFileIsDataLossNamingIt) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string table = JoinPath(from_, Tables(from_)[1]);
  const std::string original = ReadFileToString(table).value();
  const std::string damaged = Flipped(original, original.size() / 2);
  ASSERT_TRUE(WriteFileAtomically(table, damaged).ok());

  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(packed.status().message(),
            absl::StrCat("cannot pack LevelDB database ", from_, ": ", table,
                         " has CRC-32C ", Hex8(Crc32c(damaged)),
                         ", JOBGRAPH_FILES records ", Hex8(Crc32c(original)),
                         "; the database is damaged"));
}

TEST_F(LevelDbPackTest, ATruncatedSourceFileIsDataLossNamingIt) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string table = JoinPath(from_, Tables(from_)[2]);
  const int64_t size = ReadFileToString(table).value().size();
  ASSERT_EQ(::truncate(table.c_str(), size - 100), 0);

  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(packed.status().message(),
            absl::StrCat("cannot pack LevelDB database ", from_, ": ", table,
                         " has ", size - 100, " bytes, JOBGRAPH_FILES records ",
                         size, "; the database is damaged"));
}

TEST_F(LevelDbPackTest, AMissingSourceFileIsDataLossNamingIt) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string table = JoinPath(from_, Tables(from_).back());
  ASSERT_EQ(::unlink(table.c_str()), 0);

  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(packed.status().message(),
            absl::StrCat("cannot pack LevelDB database ", from_, ": ", table,
                         " is missing, though JOBGRAPH_FILES lists it; the "
                         "database is damaged"));
}

TEST_F(LevelDbPackTest, WithoutADatabaseOrItsListNothingIsPacked) {
  absl::StatusOr<std::string> packed = LevelDbType().Pack(from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(packed.status().message(),
            absl::StrCat("cannot pack LevelDB database ", from_,
                         ": it does not exist"));

  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  ASSERT_EQ(::unlink(JoinPath(from_, "JOBGRAPH_FILES").c_str()), 0);
  packed = LevelDbType().Pack(from_);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(packed.status().message()),
              StartsWith(absl::StrCat("cannot pack LevelDB database ", from_,
                                      ": it has no file list JOBGRAPH_FILES")));
}

// Damage in transit anywhere in the packed bytes is DataLoss, and nothing is
// left at the target. Where the damage hits a file, the message names it.
TEST_F(LevelDbPackTest, ADamagedPackedDatabaseIsDataLossAndLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string packed = LevelDbType().Pack(from_).value();
  const std::string name = Tables(from_)[1];
  const std::string table = ReadFileToString(JoinPath(from_, name)).value();
  const size_t table_at = packed.find(table);
  ASSERT_NE(table_at, std::string::npos);
  const size_t name_at =
      packed.find(absl::StrCat(LittleEndian(name.size(), 8), name)) + 8;
  const uint32_t crc = static_cast<uint32_t>(
      LoadLittleEndian(absl::string_view(packed).substr(packed.size() - 4)));

  const size_t in_table = table_at + table.size() / 2;
  {
    SCOPED_TRACE("a byte of a file's contents");
    ExpectDamaged(
        Flipped(packed, in_table),
        absl::StrCat("the packed database is damaged: its file ", name,
                     " has CRC-32C ",
                     Hex8(Crc32c(Flipped(table, table.size() / 2))),
                     ", its JOBGRAPH_FILES records ", Hex8(Crc32c(table))));
  }
  {
    SCOPED_TRACE("a byte of a file's name");
    std::string renamed = name;
    renamed.back() = static_cast<char>(renamed.back() ^ 0x01);
    ExpectDamaged(
        Flipped(packed, name_at + name.size() - 1),
        absl::StrCat("the packed database is damaged: it carries a "
                     "file '",
                     renamed, "' that its JOBGRAPH_FILES does not list"));
  }
  {
    SCOPED_TRACE("a byte of the trailing CRC");
    ExpectDamaged(
        Flipped(packed, packed.size() - 1),
        absl::StrCat("the packed database is damaged: it has CRC-32C ",
                     Hex8(crc), ", its last 4 bytes record ",
                     Hex8(crc ^ 0x01000000)));
  }
  {
    SCOPED_TRACE("the magic");
    ExpectDamaged(Flipped(packed, 0),
                  "the packed database is damaged: it does not start with "
                  "\"JGLDBPK\\n\"");
  }

  // Bytes whose damage is found by the CRCs (the version, the list's
  // length, the list itself, a file's length): DataLoss either way.
  for (size_t offset :
       {size_t{8}, size_t{11}, size_t{12}, size_t{19}, size_t{20}, size_t{30},
        name_at + name.size(), table_at - 1}) {
    SCOPED_TRACE(absl::StrCat("a byte at offset ", offset));
    const std::string damaged = Flipped(packed, offset);
    absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(damaged, to_);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss)
        << bytes.status();
    EXPECT_THAT(
        std::string(bytes.status().message()),
        StartsWith(absl::StrCat(UnpackError(damaged), "the packed database")));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }

  for (size_t size : {packed.size() - 1, packed.size() - 5, in_table,
                      packed.size() / 2, size_t{30}, size_t{12}, size_t{0}}) {
    SCOPED_TRACE(absl::StrCat("truncated to ", size, " bytes"));
    const std::string truncated = packed.substr(0, size);
    absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(truncated, to_);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss)
        << bytes.status();
    EXPECT_THAT(std::string(bytes.status().message()),
                StartsWith(absl::StrCat(UnpackError(truncated),
                                        "the packed database is damaged: ")));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }
  ExpectDamaged(packed.substr(0, 12),
                "the packed database is damaged: it is shorter than the 24 "
                "bytes of an empty one");
  ExpectDamaged(packed.substr(0, in_table),
                absl::StrCat("the packed database is damaged: the contents of "
                             "its file '",
                             name, "' run past its end"));

  // The undamaged bytes still unpack.
  ASSERT_TRUE(LevelDbType().Unpack(packed, to_).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectDbIntact(to_));
}

// Packed bytes whose CRC is right but whose files are not those their list
// records (a faulty or forged sender) are refused all the same.
TEST_F(LevelDbPackTest, FilesThatDoNotMatchTheCarriedListAreDataLoss) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string packed = LevelDbType().Pack(from_).value();
  const Layout layout = Split(packed);
  ASSERT_EQ(Join(layout), packed);
  ASSERT_GT(layout.files.size(), 3u);
  const std::string name = layout.files[2].first;

  {
    SCOPED_TRACE("a listed file left out");
    Layout missing = layout;
    missing.files.erase(missing.files.begin() + 2);
    ExpectDamaged(Join(missing),
                  absl::StrCat("the packed database is damaged: it lacks ",
                               name, ", which its JOBGRAPH_FILES lists"));
  }
  {
    SCOPED_TRACE("a file carried twice");
    Layout twice = layout;
    twice.files.push_back(layout.files[2]);
    ExpectDamaged(Join(twice),
                  absl::StrCat("the packed database is damaged: it carries ",
                               name, " twice"));
  }
  {
    SCOPED_TRACE("a file the list does not name");
    Layout extra = layout;
    extra.files.emplace_back("LOG", "info");
    ExpectDamaged(Join(extra),
                  "the packed database is damaged: it carries a file 'LOG' "
                  "that its JOBGRAPH_FILES does not list");
  }
  {
    SCOPED_TRACE("a name that leads out of the database");
    Layout outside = layout;
    outside.files.emplace_back("../outside", "secret");
    ExpectDamaged(Join(outside),
                  "the packed database is damaged: it carries a file "
                  "'../outside' that its JOBGRAPH_FILES does not list");
  }
  {
    SCOPED_TRACE("a file's contents replaced");
    Layout replaced = layout;
    std::string& contents = replaced.files[2].second;
    const uint32_t original = Crc32c(contents);
    const char last = contents.back();
    contents.pop_back();
    ExpectDamaged(
        Join(replaced),
        absl::StrCat("the packed database is damaged: its file ", name, " has ",
                     contents.size(), " bytes, its JOBGRAPH_FILES records ",
                     contents.size() + 1));
    contents.push_back(static_cast<char>(last ^ 0x01));
    ExpectDamaged(
        Join(replaced),
        absl::StrCat("the packed database is damaged: its file ", name,
                     " has CRC-32C ", Hex8(Crc32c(contents)),
                     ", its JOBGRAPH_FILES records ", Hex8(original)));
  }
  {
    SCOPED_TRACE("a damaged list");
    Layout list = layout;
    list.list = Flipped(list.list, list.list.size() - 1);
    absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(Join(list), to_);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(bytes.status().message()),
                StartsWith(absl::StrCat(
                    UnpackError(Join(list)),
                    "the packed database's file list JOBGRAPH_FILES is "
                    "damaged: ")));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }
}

// Another format version with a right CRC is not damage: it is refused as
// one this program cannot read.
TEST_F(LevelDbPackTest, AnotherFormatVersionIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  std::string packed = LevelDbType().Pack(from_).value();
  packed[8] = 2;
  const size_t body = packed.size() - 4;
  packed.replace(
      body, 4,
      LittleEndian(Crc32c(absl::string_view(packed).substr(0, body)), 4));
  absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat(UnpackError(packed),
                         "the packed database has format version 2; this "
                         "program reads version 1"));
  EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
}

TEST_F(LevelDbPackTest, SomethingAtTheTargetIsLeftAlone) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string packed = LevelDbType().Pack(from_).value();
  ASSERT_TRUE(CreateDir(to_).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(to_, "mine"), "keep").ok());

  absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(packed, to_);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(bytes.status().message(),
            absl::StrCat(UnpackError(packed), to_,
                         " already exists; a copy needs a fresh path"));
  EXPECT_THAT(ListDir(to_).value(), ElementsAre("mine"));
  EXPECT_EQ(ReadFileToString(JoinPath(to_, "mine")).value(), "keep");
}

// Every write-side call of Unpack failing in turn (a full disk): each
// failure is reported and leaves nothing at the target.
TEST_F(LevelDbPackTest, AFailedWriteLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(WriteDb(from_, /*write_only=*/true));
  const std::string packed = LevelDbType().Pack(from_).value();
  io_faults::Arm(/*fail_at=*/int64_t{1} << 40, ENOSPC);  // only counts
  ASSERT_TRUE(LevelDbType().Unpack(packed, to_).ok());
  const int64_t calls = io_faults::Calls();
  io_faults::Disarm();
  // mkdir, and per file a create, writes and a close; the fsyncs; the list.
  ASSERT_GT(calls, 3 * static_cast<int64_t>(Tables(from_).size()));
  ASSERT_TRUE(RemoveRecursively(to_).ok());
  for (int64_t fail_at = 1; fail_at <= calls; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("I/O call ", fail_at, " of ", calls));
    io_faults::Arm(fail_at, ENOSPC);
    absl::StatusOr<int64_t> bytes = LevelDbType().Unpack(packed, to_);
    io_faults::Disarm();
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(bytes.status().message()),
                StartsWith(UnpackError(packed)));
    EXPECT_THAT(std::string(bytes.status().message()),
                HasSubstr("No space left on device"));
    EXPECT_THAT(ListDir(dir_.path()).value(), ElementsAre("trainer_0.3"));
  }
  ASSERT_TRUE(LevelDbType().Unpack(packed, to_).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectDbIntact(to_));
}

}  // namespace
}  // namespace jobgraph

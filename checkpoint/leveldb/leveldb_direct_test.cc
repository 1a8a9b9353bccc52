// Databases written without LevelDB (DbOptions::write_only): LevelDB itself
// must read them exactly, with its own DB::Open, and so must the adapter.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/io_faults.h"
#include "checkpoint/util/sanitizers.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "leveldb/db.h"
#include "leveldb/options.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Entries = std::map<std::string, std::string>;
using testing_util::kSweepStride;
using testing_util::TempDir;

std::string Value(int i, size_t size) {
  std::string value(size, '\0');
  for (size_t j = 0; j < size; ++j) {
    value[j] = static_cast<char>((i * 131 + j * 7) >> 3);
  }
  return value;
}

DbOptions WriteOnly() {
  DbOptions options;
  options.write_only = true;
  return options;
}

// Puts `puts` in order into a new write-only database at `path`; the last
// Put of a key is the one that counts.
void WriteDirect(const std::string& path,
                 const std::vector<std::pair<std::string, std::string>>& puts,
                 const LevelDbOptions& tuning = LevelDbOptions()) {
  std::unique_ptr<DB> db =
      LevelDbType(tuning).Open(path, DbMode::kNew, WriteOnly()).value();
  {
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (const auto& [key, value] : puts) {
      ASSERT_TRUE(writer->Put(key, value).ok()) << key;
    }
  }
  absl::Status closed = db->Close();
  ASSERT_TRUE(closed.ok()) << closed;
}

Entries ExpectedEntries(
    const std::vector<std::pair<std::string, std::string>>& puts) {
  Entries entries;
  for (const auto& [key, value] : puts) entries[key] = value;
  return entries;
}

Entries ReadThroughAdapter(const std::string& path) {
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kRead).value();
  Entries entries;
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  for (; cursor->Valid(); cursor->Next()) {
    entries.emplace(std::string(cursor->key()), std::string(cursor->value()));
  }
  EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  cursor.reset();
  for (const auto& [key, value] : entries) {
    absl::StatusOr<std::string> got = db->Get(key);
    EXPECT_TRUE(got.ok() && *got == value) << key << ": " << got.status();
  }
  DB::FileCheck check;
  check.record_required = true;
  check.read_contents = true;  // every recorded CRC-32C against the file
  absl::Status verified = db->VerifyFiles(check);
  EXPECT_TRUE(verified.ok()) << verified;
  return entries;
}

// Opens a copy of the database with LevelDB's own DB::Open (which would
// rewrite the descriptor of the original), reads every entry, checks each
// with Get, and returns them with the number of table files per level.
struct LevelDbView {
  Entries entries;
  std::vector<int> files_per_level;
};

LevelDbView ReadWithLevelDb(const std::string& path, const std::string& copy) {
  CHECK_EQ(std::system(absl::StrCat("cp -r '", path, "' '", copy, "'").c_str()),
           0);
  leveldb::Options options;
  options.paranoid_checks = true;
  leveldb::DB* raw = nullptr;
  leveldb::Status status = leveldb::DB::Open(options, copy, &raw);
  EXPECT_TRUE(status.ok()) << status.ToString();
  LevelDbView view;
  if (!status.ok()) return view;
  std::unique_ptr<leveldb::DB> db(raw);
  for (int level = 0; level < 7; ++level) {
    std::string files;
    EXPECT_TRUE(db->GetProperty(
        absl::StrCat("leveldb.num-files-at-level", level), &files));
    view.files_per_level.push_back(std::stoi(files));
  }
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(read_options));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    view.entries.emplace(it->key().ToString(), it->value().ToString());
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  for (const auto& [key, value] : view.entries) {
    std::string got;
    EXPECT_TRUE(db->Get(read_options, key, &got).ok()) << key;
    EXPECT_TRUE(got == value) << key;
  }
  return view;
}

// Writes `puts` directly into <dir>/db, expects the adapter and LevelDB
// itself to read back exactly the last value Put of each key, and returns
// LevelDB's view.
LevelDbView WriteAndReadBack(
    const TempDir& dir,
    const std::vector<std::pair<std::string, std::string>>& puts,
    const LevelDbOptions& tuning = LevelDbOptions()) {
  const std::string path = dir.Join("db");
  WriteDirect(path, puts, tuning);
  const Entries expected = ExpectedEntries(puts);
  EXPECT_TRUE(ReadThroughAdapter(path) == expected);
  LevelDbView view = ReadWithLevelDb(path, dir.Join("copy"));
  EXPECT_TRUE(view.entries == expected);
  return view;
}

// Values below, at and far above the 64 KiB block size; 3000 small ones
// fill many blocks with prefix-compressed keys and restart points.
std::vector<std::pair<std::string, std::string>> MixedPuts() {
  std::vector<std::pair<std::string, std::string>> puts;
  puts.emplace_back("a_empty", "");
  puts.emplace_back("b_block", Value(1, 64 << 10));
  puts.emplace_back("c_big", Value(2, 5 << 20));
  puts.emplace_back("c_just_under", Value(3, (64 << 10) - 1));
  for (int i = 0; i < 3000; ++i) {
    puts.emplace_back(absl::StrFormat("d_small_%05d", i), Value(i, 100));
  }
  puts.emplace_back("e_last", Value(4, 7));
  return puts;
}

TEST(LevelDbDirectTest, LevelDbReadsWhatWasWrittenInKeyOrder) {
  TempDir dir;
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, MixedPuts()));
  // One table, at the last level: LevelDB finds nothing to compact.
  EXPECT_THAT(view.files_per_level, ElementsAre(0, 0, 0, 0, 0, 0, 1));
  // Nothing but LevelDB's files and the file list; no log.
  EXPECT_THAT(ListDir(dir.Join("db")).value(),
              ElementsAre("000002.ldb", "CURRENT", "JOBGRAPH_FILES", "LOCK",
                          "MANIFEST-000001"));
}

// Table files written through the page cache (LevelDbOptions::direct_io
// off, as on a file system without O_DIRECT) read the same.
TEST(LevelDbDirectTest, TablesWrittenThroughThePageCacheReadTheSame) {
  TempDir dir;
  LevelDbOptions tuning;
  tuning.direct_io = false;
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, MixedPuts(), tuning));
  EXPECT_THAT(view.files_per_level, ElementsAre(0, 0, 0, 0, 0, 0, 1));
}

TEST(LevelDbDirectTest, LargeDatabasesSpanTablesThatDoNotOverlap) {
  TempDir dir;
  LevelDbOptions tuning;
  tuning.max_file_size = 1 << 20;
  std::vector<std::pair<std::string, std::string>> puts;
  for (int i = 0; i < 40; ++i) {
    puts.emplace_back(absl::StrFormat("blob_%03d", i), Value(i, 300 << 10));
  }
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, puts, tuning));
  // 4 values of 300 KiB pass 1 MiB: 10 tables.
  EXPECT_THAT(view.files_per_level, ElementsAre(0, 0, 0, 0, 0, 0, 10));
}

TEST(LevelDbDirectTest, KeysOutOfOrderAndRepeatedKeysReadAsLevelDbWould) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> puts = {
      {"m", "1"},     {"n", Value(5, 100 << 10)},
      {"c", "2"},                         // out of order: kept sorted in memory
      {"z", "3"},     {"n", "replaced"},  // a later Put wins
      {"c", "again"}, {"a", Value(6, 200 << 10)},
  };
  ASSERT_EQ(ExpectedEntries(puts).at("n"), "replaced");
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, puts));
  // The in-order table [m, z] at the last level; the entries that came out
  // of order ([a, n], overlapping it and newer) at level 0.
  EXPECT_THAT(view.files_per_level, ElementsAre(1, 0, 0, 0, 0, 0, 1));
}

// An out-of-order value of 1 MiB or more (a save's blob index) is written
// at once into a table of its own, after the entries kept so far, instead of
// being copied; the newer value of a key wins across those tables.
TEST(LevelDbDirectTest, LargeOutOfOrderValuesAreWrittenAtOnce) {
  TempDir dir;
  const std::string big1 = Value(7, 1 << 20);
  const std::string big2 = Value(8, 3 << 19);
  std::vector<std::pair<std::string, std::string>> puts = {
      {"m", "1"},  {"z", "2"},                  // in order
      {"c", "k"},  {"q", "k"},     {"a", "k"},  // kept
      {"c", big1},                              // tables [a, c, q], then [c]
      {"b", "k"},  {"q", "newer"},              // kept again
      {"e", big2},                              // tables [b, q], then [e]
      {"f", "k"},  // kept until the close: table [f]
  };
  const Entries expected = ExpectedEntries(puts);
  ASSERT_EQ(expected.at("c"), big1);
  ASSERT_EQ(expected.at("q"), "newer");
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, puts));
  EXPECT_THAT(view.files_per_level, ElementsAre(5, 0, 0, 0, 0, 0, 1));
}

// Save passes each value's CRC-32C (PutWithCrc), which a value with a block
// of its own uses instead of reading the value again: with the right one the
// database reads as LevelDB wrote it, in and out of order; a wrong one is
// what its block records (so the hint is used, and LevelDB finds it).
TEST(LevelDbDirectTest, PutWithCrcUsesTheGivenChecksum) {
  TempDir dir;
  const std::string big = Value(9, 1 << 20);
  const std::string path = dir.Join("db");
  {
    std::unique_ptr<DB> db =
        LevelDbType().Open(path, DbMode::kNew, WriteOnly()).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->PutWithCrc("b", big, Crc32c(big)).ok());
    ASSERT_TRUE(writer->PutWithCrc("c", "small", Crc32c("small")).ok());
    ASSERT_TRUE(writer->PutWithCrc("a", big, Crc32c(big)).ok());  // early
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  const Entries expected = {{"a", big}, {"b", big}, {"c", "small"}};
  EXPECT_TRUE(ReadThroughAdapter(path) == expected);
  EXPECT_TRUE(ReadWithLevelDb(path, dir.Join("copy")).entries == expected);

  const std::string wrong = dir.Join("wrong");
  {
    std::unique_ptr<DB> db =
        LevelDbType().Open(wrong, DbMode::kNew, WriteOnly()).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->PutWithCrc("b", big, Crc32c(big) ^ 1).ok());
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  leveldb::Options options;
  options.paranoid_checks = true;
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(options, wrong, &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::string got;
  const leveldb::Status status = db->Get(read_options, "b", &got);
  EXPECT_EQ(status.ToString(), "Corruption: block checksum mismatch");
}

// Save passes a tensor chunk as a head and a body borrowed from the tensor
// (PutBorrowed). The body of a value with a block of its own is written from
// the caller's memory; with O_DIRECT it starts at a file offset that agrees
// with its address modulo 4 KiB (padding before the block, which no block
// handle covers). LevelDB and the adapter read exactly head + body, for
// bodies at any alignment, small ones and out-of-order ones (joined).
TEST(LevelDbDirectTest, PutBorrowedReadsAsHeadAndBody) {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  constexpr size_t kBody = (2 << 20) + 333;
  const std::vector<size_t> shifts = {0, 1, 100, 4095};
  std::unique_ptr<char, Free> memory(static_cast<char*>(
      std::aligned_alloc(4096, (shifts.size() + 1) * (4 << 20))));
  std::vector<std::pair<std::string, absl::string_view>> bodies;
  for (size_t i = 0; i < shifts.size(); ++i) {
    char* const at = memory.get() + i * (4 << 20) + shifts[i];
    const std::string value = Value(static_cast<int>(i), kBody);
    std::memcpy(at, value.data(), value.size());
    bodies.emplace_back(absl::StrFormat("k%d", i),
                        absl::string_view(at, kBody));
  }
  char* const last = memory.get() + shifts.size() * (4 << 20);
  std::memcpy(last, "small body", 10);
  bodies.emplace_back("k9", absl::string_view(last, 10));
  bodies.emplace_back("a_early", bodies[1].second);  // out of order

  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "O_DIRECT" : "page cache");
    TempDir dir;
    const std::string path = dir.Join("db");
    LevelDbOptions tuning;
    tuning.direct_io = direct;
    Entries expected;
    {
      std::unique_ptr<DB> db =
          LevelDbType(tuning).Open(path, DbMode::kNew, WriteOnly()).value();
      std::unique_ptr<Writer> writer = db->NewWriter().value();
      for (const auto& [key, body] : bodies) {
        const std::string head = absl::StrCat("<head of ", key, ">");
        ASSERT_TRUE(writer->PutBorrowed(key, head, body, Crc32c(body)).ok());
        expected[key] = absl::StrCat(head, body);
      }
      writer.reset();
      ASSERT_TRUE(db->Close().ok());
    }
    EXPECT_TRUE(ReadThroughAdapter(path) == expected);
    EXPECT_TRUE(ReadWithLevelDb(path, dir.Join("copy")).entries == expected);
    if (!direct) continue;
    const int probe = ::open(dir.Join("probe").c_str(),
                             O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
    if (probe < 0) {
      GTEST_SKIP() << "the file system of " << dir.path()
                   << " does not take O_DIRECT: bodies are not placed";
    }
    ::close(probe);
    // In the in-order table, each large body sits where O_DIRECT can write
    // it from its own memory.
    const std::string table =
        ReadFileToString(JoinPath(path, "000002.ldb")).value();
    for (size_t i = 0; i < shifts.size(); ++i) {
      const std::string head = absl::StrFormat("<head of k%d>", i);
      const size_t at = table.find(head);
      ASSERT_NE(at, std::string::npos) << head;
      EXPECT_EQ((at + head.size()) % 4096, shifts[i]) << head;
    }
  }
}

TEST(LevelDbDirectTest, OutOfOrderEntriesPastTheBufferBecomeTables) {
  TempDir dir;
  LevelDbOptions tuning;
  tuning.write_buffer_size = 64 << 10;
  std::vector<std::pair<std::string, std::string>> puts;
  for (int i = 999; i >= 0; --i) {  // every key after the first is early
    puts.emplace_back(absl::StrFormat("key_%04d", i), Value(i, 1000));
  }
  for (int i = 0; i < 1000; i += 7) {
    puts.emplace_back(absl::StrFormat("key_%04d", i), Value(i + 1, 10));
  }
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, puts, tuning));
  // ~1 MB out of order in 64 KiB tables at level 0; key_0999 alone in order.
  EXPECT_GE(view.files_per_level[0], 15);
  EXPECT_EQ(view.files_per_level[6], 1);
}

TEST(LevelDbDirectTest, AnEmptyDatabaseIsADatabase) {
  TempDir dir;
  LevelDbView view;
  ASSERT_NO_FATAL_FAILURE(view = WriteAndReadBack(dir, {}));
  EXPECT_TRUE(view.entries.empty());
  EXPECT_THAT(view.files_per_level, ElementsAre(0, 0, 0, 0, 0, 0, 0));
}

TEST(LevelDbDirectTest, ReadsBeforeCloseAreRefused) {
  TempDir dir;
  const std::string path = dir.Join("db");
  std::unique_ptr<DB> db =
      LevelDbType().Open(path, DbMode::kNew, WriteOnly()).value();
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  ASSERT_TRUE(writer->Put("k", "v").ok());
  ASSERT_TRUE(writer->Flush().ok());
  absl::StatusOr<std::string> got = db->Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr(path));
  EXPECT_THAT(got.status().message(), HasSubstr("write_only"));
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  EXPECT_FALSE(cursor->Valid());
  EXPECT_EQ(cursor->status().code(), absl::StatusCode::kFailedPrecondition);
  cursor.reset();
  writer.reset();
  ASSERT_TRUE(db->Close().ok());
  EXPECT_EQ(LevelDbType().Open(path, DbMode::kRead).value()->Get("k").value(),
            "v");
}

// Every write-side call of a save fails once in turn: the failure is
// reported naming the database and the errno, and Close() fails too, so the
// half-written database can never pass for a finished one.
TEST(LevelDbDirectTest, EveryFailedWriteFailsTheDatabase) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> puts;
  for (int i = 0; i < 8; ++i) {
    puts.emplace_back(absl::StrFormat("big_%d", i), Value(i, 400 << 10));
  }
  puts.emplace_back("a_out_of_order", "x");
  for (const bool direct_io : {true, false}) {
    SCOPED_TRACE(direct_io ? "O_DIRECT" : "page cache");
    LevelDbOptions tuning;
    tuning.max_file_size = 1 << 20;
    tuning.direct_io = direct_io;
    int calls_failed = 0;
    for (int fail_at = 1;; ++fail_at) {
      const std::string path =
          dir.Join(absl::StrCat("db", direct_io ? "_direct" : "", fail_at));
      io_faults::Arm(fail_at, ENOSPC);
      absl::StatusOr<std::unique_ptr<DB>> opened =
          LevelDbType(tuning).Open(path, DbMode::kNew, WriteOnly());
      absl::Status status = opened.status();
      if (opened.ok()) {
        std::unique_ptr<DB> db = std::move(opened).value();
        std::unique_ptr<Writer> writer = db->NewWriter().value();
        for (const auto& [key, value] : puts) {
          status = writer->Put(key, value);
          if (!status.ok()) break;
        }
        writer.reset();
        absl::Status closed = db->Close();
        if (status.ok()) status = closed;
        EXPECT_EQ(status.ok(), closed.ok()) << "fail_at " << fail_at;
      }
      const int64_t calls = io_faults::Calls();
      io_faults::Disarm();
      if (calls < fail_at) {
        // The walk went past the last call: this save succeeded.
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_TRUE(ReadThroughAdapter(path) == ExpectedEntries(puts));
        break;
      }
      ++calls_failed;
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted)
          << "fail_at " << fail_at << ": " << status;
      EXPECT_THAT(status.message(), HasSubstr(path)) << "fail_at " << fail_at;
      EXPECT_THAT(status.message(), HasSubstr("No space left on device"));
    }
    // Creates, writes and closes of 4 tables, the descriptor and CURRENT,
    // the file list and the fsyncs.
    EXPECT_GE(calls_failed, 20);
  }
}

// Borrowed bodies across several tables, each closed on another thread
// while the next fills: whichever write fails, the failure is reported and
// Close() fails; once Close() has returned, nothing reads the bodies again
// (they are freed here; ASan would see a late read) or needs them (the
// database reads back right after they were overwritten).
TEST(LevelDbDirectTest, BorrowedBodiesAcrossTablesWithEveryWriteFailing) {
  TempDir dir;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  constexpr size_t kBody = (3 << 20) + 5;
  constexpr int kValues = 5;
  for (const bool direct_io : {true, false}) {
    SCOPED_TRACE(direct_io ? "O_DIRECT" : "page cache");
    LevelDbOptions tuning;
    tuning.max_file_size = 4 << 20;  // a table per two bodies
    tuning.direct_io = direct_io;
    int calls_failed = 0;
    // 0: nothing fails; then each call in turn, or every third under a
    // sanitizer (checkpoint/util/sanitizers.h).
    for (int fail_at = 0;; fail_at += fail_at == 0 ? 1 : kSweepStride) {
      const std::string path =
          dir.Join(absl::StrCat("db", direct_io ? "_direct" : "", fail_at));
      std::unique_ptr<char, Free> memory(
          static_cast<char*>(std::aligned_alloc(4096, kValues * (4 << 20))));
      Entries expected;
      if (fail_at > 0) io_faults::Arm(fail_at, ENOSPC);
      absl::StatusOr<std::unique_ptr<DB>> opened =
          LevelDbType(tuning).Open(path, DbMode::kNew, WriteOnly());
      absl::Status status = opened.status();
      if (opened.ok()) {
        std::unique_ptr<DB> db = std::move(opened).value();
        std::unique_ptr<Writer> writer = db->NewWriter().value();
        for (int i = 0; i < kValues && status.ok(); ++i) {
          char* const at = memory.get() + i * (4 << 20) + i * 1000;
          const std::string value = Value(i, kBody);
          std::memcpy(at, value.data(), kBody);
          const std::string key = absl::StrFormat("t%d", i);
          const absl::string_view body(at, kBody);
          status = writer->PutBorrowed(key, key, body, Crc32c(body));
          expected[key] = key + value;
        }
        writer.reset();
        absl::Status closed = db->Close();
        if (status.ok()) status = closed;
        EXPECT_EQ(status.ok(), closed.ok()) << "fail_at " << fail_at;
      }
      std::memset(memory.get(), 0xee, kValues * (4 << 20));
      memory.reset();
      const int64_t calls = io_faults::Calls();
      io_faults::Disarm();
      if (fail_at == 0 || calls < fail_at) {
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_TRUE(ReadThroughAdapter(path) == expected);
        if (fail_at == 0) continue;
        break;  // the walk went past the last call
      }
      ++calls_failed;
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted)
          << "fail_at " << fail_at << ": " << status;
      EXPECT_THAT(status.message(), HasSubstr(path)) << "fail_at " << fail_at;
    }
    EXPECT_GE(calls_failed, 20 / kSweepStride);
  }
}

// The write-side calls (io_faults) of writing `puts` into a new database.
int64_t WriteCalls(const std::string& path,
                   const std::vector<std::pair<std::string, std::string>>& puts,
                   const LevelDbOptions& tuning) {
  io_faults::Arm(int64_t{1} << 40, ENOSPC);  // counts, never fails
  WriteDirect(path, puts, tuning);
  const int64_t calls = io_faults::Calls();
  io_faults::Disarm();
  return calls;
}

// JOBGRAPH_DIRECT_IO overrides LevelDbOptions::direct_io, for a user who
// cannot rebuild; anything but 0, 1 or nothing is refused, naming it, before
// anything is written.
TEST(LevelDbDirectTest, JobgraphDirectIoChoosesHowTablesAreWritten) {
  ASSERT_EQ(std::getenv(kDirectIoEnvVar), nullptr);
  // Unset again however the test ends, for the tests after it.
  struct Unset {
    ~Unset() { ::unsetenv(kDirectIoEnvVar); }
  } unset;
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> puts;
  for (int i = 0; i < 4; ++i) {
    puts.emplace_back(absl::StrFormat("big_%d", i), Value(i, 400 << 10));
  }
  LevelDbOptions direct;
  LevelDbOptions cached;
  cached.direct_io = false;
  // The two paths differ in their calls: 256 KiB staged writes against one
  // write per table block run.
  const int64_t direct_calls = WriteCalls(dir.Join("direct"), puts, direct);
  const int64_t cached_calls = WriteCalls(dir.Join("cached"), puts, cached);
  ASSERT_NE(direct_calls, cached_calls);

  ASSERT_EQ(::setenv(kDirectIoEnvVar, "0", 1), 0);
  EXPECT_EQ(WriteCalls(dir.Join("env0"), puts, direct), cached_calls);
  EXPECT_TRUE(ReadThroughAdapter(dir.Join("env0")) == ExpectedEntries(puts));
  ASSERT_EQ(::setenv(kDirectIoEnvVar, "1", 1), 0);
  EXPECT_EQ(WriteCalls(dir.Join("env1"), puts, cached), direct_calls);
  ASSERT_EQ(::setenv(kDirectIoEnvVar, "", 1), 0);
  EXPECT_EQ(DirectIoSetting(true).value(), true);
  EXPECT_EQ(DirectIoSetting(false).value(), false);

  ASSERT_EQ(::setenv(kDirectIoEnvVar, "yes", 1), 0);
  const std::string refused = dir.Join("refused");
  absl::StatusOr<std::unique_ptr<DB>> db =
      LevelDbType().Open(refused, DbMode::kNew, WriteOnly());
  EXPECT_EQ(db.status(),
            absl::InvalidArgumentError(
                "JOBGRAPH_DIRECT_IO=yes is not a setting: use 0 to write "
                "checkpoint table files through the page cache, 1 to write "
                "them with O_DIRECT (the default), or unset it"));
  EXPECT_FALSE(PathExists(refused).value());
  // Reading never writes a table: the setting does not matter there.
  EXPECT_TRUE(ReadThroughAdapter(dir.Join("env0")) == ExpectedEntries(puts));
}

}  // namespace
}  // namespace jobgraph

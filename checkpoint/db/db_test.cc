// The DB contract (db.h), checked against every backend through the
// registry, so that the memory DB used by unit tests behaves like LevelDB.

#include "checkpoint/db/db.h"

#include <sys/mman.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/db/memory_db.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing_util::TempDir;

class DbContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override { memory_db::Clear(); }

  const std::string& type() const { return GetParam(); }
  const DbType& db_type() const {
    return *DbRegistry::Global().Find(type()).value();
  }
  bool Exists(const std::string& path) const {
    absl::StatusOr<bool> exists = db_type().Exists(path);
    CHECK(exists.ok()) << exists.status();
    return *exists;
  }
  std::string GetOrDie(const std::string& path, const std::string& key) {
    return OpenOrDie(path, DbMode::kRead)->Get(key).value();
  }

  absl::StatusOr<std::unique_ptr<DB>> Open(const std::string& path, DbMode mode,
                                           const DbOptions& options = {}) {
    return DbRegistry::Global().Open(type(), path, mode, options);
  }

  std::unique_ptr<DB> OpenOrDie(const std::string& path, DbMode mode,
                                const DbOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<DB>> db = Open(path, mode, options);
    CHECK(db.ok()) << db.status();
    return *std::move(db);
  }

  // Writes `entries` in the given order into a new DB at `path` and closes it.
  void WriteDb(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& entries,
               const DbOptions& options = {}) {
    std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew, options);
    {
      std::unique_ptr<Writer> writer = db->NewWriter().value();
      for (const auto& [key, value] : entries) {
        ASSERT_TRUE(writer->Put(key, value).ok()) << key;
      }
      ASSERT_TRUE(writer->Flush().ok());
    }
    ASSERT_TRUE(db->Close().ok());
  }

  static std::vector<std::pair<std::string, std::string>> ReadAll(DB* db) {
    std::vector<std::pair<std::string, std::string>> entries;
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    for (; cursor->Valid(); cursor->Next()) {
      entries.emplace_back(std::string(cursor->key()),
                           std::string(cursor->value()));
    }
    EXPECT_TRUE(cursor->status().ok()) << cursor->status();
    return entries;
  }

  TempDir dir_;
};

TEST_P(DbContractTest, RoundTripInKeyOrder) {
  const std::string path = dir_.Join("node.0");
  WriteDb(path, {{"b", "2"}, {"a", "1"}, {"c", "3"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  EXPECT_EQ(db->path(), path);
  EXPECT_EQ(db->mode(), DbMode::kRead);
  EXPECT_THAT(ReadAll(db.get()),
              ElementsAre(Pair("a", "1"), Pair("b", "2"), Pair("c", "3")));
  EXPECT_EQ(db->Get("b").value(), "2");
  EXPECT_TRUE(db->Close().ok());
  EXPECT_TRUE(db->closed());
}

TEST_P(DbContractTest, KeysSortBytewiseAsUnsigned) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {{"b", "b"},
                 {"\xff", "ff"},
                 {"a", "a"},
                 {std::string("\x00", 1), "nul"},
                 {"ab", "ab"},
                 {"", "empty key"},
                 {"\x01", "01"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  std::vector<std::string> keys;
  for (const auto& entry : ReadAll(db.get())) keys.push_back(entry.first);
  EXPECT_THAT(keys, ElementsAre("", std::string("\x00", 1), "\x01", "a", "ab",
                                "b", "\xff"));
  EXPECT_EQ(db->Get("").value(), "empty key");
}

TEST_P(DbContractTest, SeekFindsFirstKeyNotLess) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {{"apple", "1"}, {"banana", "2"}, {"cherry", "3"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  ASSERT_TRUE(cursor->Valid());  // A new cursor starts at the first entry.
  EXPECT_EQ(cursor->key(), "apple");
  cursor->Seek("b");
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "banana");
  EXPECT_EQ(cursor->value(), "2");
  cursor->Seek("banana");
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "banana");
  cursor->Seek("bananas");
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "cherry");
  cursor->Next();
  EXPECT_FALSE(cursor->Valid());
  cursor->Seek("zzz");
  EXPECT_FALSE(cursor->Valid());
  EXPECT_TRUE(cursor->status().ok());
  cursor->SeekToFirst();
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "apple");
}

TEST_P(DbContractTest, EmptyDatabase) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  EXPECT_FALSE(db->NewCursor()->Valid());
}

TEST_P(DbContractTest, EmptyAnd16MiBValues) {
  const std::string path = dir_.Join("db");
  std::string big(16 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  WriteDb(path, {{"big", big}, {"empty", ""}, {"small", "x"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  EXPECT_EQ(db->Get("empty").value(), "");
  EXPECT_EQ(db->Get("big").value(), big);
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "big");
  EXPECT_EQ(cursor->value().size(), big.size());
  EXPECT_TRUE(cursor->value() == big);
  cursor->Next();
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "empty");
  EXPECT_EQ(cursor->value(), "");
}

TEST_P(DbContractTest, ManyEntriesAcrossBatches) {
  const std::string path = dir_.Join("db");
  DbOptions options;
  options.writer_batch_bytes = 1000;  // Many batches.
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 5000; ++i) {
    entries.emplace_back(absl::StrFormat("blob_%06d", i),
                         std::string(i % 300, static_cast<char>(i)));
  }
  WriteDb(path, entries, options);
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead, options);
  EXPECT_EQ(ReadAll(db.get()), entries);
}

TEST_P(DbContractTest, NewOnExistingPathIsAlreadyExists) {
  const std::string path = dir_.Join("node.3");
  WriteDb(path, {{"k", "v"}});
  absl::StatusOr<std::unique_ptr<DB>> db = Open(path, DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  // The old database is untouched.
  std::unique_ptr<DB> old = OpenOrDie(path, DbMode::kRead);
  EXPECT_EQ(old->Get("k").value(), "v");
}

TEST_P(DbContractTest, ReadOfMissingPathIsNotFound) {
  const std::string path = dir_.Join("missing.7");
  absl::StatusOr<std::unique_ptr<DB>> db = Open(path, DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr(path));
}

TEST_P(DbContractTest, GetOfMissingKeyIsNotFoundNamingKeyAndPath) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {{"a", "1"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  absl::StatusOr<std::string> value = db->Get("weights#%3");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr("'weights#%3'"));
  EXPECT_THAT(value.status().message(), HasSubstr(path));
}

TEST_P(DbContractTest, ReadOnlyDbRefusesWriters) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  absl::StatusOr<std::unique_ptr<Writer>> writer = db->NewWriter();
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(writer.status().message(), HasSubstr(path));
}

TEST_P(DbContractTest, WritesBecomeVisibleWhenTheirBatchIsWritten) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  ASSERT_TRUE(writer->Put("k", "v1").ok());
  EXPECT_EQ(db->Get("k").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(db->Get("k").value(), "v1");
  // A later Put of the same key replaces the value.
  ASSERT_TRUE(writer->Put("k", "v2").ok());
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(db->Get("k").value(), "v2");
  ASSERT_TRUE(writer->Flush().ok());  // Nothing buffered: a no-op.
  writer.reset();
  EXPECT_TRUE(db->Close().ok());
}

TEST_P(DbContractTest, DestroyingAWriterWritesItsBatch) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  {
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->Put("k", "v").ok());
  }
  ASSERT_TRUE(db->Close().ok());
  db = OpenOrDie(path, DbMode::kRead);
  EXPECT_EQ(db->Get("k").value(), "v");
}

TEST_P(DbContractTest, CursorSeesASnapshot) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  ASSERT_TRUE(writer->Put("a", "1").ok());
  ASSERT_TRUE(writer->Flush().ok());
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  ASSERT_TRUE(writer->Put("b", "2").ok());
  ASSERT_TRUE(writer->Flush().ok());
  ASSERT_TRUE(cursor->Valid());
  EXPECT_EQ(cursor->key(), "a");
  cursor->Next();
  EXPECT_FALSE(cursor->Valid());
  cursor.reset();
  writer.reset();
  EXPECT_TRUE(db->Close().ok());
}

TEST_P(DbContractTest, CloseRefusesWhileCursorsOrWritersLive) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  absl::Status status = db->Close();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("1 cursor(s) and 1 writer(s)"));
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_FALSE(db->closed());
  cursor.reset();
  writer.reset();
  EXPECT_TRUE(db->Close().ok());
  EXPECT_TRUE(db->Close().ok());  // A second Close is a no-op.
}

TEST_P(DbContractTest, ClosedDbRefusesEverything) {
  const std::string path = dir_.Join("db");
  WriteDb(path, {{"a", "1"}});
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
  ASSERT_TRUE(db->Close().ok());
  std::unique_ptr<Cursor> cursor = db->NewCursor();
  EXPECT_FALSE(cursor->Valid());
  EXPECT_EQ(cursor->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cursor->status().message(), HasSubstr(path));
  EXPECT_EQ(db->Get("a").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(db->NewWriter().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(DbContractTest, PathIsOpenThroughOneDbAtATime) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  absl::StatusOr<std::unique_ptr<DB>> again = Open(path, DbMode::kRead);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(path));
  ASSERT_TRUE(db->Close().ok());
  again = Open(path, DbMode::kRead);
  EXPECT_TRUE(again.ok()) << again.status();
  // Destroying without Close() also releases the path.
  again->reset();
  EXPECT_TRUE(Open(path, DbMode::kRead).ok());
}

TEST_P(DbContractTest, OversizedEntryIsInvalidArgument) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  // Address space only: the pages are never touched, so no memory is used.
  const size_t size = kMaxDbEntryBytes;
  void* huge = ::mmap(nullptr, size, PROT_READ,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(huge, MAP_FAILED);
  absl::Status status =
      writer->Put("k", absl::string_view(static_cast<char*>(huge), size));
  ::munmap(huge, size);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("'k'"));
  // Nothing was written, so the DB is still complete.
  ASSERT_TRUE(writer->Put("k2", "ok").ok());
  writer.reset();
  EXPECT_TRUE(db->Close().ok());
}

// PutBorrowed stores head + body, for every backend and both write paths
// (the direct LevelDB writer takes write-only databases), and is refused
// like Put when the two together are too large.
TEST_P(DbContractTest, PutBorrowedStoresHeadAndBody) {
  std::string body(3 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i % 251);
  for (bool write_only : {false, true}) {
    SCOPED_TRACE(write_only ? "write-only" : "readable");
    const std::string path = dir_.Join(write_only ? "direct" : "db");
    DbOptions options;
    options.write_only = write_only;
    std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew, options);
    {
      std::unique_ptr<Writer> writer = db->NewWriter().value();
      ASSERT_TRUE(writer->PutBorrowed("a", "head", body, Crc32c(body)).ok());
      ASSERT_TRUE(writer->PutBorrowed("b", "h2", "tiny", Crc32c("tiny")).ok());
      // Address space only, never touched.
      void* huge = ::mmap(nullptr, kMaxDbEntryBytes, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      ASSERT_NE(huge, MAP_FAILED);
      const absl::Status refused = writer->PutBorrowed(
          "c", "h",
          absl::string_view(static_cast<char*>(huge), kMaxDbEntryBytes),
          /*body_crc32c=*/0);
      ::munmap(huge, kMaxDbEntryBytes);
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(refused.message(), HasSubstr("'c'"));
      ASSERT_TRUE(writer->Flush().ok());
    }
    ASSERT_TRUE(db->Close().ok());
    std::unique_ptr<DB> read = OpenOrDie(path, DbMode::kRead);
    EXPECT_THAT(ReadAll(read.get()),
                ElementsAre(Pair("a", "head" + body), Pair("b", "h2tiny")));
  }
}

TEST_P(DbContractTest, WritersOnSeveralThreads) {
  const std::string path = dir_.Join("db");
  std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 200;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&db, t] {
        std::unique_ptr<Writer> writer = db->NewWriter().value();
        for (int i = 0; i < kKeysPerThread; ++i) {
          CHECK(writer->Put(absl::StrFormat("t%d_%04d", t, i), "v").ok());
          if (i % 50 == 0) {
            // Reads race with other threads' batches: found or not, never
            // an error.
            absl::Status status = db->Get("t0_0000").status();
            CHECK(status.ok() || absl::IsNotFound(status)) << status;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  ASSERT_TRUE(db->Close().ok());
  db = OpenOrDie(path, DbMode::kRead);
  EXPECT_EQ(ReadAll(db.get()).size(), kThreads * kKeysPerThread);
}

// --- The DbType operations that the commit protocol is built on.

TEST_P(DbContractTest, ExistsForAbsentUnfinishedAndFinishedDatabases) {
  const std::string path = dir_.Join("node.0");
  EXPECT_FALSE(Exists(path));
  {
    std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kNew);
    EXPECT_TRUE(Exists(path));  // Being written.
    // Destroyed without Close(): unfinished, but still a database that a
    // later save must be able to replace.
  }
  EXPECT_TRUE(Exists(path));
  ASSERT_TRUE(db_type().Remove(path).ok());
  WriteDb(path, {{"k", "v"}});
  EXPECT_TRUE(Exists(path));
}

TEST_P(DbContractTest, InstallIntoAnEmptyName) {
  const std::string temp = dir_.Join(".node.0.tmp-1-0");
  const std::string path = dir_.Join("node.0");
  WriteDb(temp, {{"k", "new"}});
  EXPECT_TRUE(db_type().CheckInstallable(path).ok());
  absl::Status status = db_type().Install(temp, path);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(Exists(temp));
  EXPECT_TRUE(Exists(path));
  EXPECT_EQ(GetOrDie(path, "k"), "new");
  EXPECT_EQ(Open(temp, DbMode::kRead).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(DbContractTest, InstallReplacesAnExistingDatabase) {
  const std::string temp = dir_.Join(".node.0.tmp-1-0");
  const std::string path = dir_.Join("node.0");
  WriteDb(path, {{"k", "old"}, {"only_old", "x"}});
  WriteDb(temp, {{"k", "new"}});
  EXPECT_TRUE(db_type().CheckInstallable(path).ok());
  absl::Status status = db_type().Install(temp, path);
  ASSERT_TRUE(status.ok()) << status;
  {
    std::unique_ptr<DB> db = OpenOrDie(path, DbMode::kRead);
    EXPECT_THAT(ReadAll(db.get()), ElementsAre(Pair("k", "new")));
  }
  // The old copy is deleted, possibly in the background.
  WaitForBackgroundDeletes();
  EXPECT_FALSE(Exists(temp));
  EXPECT_EQ(Open(temp, DbMode::kRead).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(DbContractTest, InstallOfAMissingDatabaseIsNotFound) {
  const std::string temp = dir_.Join(".node.0.tmp-1-0");
  const std::string path = dir_.Join("node.0");
  WriteDb(path, {{"k", "old"}});
  absl::Status status = db_type().Install(temp, path);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(temp));
  EXPECT_EQ(GetOrDie(path, "k"), "old");
}

TEST_P(DbContractTest, RemoveDeletesADatabase) {
  const std::string path = dir_.Join("node.0");
  WriteDb(path, {{"k", "v"}});
  absl::Status status = db_type().Remove(path);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(Exists(path));
  EXPECT_EQ(Open(path, DbMode::kRead).status().code(),
            absl::StatusCode::kNotFound);
  status = db_type().Remove(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(path));
  // The name can hold a new database.
  WriteDb(path, {{"k", "again"}});
  EXPECT_EQ(GetOrDie(path, "k"), "again");
}

// A LevelDB database whose CURRENT file is lost cannot be opened, but it is
// still a database: a re-save of its epoch must replace it.
TEST(LevelDbTypeTest, DatabaseWithoutCurrentExistsAndIsReplaced) {
  TempDir dir;
  const DbType& type = *DbRegistry::Global().Find("leveldb").value();
  const std::string path = dir.Join("node.0");
  const std::string temp = dir.Join(".node.0.tmp-1-0");
  for (const std::string& p : {path, temp}) {
    std::unique_ptr<DB> db = type.Open(p, DbMode::kNew).value();
    ASSERT_TRUE(db->NewWriter().value()->Put("k", p).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  ASSERT_TRUE(RemoveRecursively(JoinPath(path, "CURRENT")).ok());
  EXPECT_EQ(type.Open(path, DbMode::kRead).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(type.Exists(path).value());
  EXPECT_TRUE(type.CheckInstallable(path).ok());
  absl::Status status = type.Install(temp, path);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(type.Open(path, DbMode::kRead).value()->Get("k").value(), temp);
  WaitForBackgroundDeletes();
  EXPECT_FALSE(PathExists(temp).value());
}

INSTANTIATE_TEST_SUITE_P(AllBackends, DbContractTest,
                         ::testing::Values("leveldb", "LevelDB", "memory"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "LevelDB" ? "LevelDBAlias"
                                                          : info.param;
                         });

}  // namespace
}  // namespace jobgraph

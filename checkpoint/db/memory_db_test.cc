// Memory-DB-specific behaviour; the general DB contract is in db_test.cc.

#include "checkpoint/db/memory_db.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/util/pause_gate.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class MemoryDbTest : public ::testing::Test {
 protected:
  void SetUp() override { memory_db::Clear(); }
  void TearDown() override { memory_db::Clear(); }

  static const DbType& Type() {
    return *DbRegistry::Global().Find(kMemoryDbType).value();
  }

  static void Write(const std::string& path, const std::string& key,
                    const std::string& value) {
    std::unique_ptr<DB> db =
        DbRegistry::Global().Open("memory", path, DbMode::kNew).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->Put(key, value).ok());
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
};

TEST_F(MemoryDbTest, StoreIsKeyedByPath) {
  Write("/ckpt/a.0", "k", "a");
  Write("/ckpt/b.0", "k", "b");
  EXPECT_THAT(memory_db::Paths(), ElementsAre("/ckpt/a.0", "/ckpt/b.0"));
  EXPECT_TRUE(Type().Exists("/ckpt/a.0").value());
  EXPECT_FALSE(Type().Exists("/ckpt/c.0").value());
  std::unique_ptr<DB> db =
      DbRegistry::Global().Open("memory", "/ckpt/b.0", DbMode::kRead).value();
  EXPECT_EQ(db->Get("k").value(), "b");
}

TEST_F(MemoryDbTest, InstallAndRemove) {
  Write("/ckpt/tmp", "k", "v");
  Write("/ckpt/other", "k", "o");
  // Install replaces the database at the final path in one step.
  ASSERT_TRUE(Type().Install("/ckpt/tmp", "/ckpt/other").ok());
  EXPECT_THAT(memory_db::Paths(), ElementsAre("/ckpt/other"));
  Write("/ckpt/tmp", "k", "v2");
  ASSERT_TRUE(Type().Install("/ckpt/tmp", "/ckpt/node.0").ok());
  EXPECT_FALSE(Type().Exists("/ckpt/tmp").value());
  {
    std::unique_ptr<DB> db = DbRegistry::Global()
                                 .Open("memory", "/ckpt/node.0", DbMode::kRead)
                                 .value();
    EXPECT_EQ(db->Get("k").value(), "v2");
    // An open database can be neither installed, replaced nor removed.
    EXPECT_EQ(Type().Remove("/ckpt/node.0").code(),
              absl::StatusCode::kFailedPrecondition);
    absl::Status status = Type().Install("/ckpt/node.0", "/x");
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("/ckpt/node.0 is open"));
    status = Type().Install("/ckpt/other", "/ckpt/node.0");
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("/ckpt/node.0 is open"));
    EXPECT_TRUE(Type().Exists("/ckpt/other").value());
  }
  EXPECT_EQ(DbRegistry::Global()
                .Open("memory", "/ckpt/other", DbMode::kRead)
                .value()
                ->Get("k")
                .value(),
            "v");
  ASSERT_TRUE(Type().Remove("/ckpt/node.0").ok());
  absl::Status status = Type().Remove("/ckpt/node.0");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/ckpt/node.0"));
  status = Type().Install("/nope", "/x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/nope"));
  EXPECT_FALSE(Type().Exists("/x").value());
}

TEST_F(MemoryDbTest, ClearForgetsEverythingButOpenDbsKeepWorking) {
  std::unique_ptr<DB> db =
      DbRegistry::Global().Open("memory", "/p", DbMode::kNew).value();
  std::unique_ptr<Writer> writer = db->NewWriter().value();
  ASSERT_TRUE(writer->Put("k", "v").ok());
  ASSERT_TRUE(writer->Flush().ok());
  memory_db::Clear();
  EXPECT_THAT(memory_db::Paths(), IsEmpty());
  EXPECT_EQ(db->Get("k").value(), "v");
  writer.reset();
  ASSERT_TRUE(db->Close().ok());
  // The path is free again.
  EXPECT_EQ(
      DbRegistry::Global().Open("memory", "/p", DbMode::kRead).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_TRUE(DbRegistry::Global().Open("memory", "/p", DbMode::kNew).ok());
}

// DbType::Copy's default, which the memory type uses: every entry through a
// cursor into a new database that is closed (made durable) before it
// returns.
TEST_F(MemoryDbTest, CopyCopiesEveryEntry) {
  {
    std::unique_ptr<DB> db =
        DbRegistry::Global().Open("memory", "/a/n.0", DbMode::kNew).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    ASSERT_TRUE(writer->Put("k1", "one").ok());
    ASSERT_TRUE(writer->Put("k2", "").ok());
    ASSERT_TRUE(writer->Put("k3", std::string(1000, 'x')).ok());
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  absl::StatusOr<int64_t> bytes =
      Type().Copy("/a/n.0", "/b/n.0", CopyOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 2 + 3 + 2 + 0 + 2 + 1000);
  EXPECT_THAT(memory_db::Paths(), ElementsAre("/a/n.0", "/b/n.0"));
  for (const char* path : {"/a/n.0", "/b/n.0"}) {
    SCOPED_TRACE(path);
    std::unique_ptr<DB> db =
        DbRegistry::Global().Open("memory", path, DbMode::kRead).value();
    std::unique_ptr<Cursor> cursor = db->NewCursor();
    std::string entries;
    for (; cursor->Valid(); cursor->Next()) {
      absl::StrAppend(&entries, cursor->key(), "=", cursor->value().size(),
                      " ");
    }
    EXPECT_EQ(entries, "k1=3 k2=0 k3=1000 ");
  }
}

TEST_F(MemoryDbTest, TheCopyWaitsAtItsPauseGate) {
  Write("/a/n.0", "k", "value");
  PauseGate gate;
  CopyOptions options;
  options.pause = &gate;
  absl::StatusOr<int64_t> bytes = absl::UnknownError("not run");
  EXPECT_TRUE(testing_util::RunStoppedAtGate(
      gate, [&] { bytes = Type().Copy("/a/n.0", "/b/n.0", options); }, [] {}));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 1 + 5);
  EXPECT_EQ(DbRegistry::Global()
                .Open("memory", "/b/n.0", DbMode::kRead)
                .value()
                ->Get("k")
                .value(),
            "value");
  // Before the one entry (where it blocked) and before the close.
  EXPECT_EQ(gate.checks(), 2);
  EXPECT_EQ(gate.blocked(), 1);
}

TEST_F(MemoryDbTest, CopyErrorsNameThePathsAndLeaveNoCopy) {
  absl::StatusOr<int64_t> bytes =
      Type().Copy("/a/n.0", "/b/n.0", CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bytes.status().message(),
            "cannot copy DB /a/n.0 to /b/n.0: memory DB /a/n.0 does not exist");
  EXPECT_THAT(memory_db::Paths(), IsEmpty());

  Write("/a/n.0", "k", "v");
  Write("/b/n.0", "k", "old");
  bytes = Type().Copy("/a/n.0", "/b/n.0", CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(bytes.status().message(),
            "cannot copy DB /a/n.0 to /b/n.0: memory DB /b/n.0 already exists");
  // What was at the target is not the copy's: it stays.
  EXPECT_EQ(DbRegistry::Global()
                .Open("memory", "/b/n.0", DbMode::kRead)
                .value()
                ->Get("k")
                .value(),
            "old");

  // A database being written is not finished.
  std::unique_ptr<DB> open =
      DbRegistry::Global().Open("memory", "/a/n.1", DbMode::kNew).value();
  bytes = Type().Copy("/a/n.1", "/b/n.1", CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      bytes.status().message(),
      "cannot copy DB /a/n.1 to /b/n.1: memory DB /a/n.1 is already open");
  EXPECT_THAT(memory_db::Paths(), ElementsAre("/a/n.0", "/a/n.1", "/b/n.0"));
}

// A cursor that reports damage after `good` entries, as a backend that
// checks its blocks' checksums reports a damaged block.
class DamagedCursor final : public Cursor {
 public:
  DamagedCursor(std::unique_ptr<Cursor> inner, std::string path, int good)
      : inner_(std::move(inner)), path_(std::move(path)), good_(good) {}
  void SeekToFirst() override {
    inner_->SeekToFirst();
    seen_ = 0;
  }
  void Seek(absl::string_view target) override { inner_->Seek(target); }
  void Next() override {
    inner_->Next();
    ++seen_;
  }
  bool Valid() const override { return inner_->Valid() && seen_ < good_; }
  absl::string_view key() const override { return inner_->key(); }
  absl::string_view value() const override { return inner_->value(); }
  absl::Status status() const override {
    if (inner_->Valid() && seen_ >= good_) {
      return absl::DataLossError(
          absl::StrCat("checksum mismatch in a block of DB ", path_));
    }
    return inner_->status();
  }

 private:
  const std::unique_ptr<Cursor> inner_;
  const std::string path_;
  const int good_;
  int seen_ = 0;
};

// A memory DB whose cursors find damage after `good` entries.
class DamagedDb final : public DB {
 public:
  DamagedDb(std::unique_ptr<DB> inner, int good)
      : DB(inner->path(), inner->mode()),
        inner_(std::move(inner)),
        good_(good) {}

 protected:
  std::unique_ptr<Cursor> NewCursorImpl() override {
    return std::make_unique<DamagedCursor>(inner_->NewCursor(), path(), good_);
  }
  std::unique_ptr<Writer> NewWriterImpl() override {
    return inner_->NewWriter().value();
  }
  absl::StatusOr<std::string> GetImpl(absl::string_view key,
                                      bool verify) override {
    return verify ? inner_->GetVerified(key) : inner_->Get(key);
  }
  absl::Status CloseImpl() override { return inner_->Close(); }

 private:
  const std::unique_ptr<DB> inner_;
  const int good_;
};

// The memory type, with damage in every database it reads.
class DamagedMemoryType final : public DbType {
 public:
  absl::StatusOr<bool> Exists(const std::string& path) const override {
    return memory_.Exists(path);
  }
  absl::Status CheckInstallable(const std::string& path) const override {
    return memory_.CheckInstallable(path);
  }
  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override {
    return memory_.Install(temp_path, final_path);
  }
  absl::Status Remove(const std::string& path) const override {
    return memory_.Remove(path);
  }

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override {
    absl::StatusOr<std::unique_ptr<DB>> db = memory_.Open(path, mode, options);
    if (!db.ok() || mode != DbMode::kRead) return db;
    return std::unique_ptr<DB>(
        std::make_unique<DamagedDb>(std::move(*db), /*good=*/2));
  }

 private:
  const DbType& memory_ = *DbRegistry::Global().Find(kMemoryDbType).value();
};

TEST_F(MemoryDbTest, DamageTheCursorFindsIsDataLossNamingTheKey) {
  {
    std::unique_ptr<DB> db =
        DbRegistry::Global().Open("memory", "/a/n.0", DbMode::kNew).value();
    std::unique_ptr<Writer> writer = db->NewWriter().value();
    for (const char* key : {"k1", "k2", "k3", "k4"}) {
      ASSERT_TRUE(writer->Put(key, "v").ok());
    }
    writer.reset();
    ASSERT_TRUE(db->Close().ok());
  }
  absl::StatusOr<int64_t> bytes =
      DamagedMemoryType().Copy("/a/n.0", "/b/n.0", CopyOptions());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bytes.status().message(),
            "cannot copy DB /a/n.0 to /b/n.0: reading the entry after key "
            "'k2': checksum mismatch in a block of DB /a/n.0");
  // The partial copy is gone; the source is as it was.
  EXPECT_THAT(memory_db::Paths(), ElementsAre("/a/n.0"));
}

}  // namespace
}  // namespace jobgraph

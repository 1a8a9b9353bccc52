// Memory-DB-specific behaviour; the general DB contract is in db_test.cc.

#include "checkpoint/memory_db.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/db.h"
#include "checkpoint/db_registry.h"
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
  EXPECT_TRUE(memory_db::Exists("/ckpt/a.0"));
  EXPECT_FALSE(memory_db::Exists("/ckpt/c.0"));
  std::unique_ptr<DB> db =
      DbRegistry::Global().Open("memory", "/ckpt/b.0", DbMode::kRead).value();
  EXPECT_EQ(db->Get("k").value(), "b");
}

TEST_F(MemoryDbTest, RenameAndRemove) {
  Write("/ckpt/tmp", "k", "v");
  Write("/ckpt/other", "k", "o");
  absl::Status status = memory_db::Rename("/ckpt/tmp", "/ckpt/other");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("/ckpt/other"));
  ASSERT_TRUE(memory_db::Rename("/ckpt/tmp", "/ckpt/node.0").ok());
  EXPECT_FALSE(memory_db::Exists("/ckpt/tmp"));
  {
    std::unique_ptr<DB> db = DbRegistry::Global()
                                 .Open("memory", "/ckpt/node.0", DbMode::kRead)
                                 .value();
    EXPECT_EQ(db->Get("k").value(), "v");
    // An open database can be neither renamed nor removed.
    EXPECT_EQ(memory_db::Remove("/ckpt/node.0").code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(memory_db::Rename("/ckpt/node.0", "/x").code(),
              absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(memory_db::Remove("/ckpt/node.0").ok());
  status = memory_db::Remove("/ckpt/node.0");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/ckpt/node.0"));
  EXPECT_EQ(memory_db::Rename("/nope", "/x").code(),
            absl::StatusCode::kNotFound);
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

}  // namespace
}  // namespace jobgraph

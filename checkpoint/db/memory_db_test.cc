// Memory-DB-specific behaviour; the general DB contract is in db_test.cc.

#include "checkpoint/db/memory_db.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
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

}  // namespace
}  // namespace jobgraph

#include "checkpoint/db_registry.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

absl::StatusOr<std::unique_ptr<DB>> FailingFactory(const std::string& path,
                                                   DbMode mode,
                                                   const DbOptions& options) {
  return absl::UnavailableError("factory for " + path + " called");
}

TEST(DbRegistryTest, BuiltInTypesAreRegistered) {
  EXPECT_THAT(DbRegistry::Global().Types(),
              IsSupersetOf({"LevelDB", "leveldb", "memory"}));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("leveldb"));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("LevelDB"));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("memory"));
  EXPECT_FALSE(DbRegistry::Global().IsRegistered("minidb"));
}

TEST(DbRegistryTest, UnknownTypeListsKnownTypes) {
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("rocksdb", "/tmp/x", DbMode::kRead);
  ASSERT_EQ(db.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr("unknown DB type 'rocksdb'"));
  EXPECT_THAT(db.status().message(), HasSubstr("/tmp/x"));
  EXPECT_THAT(db.status().message(), HasSubstr("leveldb"));
  EXPECT_THAT(db.status().message(), HasSubstr("memory"));
}

TEST(DbRegistryTest, DuplicateRegistrationIsAlreadyExists) {
  absl::Status status =
      DbRegistry::Global().Register("leveldb", &FailingFactory);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("'leveldb'"));

  DbRegistry registry;
  ASSERT_TRUE(registry.Register("fake", &FailingFactory).ok());
  status = registry.Register("fake", &FailingFactory);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("'fake'"));
}

TEST(DbRegistryTest, OpenCallsTheRegisteredFactory) {
  DbRegistry registry;
  ASSERT_TRUE(registry.Register("fake", &FailingFactory).ok());
  absl::StatusOr<std::unique_ptr<DB>> db =
      registry.Open("fake", "/some/path", DbMode::kNew);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(db.status().message(), "factory for /some/path called");
  EXPECT_THAT(registry.Types(), ::testing::ElementsAre("fake"));
}

TEST(DbRegistryTest, EmptyRegistryAndEmptyName) {
  DbRegistry registry;
  absl::StatusOr<std::unique_ptr<DB>> db =
      registry.Open("leveldb", "/p", DbMode::kRead);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr("(none registered)"));
  EXPECT_EQ(registry.Register("", &FailingFactory).code(),
            absl::StatusCode::kInvalidArgument);
}

void RegisterMemoryAgain() { JG_REGISTER_DB_TYPE("memory", &FailingFactory); }

TEST(DbRegistryDeathTest, StaticRegistrationOfADuplicateIsFatal) {
  EXPECT_DEATH(RegisterMemoryAgain(), "DB type 'memory' is already registered");
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/db/db_registry.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/db/db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

// A DB type whose every operation fails, saying which one was called.
class FailingDbType final : public DbType {
 public:
  absl::StatusOr<bool> Exists(const std::string& path) const override {
    return Called("Exists", path);
  }
  absl::Status CheckInstallable(const std::string& path) const override {
    return Called("CheckInstallable", path);
  }
  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override {
    return Called("Install", final_path);
  }
  absl::Status Remove(const std::string& path) const override {
    return Called("Remove", path);
  }

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override {
    return absl::UnavailableError("factory for " + path + " called");
  }

 private:
  static absl::Status Called(const std::string& what, const std::string& path) {
    return absl::UnavailableError(what + " of " + path + " called");
  }
};

std::shared_ptr<const DbType> Failing() {
  return std::make_shared<FailingDbType>();
}

TEST(DbRegistryTest, BuiltInTypesAreRegistered) {
  EXPECT_THAT(DbRegistry::Global().Types(),
              IsSupersetOf({"LevelDB", "leveldb", "memory"}));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("leveldb"));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("LevelDB"));
  EXPECT_TRUE(DbRegistry::Global().IsRegistered("memory"));
  EXPECT_FALSE(DbRegistry::Global().IsRegistered("minidb"));
}

TEST(DbRegistryTest, DefaultTypeIsRegistered) {
  EXPECT_TRUE(DbRegistry::Global().IsRegistered(kDefaultDbType));
}

TEST(DbRegistryTest, FindReturnsTheRegisteredObject) {
  DbRegistry registry;
  std::shared_ptr<const DbType> type = Failing();
  ASSERT_TRUE(registry.Register("fake", type).ok());
  ASSERT_TRUE(registry.Register("alias", type).ok());
  EXPECT_EQ(registry.Find("fake").value(), type.get());
  EXPECT_EQ(registry.Find("alias").value(), type.get());
  absl::Status status = registry.Find("Fake").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "unknown DB type 'Fake'; known types: alias, fake");
  EXPECT_EQ((*registry.Find("fake"))->Remove("/p").message(),
            "Remove of /p called");
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
  absl::Status status = DbRegistry::Global().Register("leveldb", Failing());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("'leveldb'"));

  DbRegistry registry;
  ASSERT_TRUE(registry.Register("fake", Failing()).ok());
  status = registry.Register("fake", Failing());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("'fake'"));
}

TEST(DbRegistryTest, OpenCallsTheRegisteredFactory) {
  DbRegistry registry;
  ASSERT_TRUE(registry.Register("fake", Failing()).ok());
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
  EXPECT_EQ(registry.Register("", Failing()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("null", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

void RegisterMemoryAgain() { JG_REGISTER_DB_TYPE("memory", Failing()); }

TEST(DbRegistryDeathTest, StaticRegistrationOfADuplicateIsFatal) {
  EXPECT_DEATH(RegisterMemoryAgain(), "DB type 'memory' is already registered");
}

}  // namespace
}  // namespace jobgraph

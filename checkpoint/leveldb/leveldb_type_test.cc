// LevelDbType's file-system side (leveldb_type.cc): what it recognises as a
// database and what installing one may replace.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using testing_util::TempDir;

void WriteSmallDb(const std::string& path) {
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
  ASSERT_TRUE(db->NewWriter().value()->Put("k", path).ok());
  ASSERT_TRUE(db->Close().ok());
}

TEST(LevelDbTypeTest, OnlyDirectoriesWithLevelDbFilesAreDatabases) {
  TempDir dir;
  const LevelDbType type;
  EXPECT_FALSE(type.Exists(dir.Join("missing")).value());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("file"), "x").ok());
  EXPECT_FALSE(type.Exists(dir.Join("file")).value());
  ASSERT_TRUE(CreateDir(dir.Join("empty")).ok());
  EXPECT_FALSE(type.Exists(dir.Join("empty")).value());
  ASSERT_TRUE(CreateDir(dir.Join("foreign")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("foreign/notes"), "x").ok());
  EXPECT_FALSE(type.Exists(dir.Join("foreign")).value());
  // Any one of LevelDB's own files marks a (damaged) database.
  for (const char* name : {"CURRENT", "LOCK", "MANIFEST-000002"}) {
    const std::string path = dir.Join(absl::StrCat("only_", name));
    ASSERT_TRUE(CreateDir(path).ok());
    ASSERT_TRUE(WriteFileAtomically(JoinPath(path, name), "").ok());
    EXPECT_TRUE(type.Exists(path).value()) << name;
  }
}

TEST(LevelDbTypeTest, InstallNeverReplacesWhatIsNotADatabase) {
  TempDir dir;
  const LevelDbType type;
  const std::string temp = dir.Join(".target.tmp-1-0");
  WriteSmallDb(temp);

  const std::string file = dir.Join("file");
  ASSERT_TRUE(WriteFileAtomically(file, "precious").ok());
  absl::Status status = type.CheckInstallable(file);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat(file,
                         " exists and is not a directory, so it is not a "
                         "database that saving may replace; remove it or "
                         "choose another path"));
  EXPECT_EQ(type.Install(temp, file).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadFileToString(file).value(), "precious");

  const std::string folder = dir.Join("folder");
  ASSERT_TRUE(CreateDir(folder).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(folder, "notes"), "mine").ok());
  status = type.Install(temp, folder);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat(folder,
                         " is a non-empty directory that is not a LevelDB "
                         "database (no CURRENT, LOCK or MANIFEST-* file), so "
                         "saving may not replace it; remove it or choose "
                         "another path"));
  EXPECT_EQ(ListDir(folder).value(), std::vector<std::string>{"notes"});
  // The new database is still there, for the caller to remove.
  EXPECT_TRUE(type.Exists(temp).value());
}

TEST(LevelDbTypeTest, InstallReplacesAnEmptyDirectory) {
  TempDir dir;
  const LevelDbType type;
  const std::string temp = dir.Join(".db.tmp-1-0");
  const std::string path = dir.Join("db");
  WriteSmallDb(temp);
  ASSERT_TRUE(CreateDir(path).ok());
  EXPECT_TRUE(type.CheckInstallable(path).ok());
  ASSERT_TRUE(type.Install(temp, path).ok());
  EXPECT_EQ(ListDir(dir.path()).value(), std::vector<std::string>{"db"});
  EXPECT_EQ(type.Open(path, DbMode::kRead).value()->Get("k").value(), temp);
}

TEST(LevelDbTypeTest, InstallableNeedsTheParentDirectory) {
  TempDir dir;
  const std::string path = dir.Join("missing/node.0");
  absl::Status status = LevelDbType().CheckInstallable(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat("the directory ", dir.Join("missing"),
                         " that should hold checkpoint database ", path,
                         " does not exist; create it first (the checkpoint "
                         "manager does)"));
}

TEST(LevelDbTypeTest, NoOtherProcessHasADatabaseOpen) {
  TempDir dir;
  const std::string path = dir.Join("db");
  EXPECT_EQ(LevelDbType().OpenInAnotherProcess(path), std::nullopt);
  std::unique_ptr<DB> db = LevelDbType().Open(path, DbMode::kNew).value();
  // This process's own lock does not count.
  EXPECT_EQ(LevelDbType().OpenInAnotherProcess(path), std::nullopt);
}

}  // namespace
}  // namespace jobgraph

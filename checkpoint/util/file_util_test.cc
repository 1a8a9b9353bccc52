#include "checkpoint/util/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::TempDir;

TEST(FileUtilTest, JoinPathAndParentDir) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(ParentDir("a/b"), "a");
  EXPECT_EQ(ParentDir("a/b/"), "a");
  EXPECT_EQ(ParentDir("a//b"), "a");
  EXPECT_EQ(ParentDir("/b"), "/");
  EXPECT_EQ(ParentDir("/"), "/");
  EXPECT_EQ(ParentDir("b"), ".");
  EXPECT_EQ(ParentDir("/x/y/z"), "/x/y");
}

TEST(FileUtilTest, WriteFileAtomicallyCreatesAndReplaces) {
  TempDir dir;
  const std::string path = dir.Join("manifest");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  EXPECT_EQ(ReadFileToString(path).value(), "first");
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(ReadFileToString(path).value(), "second, longer");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(ReadFileToString(path).value(), "");
  // No temporary file is left behind.
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("manifest"));
}

TEST(FileUtilTest, LinkFileAtomicallyGivesAFileASecondName) {
  TempDir dir;
  const std::string log = dir.Join("log");
  const std::string copy = dir.Join("log.prev");
  ASSERT_TRUE(WriteFileAtomically(log, "first").ok());
  ASSERT_TRUE(LinkFileAtomically(log, copy).value());
  EXPECT_EQ(ReadFileToString(copy).value(), "first");
  // Replacing the first name leaves the second with the old bytes.
  ASSERT_TRUE(WriteFileAtomically(log, "second").ok());
  EXPECT_EQ(ReadFileToString(copy).value(), "first");
  ASSERT_TRUE(LinkFileAtomically(log, copy).value());
  EXPECT_EQ(ReadFileToString(copy).value(), "second");
  // Linking again while both names are one file: rename(2) then does
  // nothing, and the temporary name must not stay behind.
  ASSERT_TRUE(LinkFileAtomically(log, copy).value());
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("log", "log.prev"));
  absl::Status missing = LinkFileAtomically(dir.Join("nothing"), copy).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr(dir.Join("nothing")));
  EXPECT_EQ(ReadFileToString(copy).value(), "second");
}

TEST(FileUtilTest, WriteFileAtomicallyLargeContents) {
  TempDir dir;
  const std::string path = dir.Join("big");
  std::string contents(3 << 20, '\0');
  for (size_t i = 0; i < contents.size(); ++i) {
    contents[i] = static_cast<char>(i * 7);
  }
  ASSERT_TRUE(WriteFileAtomically(path, contents).ok());
  EXPECT_EQ(ReadFileToString(path).value(), contents);
}

TEST(FileUtilTest, WriteFileAtomicallyMissingParentIsNotFound) {
  TempDir dir;
  const std::string path = dir.Join("no_such_dir/manifest");
  absl::Status status = WriteFileAtomically(path, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("no_such_dir")));
  EXPECT_FALSE(PathExists(dir.Join("no_such_dir")).value());
}

TEST(FileUtilTest, AnAtomicFileWriterMakesItsFileAheadAndRenamesOnCommit) {
  TempDir dir;
  const std::string path = dir.Join("manifest");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Made ahead, empty, beside the file it will replace, which is untouched.
  std::vector<std::string> names = ListDir(dir.path()).value();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "manifest");
  EXPECT_EQ(names[1].rfind(absl::StrCat("manifest.tmp-", ::getpid(), "-"), 0),
            0u)
      << names[1];
  EXPECT_EQ(ReadFileToString(dir.Join(names[1])).value(), "");
  EXPECT_EQ(ReadFileToString(path).value(), "old");
  // Through an open descriptor of the directory, for its fsync.
  const int dir_fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir_fd, 0);
  int renames_seen = 0;
  absl::Status committed = writer->Commit(
      "new",
      [&]() {
        // Durable under the temporary name, not renamed yet.
        ++renames_seen;
        EXPECT_EQ(ReadFileToString(path).value(), "old");
        return absl::OkStatus();
      },
      dir_fd);
  ::close(dir_fd);
  ASSERT_TRUE(committed.ok()) << committed;
  EXPECT_EQ(renames_seen, 1);
  EXPECT_EQ(ReadFileToString(path).value(), "new");
  writer = absl::UnknownError("destroyed");  // the destructor: nothing to undo
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("manifest"));
}

TEST(FileUtilTest, AnAtomicFileWriterLeftUncommittedLeavesNothing) {
  TempDir dir;
  const std::string path = dir.Join("manifest");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  {
    absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    // Moved: only the writer that holds the file removes it.
    AtomicFileWriter moved = *std::move(writer);
    EXPECT_EQ(ListDir(dir.path()).value().size(), 2u);
  }
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("manifest"));
  EXPECT_EQ(ReadFileToString(path).value(), "old");
  // A failure before the rename (a failpoint's) keeps the old file too.
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::Status failed =
      writer->Commit("new", [] { return absl::AbortedError("failpoint"); });
  EXPECT_EQ(failed, absl::AbortedError("failpoint"));
  writer = absl::UnknownError("destroyed");
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("manifest"));
  EXPECT_EQ(ReadFileToString(path).value(), "old");
}

TEST(FileUtilTest, AnAtomicFileWriterInAMissingDirectoryIsNotFound) {
  TempDir dir;
  const std::string path = dir.Join("no_such_dir/manifest");
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Create(path);
  EXPECT_EQ(writer.status(), absl::NotFoundError(absl::StrCat(
                                 "write ", path, ": directory ",
                                 dir.Join("no_such_dir"), " does not exist")));
}

TEST(FileUtilTest, ReadMissingFileIsNotFoundNamingPath) {
  TempDir dir;
  const std::string path = dir.Join("missing");
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(contents.status().message(), HasSubstr(path));
  EXPECT_THAT(contents.status().message(), HasSubstr("No such file"));
}

TEST(FileUtilTest, CreateDirNeverCreatesParents) {
  TempDir dir;
  const std::string nested = dir.Join("a/b");
  absl::Status status = CreateDir(nested);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(nested));
  EXPECT_FALSE(PathExists(dir.Join("a")).value());

  ASSERT_TRUE(CreateDir(dir.Join("a")).ok());
  status = CreateDir(dir.Join("a"));
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("a")));
}

TEST(FileUtilTest, ListDirIsSortedWithoutDots) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.Join("b"), "").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("a"), "").ok());
  ASSERT_TRUE(CreateDir(dir.Join("c")).ok());
  EXPECT_THAT(ListDir(dir.path()).value(), ElementsAre("a", "b", "c"));
  EXPECT_EQ(ListDir(dir.Join("zz")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(FileUtilTest, FsyncHelpers) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.Join("f"), "data").ok());
  ASSERT_TRUE(CreateDir(dir.Join("sub")).ok());
  EXPECT_TRUE(FsyncFile(dir.Join("f")).ok());
  EXPECT_TRUE(FsyncDir(dir.path()).ok());
  // Subdirectories are skipped, files and the directory itself are synced.
  EXPECT_TRUE(FsyncDirContents(dir.path()).ok());

  absl::Status status = FsyncFile(dir.Join("missing"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("missing")));
  status = FsyncDir(dir.Join("f"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);  // ENOTDIR
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("f")));
  status = FsyncDirContents(dir.Join("missing"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(FileUtilTest, RenameAndSyncMovesDirectory) {
  TempDir dir;
  ASSERT_TRUE(CreateDir(dir.Join("tmp.db")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("tmp.db/x"), "payload").ok());
  ASSERT_TRUE(RenameAndSync(dir.Join("tmp.db"), dir.Join("node.0")).ok());
  EXPECT_FALSE(PathExists(dir.Join("tmp.db")).value());
  EXPECT_EQ(ReadFileToString(dir.Join("node.0/x")).value(), "payload");

  // A directory cannot replace a non-empty one: that needs ExchangeAndSync.
  ASSERT_TRUE(CreateDir(dir.Join("other")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("other/y"), "").ok());
  absl::Status status = RenameAndSync(dir.Join("other"), dir.Join("node.0"));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("node.0")));

  status = RenameAndSync(dir.Join("missing"), dir.Join("z"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("missing")));
}

TEST(FileUtilTest, ExchangeAndSyncSwapsDirectories) {
  TempDir dir;
  ASSERT_TRUE(CreateDir(dir.Join("old")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("old/v"), "old").ok());
  ASSERT_TRUE(CreateDir(dir.Join("new")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("new/v"), "new").ok());
  ASSERT_TRUE(ExchangeAndSync(dir.Join("new"), dir.Join("old")).ok());
  EXPECT_EQ(ReadFileToString(dir.Join("old/v")).value(), "new");
  EXPECT_EQ(ReadFileToString(dir.Join("new/v")).value(), "old");

  absl::Status status = ExchangeAndSync(dir.Join("new"), dir.Join("missing"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("missing")));
}

TEST(FileUtilTest, RemoveRecursivelyDeletesTreeWithoutFollowingLinks) {
  TempDir dir;
  TempDir outside;
  ASSERT_TRUE(WriteFileAtomically(outside.Join("keep"), "k").ok());
  ASSERT_TRUE(CreateDir(dir.Join("t")).ok());
  ASSERT_TRUE(CreateDir(dir.Join("t/sub")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("t/sub/f"), "x").ok());
  ASSERT_EQ(::symlink(outside.path().c_str(), dir.Join("t/link").c_str()), 0);
  ASSERT_TRUE(RemoveRecursively(dir.Join("t")).ok());
  EXPECT_FALSE(PathExists(dir.Join("t")).value());
  EXPECT_EQ(ReadFileToString(outside.Join("keep")).value(), "k");

  absl::Status status = RemoveRecursively(dir.Join("t"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir.Join("t")));
}

TEST(FileUtilTest, PathExists) {
  TempDir dir;
  EXPECT_TRUE(PathExists(dir.path()).value());
  EXPECT_FALSE(PathExists(dir.Join("nope")).value());
  ASSERT_EQ(::symlink("/nonexistent", dir.Join("dangling").c_str()), 0);
  EXPECT_TRUE(PathExists(dir.Join("dangling")).value());
}

}  // namespace
}  // namespace jobgraph

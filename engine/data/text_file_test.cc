// The text-file reader: exact lines, batching across buffer refills, the
// byte offset as its position, and errors that name the file.

#include "engine/data/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/data/data_test_util.h"
#include "engine/data/file_cursor.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/session.h"
#include "engine/task.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::CollectedStrings;
using ::jobgraph::data_test::FetchBool;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kNode[] = "trainer_0";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  return path;
}

// A pipe over `path` recording each batch's lines under `tag`.
struct FilePipeline {
  TaskGroup init{"init", GLOBAL};
  TaskGroup epoch{"epoch", PRIVATE};
  BlobRef data_finished;
};

std::unique_ptr<FilePipeline> Build(const std::string& path, int64_t batch_size,
                                    int64_t buffer_bytes,
                                    std::optional<int64_t> limit,
                                    const std::string& tag) {
  auto p = std::make_unique<FilePipeline>();
  Task& init = p->init.NewTask(Node(kNode));
  Reader reader =
      TextFile(path, "lines").NewReader(init.net(), batch_size, buffer_bytes);
  ReaderWithLimit limited(reader, limit);
  Pipe(p->epoch, Node(kNode), limited,
       [&](NetBuilder& net, const Record& batch) {
         data_test::CollectRows(net, batch.Field("line"), tag);
       });
  p->data_finished = limited.data_finished();
  return p;
}

int64_t Offset(LocalSession& session) {
  return session.NodeWorkspace(kNode)
      ->GetBlob("lines_cursor")
      ->Get<FileCursor>()
      .offset();
}

TEST(TextFileTest, ReadsExactLines) {
  const std::string path =
      WriteFile("exact.txt", "alpha\n\nbeta gamma\r\n  delta  \nlast\n");
  auto p = Build(path, 1, TextFile::kDefaultBufferBytes, std::nullopt, "exact");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  absl::Status s = session.Run(p->epoch);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(CollectedStrings("exact"),
              ElementsAre("alpha", "", "beta gamma\r", "  delta  ", "last"));
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
  EXPECT_EQ(Offset(session), 34);
}

TEST(TextFileTest, LinesLongerThanTheBuffer) {
  std::string contents;
  std::vector<std::string> lines;
  for (int i = 0; i < 50; ++i) {
    lines.push_back(std::string(i * 7 % 23, static_cast<char>('a' + i % 26)));
    absl::StrAppend(&contents, lines.back(), "\n");
  }
  const std::string path = WriteFile("long.txt", contents);
  for (int64_t buffer : {1, 3, 16, 1 << 16}) {
    for (int64_t batch : {1, 4, 100}) {
      const std::string tag = absl::StrCat("long_", buffer, "_", batch);
      auto p = Build(path, batch, buffer, std::nullopt, tag);
      LocalSession session;
      ASSERT_TRUE(session.Run(p->init).ok());
      absl::Status s = session.Run(p->epoch);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(CollectedStrings(tag), lines) << tag;
    }
  }
}

TEST(TextFileTest, AnEmptyFileReadsNothing) {
  auto p = Build(WriteFile("empty.txt", ""), 2, 8, std::nullopt, "none");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  ASSERT_TRUE(session.Run(p->epoch).ok());
  EXPECT_TRUE(CollectedStrings("none").empty());
  EXPECT_TRUE(*FetchBool(session, kNode, p->data_finished.name()));
}

// The position is the byte offset of the next line; a cursor restored
// through the serialization registry continues from it.
TEST(TextFileTest, ResumesFromTheByteOffset) {
  const std::string path =
      WriteFile("resume.txt", "l0\nl1\nl2\nl3\nl4\nl5\nl6\n");
  auto p = Build(path, 2, 5, 1, "resume");
  LocalSession first;
  ASSERT_TRUE(first.Run(p->init).ok());
  ASSERT_TRUE(first.Run(p->epoch).ok());
  EXPECT_EQ(Offset(first), 6);
  ASSERT_TRUE(first.Run(p->epoch).ok());
  EXPECT_EQ(Offset(first), 12);
  EXPECT_THAT(CollectedStrings("resume"), ElementsAre("l0", "l1", "l2", "l3"));

  LocalSession second;
  absl::StatusOr<std::vector<std::string>> moved =
      data_test::CheckpointAndRestore(first, second, kNode);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(*moved, ElementsAre("lines/limit/data_finished", "lines_cursor"));
  EXPECT_EQ(Offset(second), 12);
  for (int e = 0; e < 3; ++e) ASSERT_TRUE(second.Run(p->epoch).ok());
  EXPECT_THAT(CollectedStrings("resume"),
              ElementsAre("l0", "l1", "l2", "l3", "l4", "l5", "l6"));
  EXPECT_TRUE(*FetchBool(second, kNode, p->data_finished.name()));
}

TEST(TextFileTest, TruncatedLastLineIsDataLossNamingFileAndOffset) {
  const std::string path = WriteFile("truncated.txt", "one\ntwo\nthr");
  auto p = Build(path, 1, 4, std::nullopt, "truncated");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  absl::Status s = session.Run(p->epoch);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("byte offset 8"));
  EXPECT_THAT(s.message(), HasSubstr("no trailing newline"));
  // The complete lines were read; the position stays before the bad one.
  EXPECT_THAT(CollectedStrings("truncated"), ElementsAre("one", "two"));
  EXPECT_EQ(Offset(session), 8);
}

TEST(TextFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("does_not_exist.txt");
  auto p = Build(path, 1, 16, std::nullopt, "missing");
  LocalSession session;
  // Creating the cursor does not open the file; reading does.
  ASSERT_TRUE(session.Run(p->init).ok());
  absl::Status s = session.Run(p->epoch);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("'", path, "'")));
  EXPECT_THAT(s.message(), HasSubstr("lines_cursor"));
}

TEST(TextFileTest, UnreadableFileIsAnErrorNamingThePath) {
  // A path under a regular file cannot be opened by anyone, root included:
  // open() fails with ENOTDIR, which maps to FAILED_PRECONDITION.
  const std::string parent = WriteFile("plain.txt", "x\n");
  const std::string path = parent + "/lines.txt";
  {
    auto p = Build(path, 1, 16, std::nullopt, "under_a_file");
    LocalSession session;
    ASSERT_TRUE(session.Run(p->init).ok());
    absl::Status s = session.Run(p->epoch);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("cannot open file '", path, "'")));
    EXPECT_THAT(s.message(), HasSubstr(std::strerror(ENOTDIR)));
    EXPECT_THAT(CollectedStrings("under_a_file"), ElementsAre());
  }
  // Without read permission (root bypasses permission bits, so only as
  // another user): PERMISSION_DENIED naming the path.
  if (geteuid() != 0) {
    const std::string secret = WriteFile("secret.txt", "x\n");
    ASSERT_EQ(chmod(secret.c_str(), 0), 0);
    auto p = Build(secret, 1, 16, std::nullopt, "secret");
    LocalSession session;
    ASSERT_TRUE(session.Run(p->init).ok());
    absl::Status s = session.Run(p->epoch);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("cannot open file '", secret, "'")));
  }
}

TEST(TextFileTest, ADirectoryIsAnError) {
  auto p = Build(TempPath(""), 1, 16, std::nullopt, "dir");
  LocalSession session;
  ASSERT_TRUE(session.Run(p->init).ok());
  absl::Status s = session.Run(p->epoch);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is a directory"));
}

TEST(FileCursorTest, ARestoredOffsetMustBeAtALineStartWithinTheFile) {
  const std::string path = WriteFile("offsets.txt", "abc\ndef\n");
  std::vector<std::string> lines;
  FileCursor inside(path, 2);
  absl::Status s = inside.ReadLines(1, 16, &lines);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("byte offset 2"));
  EXPECT_THAT(s.message(), HasSubstr("not at the start of a line"));

  FileCursor past(path, 20);
  s = past.ReadLines(1, 16, &lines);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("past the end"));

  FileCursor good(path, 4);
  ASSERT_TRUE(good.ReadLines(5, 16, &lines).ok());
  EXPECT_THAT(lines, ElementsAre("def"));
  EXPECT_EQ(good.offset(), 8);
  ASSERT_TRUE(good.ReadLines(5, 16, &lines).ok());
  EXPECT_TRUE(lines.empty());
  good.set_offset(0);
  ASSERT_TRUE(good.ReadLines(5, 2, &lines).ok());
  EXPECT_THAT(lines, ElementsAre("abc", "def"));
}

// Many lines through a small buffer: the reader never needs the whole file.
TEST(FileCursorTest, ManyLinesThroughASmallBuffer) {
  std::string contents;
  const int kLines = 20000;
  for (int i = 0; i < kLines; ++i) absl::StrAppend(&contents, i, "\n");
  const std::string path = WriteFile("many.txt", contents);
  FileCursor cursor(path);
  std::vector<std::string> lines;
  int64_t next = 0;
  do {
    ASSERT_TRUE(cursor.ReadLines(7, 64, &lines).ok());
    for (const std::string& line : lines) {
      ASSERT_EQ(line, absl::StrCat(next));
      ++next;
    }
  } while (!lines.empty());
  EXPECT_EQ(next, kLines);
  EXPECT_EQ(cursor.offset(), static_cast<int64_t>(contents.size()));
}

}  // namespace
}  // namespace jobgraph

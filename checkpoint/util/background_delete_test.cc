#include "checkpoint/util/background_delete.h"

#include <string>

#include "absl/status/status.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using testing_util::TempDir;

TEST(BackgroundDeleteTest, DeletesTreesAndFiles) {
  TempDir dir;
  const std::string tree = dir.Join("tree");
  ASSERT_TRUE(CreateDir(tree).ok());
  ASSERT_TRUE(CreateDir(JoinPath(tree, "sub")).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(tree, "sub/a"), "aaa").ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(tree, "b"), "bbb").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("file"), "ccc").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("keep"), "ddd").ok());

  const int64_t failures = BackgroundDeleteFailures();
  ASSERT_TRUE(DeleteInBackground(tree).ok());
  ASSERT_TRUE(DeleteInBackground(dir.Join("file")).ok());
  WaitForBackgroundDeletes();
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir.path());
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ::testing::ElementsAre("keep"));
  EXPECT_EQ(BackgroundDeleteFailures(), failures);
}

TEST(BackgroundDeleteTest, AMissingPathIsNotAFailure) {
  TempDir dir;
  const int64_t failures = BackgroundDeleteFailures();
  ASSERT_TRUE(DeleteInBackground(dir.Join("never_existed")).ok());
  WaitForBackgroundDeletes();
  EXPECT_EQ(BackgroundDeleteFailures(), failures);
}

TEST(BackgroundDeleteTest, RefusesEmptyPathAndRoot) {
  absl::Status status = DeleteInBackground("");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "refusing to delete '' in the background");
  EXPECT_EQ(DeleteInBackground("//").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BackgroundDeleteTest, WaitWithNothingQueuedReturns) {
  WaitForBackgroundDeletes();
  WaitForBackgroundDeletes();
}

}  // namespace
}  // namespace jobgraph

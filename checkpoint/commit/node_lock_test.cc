#include "checkpoint/commit/node_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

std::string ThisHolder() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return absl::StrCat("host ", host, " pid ", ::getpid());
}

TEST(NodeLockTest, SecondHolderOfANodeIsRefusedNamingTheFirst) {
  testing_util::TempDir dir;
  absl::StatusOr<std::unique_ptr<NodeLock>> first =
      NodeLock::Acquire(dir.path(), "trainer_0");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->path(), dir.Join("trainer_0.lock"));
  EXPECT_EQ(ReadFileToString(dir.Join("trainer_0.lock")).value(),
            ThisHolder() + "\n");

  absl::StatusOr<std::unique_ptr<NodeLock>> second =
      NodeLock::Acquire(dir.path(), "trainer_0");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      second.status().message(),
      absl::StrCat("node 'trainer_0' of checkpoint directory ", dir.path(),
                   " is in use by another run (", ThisHolder(), "; lock file ",
                   dir.Join("trainer_0.lock"),
                   "). Two runs of one job would save the same epochs "
                   "over each other: wait for that run to end, or stop "
                   "it, then start again."));

  // Another node of the same directory is free.
  EXPECT_TRUE(NodeLock::Acquire(dir.path(), "trainer_1").ok());

  // Released: the file is gone and the node can be locked again.
  first->reset();
  EXPECT_FALSE(PathExists(dir.Join("trainer_0.lock")).value());
  EXPECT_TRUE(NodeLock::Acquire(dir.path(), "trainer_0").ok());
}

TEST(NodeLockTest, AKilledHoldersLockIsFreeAgain) {
  testing_util::TempDir dir;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<NodeLock>> lock =
        NodeLock::Acquire(dir.path(), "trainer_0");
    const char state = lock.ok() ? 'L' : 'E';
    if (::write(ready[1], &state, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  char state = 0;
  ASSERT_EQ(::read(ready[0], &state, 1), 1);
  ASSERT_EQ(state, 'L');

  absl::StatusOr<std::unique_ptr<NodeLock>> refused =
      NodeLock::Acquire(dir.path(), "trainer_0");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(
                absl::StrCat(" pid ", child, "; lock file")),
            absl::string_view::npos)
      << refused.status();

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  // The killed holder left its file; the kernel dropped its lock.
  EXPECT_TRUE(PathExists(dir.Join("trainer_0.lock")).value());
  absl::StatusOr<std::unique_ptr<NodeLock>> taken =
      NodeLock::Acquire(dir.path(), "trainer_0");
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(ReadFileToString(dir.Join("trainer_0.lock")).value(),
            ThisHolder() + "\n");
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(NodeLockTest, MissingDirectoryIsNamed) {
  absl::StatusOr<std::unique_ptr<NodeLock>> lock =
      NodeLock::Acquire("/nonexistent-jobgraph-dir", "trainer_0");
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(lock.status().message(),
            "cannot open lock file /nonexistent-jobgraph-dir/trainer_0.lock: "
            "No such file or directory");
}

}  // namespace
}  // namespace jobgraph

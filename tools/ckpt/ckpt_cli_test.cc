// The built `ckpt` binary: exit codes reach the shell, output goes to stdout
// and errors to stderr, and relative paths resolve against
// BUILD_WORKING_DIRECTORY as under `bazel run`. The commands themselves are
// tested in-process by ckpt_test.cc.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::TempDir;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs the ckpt binary from this test's runfiles with `args`, in `cwd`, with
// BUILD_WORKING_DIRECTORY set to `working_dir` (unset when empty).
Result RunBinary(const std::vector<std::string>& args, const std::string& cwd,
                 const std::string& working_dir, const TempDir& scratch) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  CHECK(srcdir != nullptr && workspace != nullptr);
  const std::string binary =
      absl::StrCat(srcdir, "/", workspace, "/tools/ckpt");
  const std::string out_path = scratch.Join("stdout");
  const std::string err_path = scratch.Join("stderr");
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t child = ::fork();
  CHECK_GE(child, 0);
  if (child == 0) {
    // Only async-signal-safe calls from here to exec.
    const int out =
        ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err =
        ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
        ::chdir(cwd.c_str()) != 0) {
      ::_exit(127);
    }
    if (working_dir.empty()) {
      ::unsetenv("BUILD_WORKING_DIRECTORY");
    } else {
      ::setenv("BUILD_WORKING_DIRECTORY", working_dir.c_str(), 1);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  CHECK_EQ(::waitpid(child, &status, 0), child);
  Result result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFileToString(out_path).value();
  result.err = ReadFileToString(err_path).value();
  return result;
}

// <dir>/trainer_0.<epoch> holding one float tensor "w" filled with `value`.
void SaveW(const std::string& dir, int64_t epoch, float value) {
  Blob blob;
  Tensor* w =
      blob.Reset(std::make_unique<Tensor>(FLOAT, std::vector<int64_t>{4}));
  for (int i = 0; i < 4; ++i) w->mutable_data<float>()[i] = value;
  CheckpointDbOptions options;
  options.node = "trainer_0";
  options.epoch = epoch;
  absl::StatusOr<int64_t> written =
      WriteCheckpointDb("leveldb", CheckpointDbPath(dir, "trainer_0", epoch),
                        {{"w", &blob}}, options);
  ASSERT_TRUE(written.ok()) << written.status();
}

TEST(CkptCliTest, ExitCodesOutputStreamsAndWorkingDirectory) {
  TempDir scratch;
  TempDir base;
  const std::string dir = base.Join("ck");
  ASSERT_TRUE(CreateDir(dir).ok());
  SaveW(dir, 0, 1.0f);
  SaveW(dir, 1, 2.0f);
  CommitLog commit_log;
  commit_log.set_format_version(1);
  commit_log.set_db_type("leveldb");
  for (int64_t epoch : {0, 1}) {
    CommittedEpoch* e = commit_log.add_epoch();
    e->set_epoch(epoch);
    e->add_node("trainer_0");
  }
  ASSERT_TRUE(WriteCommitLog(dir, commit_log, /*is_commit=*/true).ok());

  // Relative to BUILD_WORKING_DIRECTORY, not to the process's directory.
  Result r = RunBinary({"verify", "ck"}, scratch.path(), base.path(), scratch);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("OK: verified 2 databases of 2 "
                                            "committed epochs in ",
                                            dir)));
  EXPECT_EQ(r.err, "");
  // Without it, relative to the process's directory.
  r = RunBinary({"list", "ck"}, base.path(), "", scratch);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("checkpoint ck (leveldb, format version 1)"));

  r = RunBinary({"diff", "ck/trainer_0.0", "ck/trainer_0.1"}, scratch.path(),
                base.path(), scratch);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("~ w: 1 of 1 values differ"));

  r = RunBinary({"dump", "ck/trainer_0.1", "w"}, scratch.path(), base.path(),
                scratch);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("value: float[4] {2, 2, 2, 2}\n"));

  r = RunBinary({}, scratch.path(), "", scratch);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("usage: ckpt <command>"));

  r = RunBinary({"list", "nowhere"}, scratch.path(), base.path(), scratch);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            absl::StrCat("ckpt: ", base.Join("nowhere"), " does not exist\n"));
}

}  // namespace
}  // namespace jobgraph

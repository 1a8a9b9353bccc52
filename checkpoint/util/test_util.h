// Helpers for the checkpoint package's tests: fresh temporary directories
// under the test's TEST_TMPDIR. Not thread-safe to share one TempDir between
// threads that delete it; each test makes its own.

#ifndef JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_
#define JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_

#include <stdlib.h>

#include <string>

#include "absl/status/status.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace testing_util {

// A new, empty directory that is deleted (with its contents) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = JoinPath(::testing::TempDir(), "ckpt_test.XXXXXX");
    CHECK(::mkdtemp(pattern.data()) != nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    absl::Status status = RemoveRecursively(path_);
    if (!status.ok()) LOG(WARNING) << status;
  }

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const {
    return JoinPath(path_, name);
  }

 private:
  std::string path_;
};

}  // namespace testing_util
}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UTIL_TEST_UTIL_H_

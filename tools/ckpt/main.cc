// The `ckpt` command-line tool; see tools/ckpt/ckpt.h.
//
//   ./tools/bazel run //tools:ckpt -- list /path/to/checkpoints

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "tools/ckpt/ckpt.h"

int main(int argc, char** argv) {
  // Warnings go to stderr, and no log files are left in /tmp.
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  std::vector<std::string> args(argv + 1, argv + argc);
  // `bazel run` starts the binary inside its runfiles tree; the paths a user
  // typed are relative to where they ran bazel.
  const char* working_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return jobgraph::ckpt::RunCkpt(
      args, working_dir != nullptr ? working_dir : "", std::cout, std::cerr);
}

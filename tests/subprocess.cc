#include "tests/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"

extern char** environ;

namespace jobgraph {
namespace testing {

std::string NewTempDir(const std::string& name) {
  static int counter = 0;
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name,
                                 "_", ::getpid(), "_", ++counter);
  RemoveRecursively(dir).IgnoreError();
  CHECK(CreateDir(dir).ok()) << dir;
  return dir;
}

std::string RunfilesPath(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir != nullptr) {
    return absl::StrCat(srcdir, "/jobgraph/", workspace_relative);
  }
  return workspace_relative;
}

std::string ChildRun::Describe() const {
  std::string how = WIFEXITED(wait_status)
                        ? absl::StrCat("exit status ", WEXITSTATUS(wait_status))
                    : WIFSIGNALED(wait_status)
                        ? absl::StrCat("signal ", WTERMSIG(wait_status))
                        : absl::StrCat("wait status ", wait_status);
  // The end of the log holds the reason of a failure.
  const size_t keep = 4000;
  return absl::StrCat(how, "\nstdout:\n", absl::StrJoin(lines, "\n"),
                      "\nstderr (end):\n",
                      log.size() > keep ? log.substr(log.size() - keep) : log);
}

std::optional<std::string> ChildRun::LineStartingWith(
    absl::string_view prefix) const {
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return std::nullopt;
}

std::optional<std::string> ChildRun::Value(absl::string_view key) const {
  const std::string prefix = absl::StrCat(key, "=");
  std::optional<std::string> line = LineStartingWith(prefix);
  if (!line.has_value()) return std::nullopt;
  return line->substr(prefix.size());
}

std::optional<std::string> ChildRun::Result() const {
  return LineStartingWith("result:");
}

namespace {

int CountOccurrences(absl::string_view text, absl::string_view needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

// Starts the child and waits for it; `kill_after_ms` or `kill_at_log_text`
// (when non-negative / non-empty) decide when it is sent `signal`: the
// latter once the text occurs `occurrences` times in its standard error.
ChildRun Run(const std::string& binary, const std::vector<std::string>& args,
             const std::vector<std::string>& extra_env, int kill_after_ms,
             const std::string& kill_at_log_text,
             const std::function<void(pid_t)>& at_log_text,
             int signal = SIGKILL, int occurrences = 1) {
  static int counter = 0;
  const std::string out_dir = NewTempDir("child_output");
  const std::string out = JoinPath(out_dir, absl::StrCat("out", ++counter));
  const std::string err = JoinPath(out_dir, absl::StrCat("err", counter));

  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    bool replaced = false;
    for (const std::string& extra : extra_env) {
      const std::string name = extra.substr(0, extra.find('=') + 1);
      replaced |= absl::StartsWith(entry, name);
    }
    if (!replaced) env.push_back(*e);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  // glog would otherwise write log files into the shared /tmp.
  env.push_back("GLOG_logtostderr=1");
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());

  auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> result;
    for (std::string& s : strings) result.push_back(s.data());
    result.push_back(nullptr);
    return result;
  };
  std::vector<char*> argv_ptrs = pointers(argv);
  std::vector<char*> env_ptrs = pointers(env);

  posix_spawn_file_actions_t actions;
  CHECK_EQ(posix_spawn_file_actions_init(&actions), 0);
  CHECK_EQ(
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644),
      0);
  CHECK_EQ(
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644),
      0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv_ptrs[0], &actions, nullptr,
                                  argv_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  CHECK_EQ(spawned, 0) << "cannot start " << argv[0] << ": "
                       << std::strerror(spawned);

  ChildRun run;
  bool reaped = false;
  if (kill_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    // Until waitpid() reaps it the pid cannot be reused, so this reaches the
    // child (or its zombie, which ignores it).
    CHECK_EQ(::kill(pid, SIGKILL), 0);
  } else if (!kill_at_log_text.empty()) {
    while (!reaped) {
      const pid_t done = ::waitpid(pid, &run.wait_status, WNOHANG);
      CHECK_GE(done, 0);
      if (done == pid) {
        reaped = true;
        break;
      }
      absl::StatusOr<std::string> log = ReadFileToString(err);
      if (log.ok() && CountOccurrences(*log, kill_at_log_text) >= occurrences) {
        if (at_log_text) at_log_text(pid);
        if (signal != 0) CHECK_EQ(::kill(pid, signal), 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (!reaped) CHECK_EQ(::waitpid(pid, &run.wait_status, 0), pid);

  absl::StatusOr<std::string> stdout_text = ReadFileToString(out);
  absl::StatusOr<std::string> stderr_text = ReadFileToString(err);
  CHECK(stdout_text.ok()) << stdout_text.status();
  CHECK(stderr_text.ok()) << stderr_text.status();
  run.lines = absl::StrSplit(*stdout_text, '\n', absl::SkipEmpty());
  run.log = *std::move(stderr_text);
  RemoveRecursively(out_dir).IgnoreError();
  return run;
}

}  // namespace

ChildRun RunBinary(const std::string& binary,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& extra_env,
                   int kill_after_ms) {
  return Run(binary, args, extra_env, kill_after_ms, "", nullptr);
}

ChildRun RunBinaryKilledAt(const std::string& binary,
                           const std::vector<std::string>& args,
                           const std::string& log_text,
                           const std::function<void()>& at_log_text) {
  std::function<void(pid_t)> hook;
  if (at_log_text) hook = [&](pid_t) { at_log_text(); };
  return Run(binary, args, {}, -1, log_text, hook);
}

ChildRun RunBinaryWithHookAt(const std::string& binary,
                             const std::vector<std::string>& args,
                             const std::vector<std::string>& extra_env,
                             const std::string& log_text, int occurrences,
                             const std::function<void(pid_t)>& hook) {
  return Run(binary, args, extra_env, -1, log_text, hook, /*signal=*/0,
             occurrences);
}

ChildRun RunBinarySignalledAt(const std::string& binary,
                              const std::vector<std::string>& args,
                              const std::string& log_text, int occurrences,
                              int signal,
                              const std::vector<std::string>& extra_env) {
  return Run(binary, args, extra_env, -1, log_text, nullptr, signal,
             occurrences);
}

}  // namespace testing
}  // namespace jobgraph

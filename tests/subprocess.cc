#include "tests/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

namespace {

// The test's environment with `extra_env` replacing what it names, and
// glog's output on standard error.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& extra_env) {
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
  env.push_back("GLOG_logtostderr=1");
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// One of the child's output pipes, split into lines as it is read.
struct OutputPipe {
  int fd = -1;
  bool from_stderr = false;
  size_t filler = 0;  // bytes of a held pipe's filler still to skip
  std::string partial;
};

}  // namespace

char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  // "<pid> (<comm>) <state> ...": the name may hold spaces and parentheses.
  const size_t close = stat.rfind(')');
  if (!in || close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

bool WatchedChild::SignalIfRunning(int signal) {
  const char state = ProcessState(pid_);
  if (state == 0 || state == 'Z' || state == 'X') return false;
  stdout_held_ = false;
  return ::kill(pid_, signal) == 0;
}

bool WatchedChild::WriteStdin(const std::string& bytes) {
  if (stdin_fd_ < 0) return false;
  // A child that died closed its end: EPIPE, and SIGPIPE, which must not
  // end the test, is taken back from the pending set.
  sigset_t pipe_signal;
  sigset_t old_mask;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  size_t done = 0;
  bool ok = true;
  while (done < bytes.size()) {
    const ssize_t n =
        ::write(stdin_fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += n;
  }
  if (!ok && errno == EPIPE) {
    const struct timespec zero = {0, 0};
    sigtimedwait(&pipe_signal, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return ok;
}

void WatchedChild::CloseStdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

ChildRun RunBinaryWatched(
    const std::string& binary, const std::vector<std::string>& args,
    const WatchOptions& options,
    const std::function<void(WatchedChild&, const std::string&, bool)>&
        on_line) {
  std::vector<std::string> env = ChildEnvironment(options.extra_env);
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> argv_ptrs = Pointers(argv);
  std::vector<char*> env_ptrs = Pointers(env);

  // Every end the test keeps is close-on-exec, so that no grandchild holds
  // one open; dup2 clears the flag on the child's copies.
  int out[2];
  int err[2];
  int in[2] = {-1, -1};
  CHECK_EQ(::pipe2(out, O_CLOEXEC), 0) << std::strerror(errno);
  CHECK_EQ(::pipe2(err, O_CLOEXEC), 0) << std::strerror(errno);
  if (options.stdin_pipe) {
    CHECK_EQ(::pipe2(in, O_CLOEXEC), 0) << std::strerror(errno);
  }
  OutputPipe stdout_pipe{out[0], false};
  OutputPipe stderr_pipe{err[0], true};
  if (options.hold_stdout) {
    // Filled to capacity while empty, in whole pages, so no write blocks.
    const int capacity = ::fcntl(out[1], F_GETPIPE_SZ);
    CHECK_GT(capacity, 0) << std::strerror(errno);
    const std::string page(4096, '#');
    for (int done = 0; done < capacity; done += page.size()) {
      CHECK_EQ(::write(out[1], page.data(), page.size()),
               static_cast<ssize_t>(page.size()));
      stdout_pipe.filler += page.size();
    }
  }

  posix_spawn_file_actions_t actions;
  CHECK_EQ(posix_spawn_file_actions_init(&actions), 0);
  CHECK_EQ(posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO),
           0);
  CHECK_EQ(posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO),
           0);
  if (options.stdin_pipe) {
    CHECK_EQ(posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO),
             0);
  }
  // The child starts with no signal blocked and SIGPIPE's default action
  // (WriteStdin blocks it in this thread for a moment).
  posix_spawnattr_t attr;
  CHECK_EQ(posix_spawnattr_init(&attr), 0);
  sigset_t pipe_signal;
  sigset_t none;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  sigemptyset(&none);
  CHECK_EQ(posix_spawnattr_setsigdefault(&attr, &pipe_signal), 0);
  CHECK_EQ(posix_spawnattr_setsigmask(&attr, &none), 0);
  CHECK_EQ(posix_spawnattr_setflags(
               &attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK),
           0);
  WatchedChild child;
  const int spawned = posix_spawn(&child.pid_, argv_ptrs[0], &actions, &attr,
                                  argv_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CHECK_EQ(spawned, 0) << "cannot start " << argv[0] << ": "
                       << std::strerror(spawned);
  ::close(out[1]);
  ::close(err[1]);
  if (options.stdin_pipe) {
    ::close(in[0]);
    child.stdin_fd_ = in[1];
  }
  child.stdout_held_ = options.hold_stdout;

  ChildRun run;
  std::string stdout_text;
  // Hands over every complete line of `pipe` read so far; at the end of
  // the pipe, the rest too.
  auto deliver = [&](OutputPipe& pipe, bool at_end) {
    size_t start = 0;
    for (size_t newline = pipe.partial.find('\n', start);
         newline != std::string::npos;
         newline = pipe.partial.find('\n', start)) {
      const std::string line = pipe.partial.substr(start, newline - start);
      start = newline + 1;
      if (pipe.from_stderr) {
        absl::StrAppend(&run.log, line, "\n");
      } else {
        absl::StrAppend(&stdout_text, line, "\n");
      }
      on_line(child, line, pipe.from_stderr);
    }
    pipe.partial.erase(0, start);
    if (at_end && !pipe.partial.empty()) {
      const std::string line = std::exchange(pipe.partial, "");
      if (pipe.from_stderr) {
        absl::StrAppend(&run.log, line);
      } else {
        absl::StrAppend(&stdout_text, line);
      }
      on_line(child, line, pipe.from_stderr);
    }
  };
  OutputPipe* pipes[] = {&stdout_pipe, &stderr_pipe};
  char buffer[65536];
  while (stdout_pipe.fd >= 0 || stderr_pipe.fd >= 0) {
    std::vector<pollfd> polled;
    std::vector<OutputPipe*> polled_pipes;
    for (OutputPipe* pipe : pipes) {
      if (pipe->fd < 0) continue;
      if (pipe == &stdout_pipe && child.stdout_held_) continue;
      polled.push_back({pipe->fd, POLLIN, 0});
      polled_pipes.push_back(pipe);
    }
    if (polled.empty()) {
      // Only a held standard output is left: the child closed its
      // standard error (it ended, say with an error), and no line will come
      // to release it on.
      child.stdout_held_ = false;
      continue;
    }
    const int ready = ::poll(polled.data(), polled.size(), -1);
    if (ready < 0 && errno == EINTR) continue;
    CHECK_GE(ready, 0) << std::strerror(errno);
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      OutputPipe& pipe = *polled_pipes[i];
      if (pipe.fd < 0) continue;  // closed by a callback meanwhile
      const ssize_t n = ::read(pipe.fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      CHECK_GE(n, 0) << std::strerror(errno);
      if (n == 0) {
        deliver(pipe, /*at_end=*/true);
        ::close(pipe.fd);
        pipe.fd = -1;
        continue;
      }
      size_t skip = std::min(pipe.filler, static_cast<size_t>(n));
      pipe.filler -= skip;
      pipe.partial.append(buffer + skip, n - skip);
      deliver(pipe, /*at_end=*/false);
    }
  }
  child.CloseStdin();
  pid_t waited;
  do {
    waited = ::waitpid(child.pid_, &run.wait_status, 0);
  } while (waited < 0 && errno == EINTR);
  CHECK_EQ(waited, child.pid_) << std::strerror(errno);
  run.lines = absl::StrSplit(stdout_text, '\n', absl::SkipEmpty());
  return run;
}

std::vector<std::string> OpenMpiTempEnv() {
  static const std::string* dir = [] {
    char pattern[] = "/tmp/jgmpi.XXXXXX";
    CHECK(::mkdtemp(pattern) != nullptr) << std::strerror(errno);
    auto* made = new std::string(pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*dir, ignored);
    });
    return made;
  }();
  return {"TMPDIR=" + *dir, "OMPI_MCA_orte_tmpdir_base=" + *dir,
          "OMPI_MCA_btl_vader_backing_directory=" + *dir};
}

uint32_t TestSeed(uint32_t default_seed, const std::string& test_name) {
  uint32_t seed = default_seed;
  const char* text = std::getenv("JOBGRAPH_TEST_SEED");
  const bool from_env = text != nullptr && text[0] != '\0';
  if (from_env) {
    CHECK(absl::SimpleAtoi(text, &seed))
        << "JOBGRAPH_TEST_SEED=" << text << " is not a 32-bit number";
  }
  std::printf(
      "%s: seed %u (%s); replay with --test_env=JOBGRAPH_TEST_SEED=%u\n",
      test_name.c_str(), seed,
      from_env ? "from JOBGRAPH_TEST_SEED" : "the default", seed);
  std::fflush(stdout);
  return seed;
}

bool KillRank(pid_t mpirun, int rank, int signal) {
  const std::vector<pid_t> ranks = RankPids(mpirun);
  // Never kill(0, ...): that is this process's own group.
  if (rank < 0 || static_cast<size_t>(rank) >= ranks.size() ||
      ranks[rank] <= 0) {
    return false;
  }
  return ::kill(ranks[rank], signal) == 0;
}

std::vector<pid_t> RankPids(pid_t mpirun) {
  // A child is listed by the thread that forked it, which need not be
  // mpirun's main thread.
  std::vector<pid_t> all;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", mpirun, "/task"), error)) {
    std::ifstream children(task.path() / "children");
    pid_t child = 0;
    while (children >> child) all.push_back(child);
  }
  std::vector<pid_t> by_rank;
  for (pid_t child : all) {
    std::ifstream environ(absl::StrCat("/proc/", child, "/environ"));
    std::stringstream text;
    text << environ.rdbuf();
    for (absl::string_view var : absl::StrSplit(text.str(), '\0')) {
      int rank = 0;
      if (absl::ConsumePrefix(&var, "OMPI_COMM_WORLD_RANK=") &&
          absl::SimpleAtoi(var, &rank) && rank >= 0) {
        if (by_rank.size() <= static_cast<size_t>(rank)) {
          by_rank.resize(rank + 1, 0);
        }
        by_rank[rank] = child;
      }
    }
  }
  return by_rank;
}

}  // namespace testing
}  // namespace jobgraph

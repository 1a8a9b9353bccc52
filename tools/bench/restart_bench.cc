// restart_bench: how long a job takes to come back after it was stopped:
// from the start of the resuming process to the first operator of the
// resumed epoch, against a process that only reads the same bytes into
// fresh memory, with a warm and with a cold page cache, in one run.
//
// The job: one node whose init group fills --total_mib of float tensors of
// --tensor_mib each (distinct values, so nothing compresses), and an epoch
// that doubles the first tensor. The bench runs it once, in this process,
// for one epoch, checkpointing every epoch into --dir (LevelDB, durable, the
// defaults of CheckpointOptions), so that epoch 1 is committed. Then, per
// page-cache state, --runs times each and taking turns going first:
//   restart  this binary started again as a resuming job (resume from
//            latest): it parses its flags, builds the job, picks and
//            restores the epoch (every CRC checked) and runs epoch 2, whose
//            first operator reads the clock and ends the process;
//   read     this binary started again to read the checkpoint's files
//            (every file of the node's database of epoch 1, 4 MiB read()s)
//            into one buffer the process has just mapped, then read the
//            clock.
// Both are timed from just before posix_spawn to the clock read in the
// child (CLOCK_MONOTONIC, which is system-wide), so both pay the same exec,
// dynamic loading and first touch of fresh memory.
// Page cache: warm: the files are read once before each timed child; cold:
// sync and drop_caches (needs root; the cold figures are -1 without it)
// before each.
//
// The last line is
//   restart_bench: restart_vs_fresh_read=<r> restart_vs_fresh_read_cold=<r>
// (median restart time / median read time, warm and cold; the goal is at
// most 1.2).
//
// Run:
//   ./tools/bazel run -c opt //tools/bench:restart_bench

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/net_builder.h"
#include "engine/operator.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "glog/logging.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(std::string, dir, "",
          "Scratch directory (created if missing; needs about 2x --total_mib "
          "free). Default: $TMPDIR (or /tmp)/jobgraph_restart_bench.");
ABSL_FLAG(int, total_mib, 1024, "MiB of float tensors in the workspace.");
ABSL_FLAG(int, tensor_mib, 16, "MiB per tensor.");
ABSL_FLAG(int, runs, 3,
          "Timed children of each kind per page-cache state; medians.");
ABSL_FLAG(std::string, child, "",
          "Internal: 'restart' or 'read' runs this process as a timed child.");

namespace jobgraph {
namespace bench {
namespace {

constexpr char kNode[] = "trainer";
constexpr size_t kReadChunk = size_t{4} << 20;
// What a child prints, followed by CLOCK_MONOTONIC in nanoseconds.
constexpr char kMark[] = "restart_bench_mark_ns=";

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Prints the mark and ends the process at once: what comes after the
// first operator is not the restart's.
[[noreturn]] void MarkAndExit() {
  const int64_t now = MonotonicNanos();
  std::printf("%s%lld\n", kMark, static_cast<long long>(now));
  std::fflush(stdout);
  std::_Exit(0);
}

// FillDistinct(-> x): fills float tensor x (shape from "shape") with values
// that differ from element to element and from tensor to tensor ("seed").
class FillDistinctOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Init() override {
    shape_ = GetRepeatedArg<int64_t>("shape");
    seed_ = GetArg<int64_t>("seed", 0);
    return absl::OkStatus();
  }
  absl::Status Run() override {
    Tensor* x = Output(0);
    *x = Tensor::Uninitialized(FLOAT, shape_);
    uint32_t* words = static_cast<uint32_t*>(x->raw_mutable_data());
    uint32_t v = static_cast<uint32_t>(seed_) * 2654435761u + 1;
    for (int64_t i = 0; i < x->numel(); ++i) {
      v ^= v << 13;
      v ^= v >> 17;
      v ^= v << 5;
      words[i] = v;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> shape_;
  int64_t seed_ = 0;
};
JG_REGISTER_OPERATOR(BenchFillDistinct, FillDistinctOp);

// RestartMark(): the first operator of the resumed epoch.
class RestartMarkOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override { MarkAndExit(); }
};
JG_REGISTER_OPERATOR(BenchRestartMark, RestartMarkOp);

struct Setup {
  std::string dir;
  int tensors = 0;
  int64_t tensor_elements = 0;
};

// The job; `mark`: the resuming child's, whose epoch starts with the mark.
// Both have the same blobs, so the child restores what the first run saved.
void BuildJob(const Setup& setup, bool mark, Job& job) {
  const Node node(kNode);
  Task& init = job.init_group().NewTask(node);
  for (int i = 0; i < setup.tensors; ++i) {
    init.net().Op(
        "BenchFillDistinct", {}, {BlobRef(absl::StrCat("w", i))},
        {MakeArg("shape", std::vector<int64_t>{setup.tensor_elements}),
         MakeArg("seed", static_cast<int64_t>(i))});
  }
  Task& step = job.epoch_group().NewTask(node, {.name = "step"});
  if (mark) step.net().Op("BenchRestartMark", {}, {});
  // The epoch's work: doubles w0 in place.
  step.net().Op("Add", {BlobRef("w0"), BlobRef("w0")}, {BlobRef("w0")});
  EpochLimiter(job, node, mark ? 1000 : 1);
}

std::string CheckpointDir(const Setup& setup) {
  return JoinPath(setup.dir, "ckpt");
}

int RunJob(const Setup& setup, bool resume) {
  Job job;
  BuildJob(setup, resume, job);
  LocalSession session;
  Checkpointer checkpointer(
      CheckpointOptions{.directory = CheckpointDir(setup)});
  JobRunnerOptions options;
  options.preempt_signals = {};
  if (resume) options.resume_from = ResumeFrom::Latest();
  JobRunner runner(job, &checkpointer, options);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  Check(epochs.status());
  // The resuming child ends in its first operator; getting here means it
  // did not resume into an epoch.
  CHECK(!resume) << "the resumed run never reached its epoch";
  CHECK_EQ(*epochs, 1);
  CHECK_EQ(runner.stats().save_failures, 0);
  return 0;
}

// The regular files of the node's database of epoch 1.
std::vector<std::string> DatabaseFiles(const Setup& setup) {
  const std::string db = CheckpointDbPath(CheckpointDir(setup), kNode, 1);
  absl::StatusOr<std::vector<std::string>> names = ListDir(db);
  Check(names.status());
  std::vector<std::string> files;
  for (const std::string& name : *names) files.push_back(JoinPath(db, name));
  return files;
}

int64_t FileBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  PCHECK(fd >= 0) << path;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  PCHECK(size >= 0) << path;
  ::close(fd);
  return size;
}

int ReadChild(const Setup& setup) {
  const std::vector<std::string> files = DatabaseFiles(setup);
  size_t total = 0;
  for (const std::string& f : files) total += static_cast<size_t>(FileBytes(f));
  void* mapped = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PCHECK(mapped != MAP_FAILED);
  char* out = static_cast<char*>(mapped);
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    PCHECK(fd >= 0) << f;
    while (true) {
      const ssize_t n = ::read(fd, out, kReadChunk);
      PCHECK(n >= 0) << f;
      if (n == 0) break;
      out += n;
    }
    ::close(fd);
  }
  CHECK_EQ(static_cast<size_t>(out - static_cast<char*>(mapped)), total);
  MarkAndExit();
}

// Starts this binary with `args`, waits for it, and returns the seconds
// from just before the start to the mark it printed.
double TimeChild(const std::vector<std::string>& args) {
  int pipe_fds[2];
  PCHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The child's log goes to the pipe too: shown only if it fails.
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<std::string> argv_strings = {"/proc/self/exe"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int64_t start = MonotonicNanos();
  pid_t pid;
  const int error = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                                argv.data(), environ);
  CHECK_EQ(error, 0) << "posix_spawn: " << std::strerror(error);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    PCHECK(n >= 0);
    if (n == 0) break;
    output.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  PCHECK(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << args[0] << " child failed; its output:\n"
      << output;
  const size_t at = output.find(kMark);
  CHECK_NE(at, std::string::npos) << "no mark in:\n" << output;
  int64_t mark = 0;
  const size_t begin = at + std::strlen(kMark);
  CHECK(absl::SimpleAtoi(output.substr(begin, output.find('\n', begin) - begin),
                         &mark));
  return (mark - start) / 1e9;
}

struct StateFigures {
  Sample restart, read;
};

StateFigures TimeState(const Setup& setup, bool cold, int runs,
                       const std::vector<std::string>& common) {
  StateFigures f;
  std::vector<char> scratch(kReadChunk);
  auto prepare = [&] {
    if (cold) {
      CHECK(DropCaches());
    } else {
      WarmFiles(JoinPath(CheckpointDir(setup), ""), &scratch);
    }
    Settle(0, 200);
  };
  for (int run = 0; run < runs; ++run) {
    const bool restart_first = run % 2 == 0;
    for (int turn = 0; turn < 2; ++turn) {
      const bool restart = (turn == 0) == restart_first;
      std::vector<std::string> args = common;
      args.push_back(restart ? "--child=restart" : "--child=read");
      prepare();
      const double s = TimeChild(args);
      (restart ? f.restart : f.read).Add(s);
    }
    std::printf("  %s run %d: restart %.3f s, read %.3f s (%.2fx)\n",
                cold ? "cold" : "warm", run + 1, f.restart.values.back(),
                f.read.values.back(),
                f.restart.values.back() / f.read.values.back());
    std::fflush(stdout);
  }
  return f;
}

void Report(const char* state, const StateFigures& f, double mb) {
  std::printf(
      "  %s page cache: restart %.3f s (%.3f-%.3f); read into fresh memory "
      "%.3f s (%.3f-%.3f), %.0f MB/s; ratio %.2f\n",
      state, f.restart.Median(), f.restart.Min(), f.restart.Max(),
      f.read.Median(), f.read.Min(), f.read.Max(), mb / f.read.Median(),
      f.restart.Median() / f.read.Median());
}

int Main() {
  Setup setup;
  setup.dir = absl::GetFlag(FLAGS_dir);
  if (setup.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    setup.dir = JoinPath(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp",
                         "jobgraph_restart_bench");
  }
  if (setup.dir[0] != '/' &&
      std::getenv("BUILD_WORKING_DIRECTORY") != nullptr) {
    setup.dir = JoinPath(std::getenv("BUILD_WORKING_DIRECTORY"), setup.dir);
  }
  const int total_mib = absl::GetFlag(FLAGS_total_mib);
  const int tensor_mib = absl::GetFlag(FLAGS_tensor_mib);
  CHECK_GT(total_mib, 0);
  CHECK_GT(tensor_mib, 0);
  setup.tensors = std::max(1, total_mib / tensor_mib);
  setup.tensor_elements = int64_t{tensor_mib} << 20 >> 2;

  const std::string child = absl::GetFlag(FLAGS_child);
  if (child == "restart") return RunJob(setup, /*resume=*/true);
  if (child == "read") return ReadChild(setup);
  CHECK(child.empty()) << "--child is 'restart' or 'read'";

  const int runs = absl::GetFlag(FLAGS_runs);
  CHECK_GE(runs, 1);
  RemoveIfExists(setup.dir);
  Check(CreateDir(setup.dir));
  std::printf(
      "restart_bench: dir %s; %d float tensors x %d MiB; checkpointing "
      "epochs 0 and 1...\n",
      setup.dir.c_str(), setup.tensors, tensor_mib);
  std::fflush(stdout);
  RunJob(setup, /*resume=*/false);
  int64_t bytes = 0;
  for (const std::string& f : DatabaseFiles(setup)) bytes += FileBytes(f);
  const double mb = bytes / 1e6;
  std::printf("  epoch 1's database: %.1f MB\n", mb);

  const std::vector<std::string> common = {
      absl::StrCat("--dir=", setup.dir),
      absl::StrCat("--total_mib=", total_mib),
      absl::StrCat("--tensor_mib=", tensor_mib)};
  const StateFigures warm = TimeState(setup, /*cold=*/false, runs, common);
  StateFigures cold;
  const bool can_drop = DropCaches();
  if (can_drop) {
    cold = TimeState(setup, /*cold=*/true, runs, common);
  } else {
    std::printf("  cold: skipped (dropping the page cache needs root)\n");
  }
  std::printf("\n");
  Report("warm", warm, mb);
  if (can_drop) Report("cold", cold, mb);
  RemoveIfExists(setup.dir);
  std::printf(
      "\nrestart_bench: restart_vs_fresh_read=%.2f "
      "restart_vs_fresh_read_cold=%.2f\n",
      warm.restart.Median() / warm.read.Median(),
      can_drop ? cold.restart.Median() / cold.read.Median() : -1.0);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace jobgraph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return jobgraph::bench::Main();
}

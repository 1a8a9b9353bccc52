// The read entry points on a read-only checkpoint directory: a resume from
// `latest` and from an explicit older epoch (the Load op), LoadBlobs, and
// `ckpt list`, `show`, `dump`, `verify` and `diff`. A checkpoint directory
// lives on read-only media often enough (a published snapshot, a dataset
// mount, another user's directory), and a reader that writes there - a lock
// file, a commit log it creates, a temporary it cleans up, LevelDB opened for
// writing - fails, or worse, changes a directory it should only have read.
//
// The directory (two nodes, incremental saves, epochs 0..2 and a mid-epoch
// preemption checkpoint of epoch 3) is bind-mounted read-only in a mount
// namespace of the test's own, as root; the test is skipped, saying why,
// where that is not allowed. The entry points run through the read-only path,
// and the directory's listing (every name, type, mode, size, mtime and ctime
// with nanoseconds, and every file's bytes) must be exactly as it was.

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/preemption.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr int kNodes = 2;
// The epoch the preemption stops; epochs before it are ordinary.
constexpr int64_t kPreemptedEpoch = 3;

// --- The listing -----------------------------------------------------------

// What a listing records of one path.
struct Entry {
  mode_t mode = 0;  // type and permissions
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  std::string bytes;  // of a file; a symbolic link's target

  bool operator==(const Entry& other) const {
    return mode == other.mode && size == other.size &&
           mtime_ns == other.mtime_ns && ctime_ns == other.ctime_ns &&
           bytes == other.bytes;
  }
};

using Listing = std::map<std::string, Entry>;

int64_t Nanos(const struct timespec& t) {
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// Every path below `dir`, `dir` itself included (its mtime changes when a
// name is added or removed, even if a later call removed the name again).
Listing ListRecursively(const std::string& dir) {
  Listing listing;
  std::function<void(const std::string&)> add = [&](const std::string& path) {
    struct stat st;
    PCHECK(::lstat(path.c_str(), &st) == 0) << path;
    Entry& entry = listing[path];
    entry.mode = st.st_mode;
    entry.size = st.st_size;
    entry.mtime_ns = Nanos(st.st_mtim);
    entry.ctime_ns = Nanos(st.st_ctim);
    if (S_ISREG(st.st_mode)) {
      absl::StatusOr<std::string> bytes = ReadFileToString(path);
      CHECK(bytes.ok()) << bytes.status();
      entry.bytes = *std::move(bytes);
    } else if (S_ISLNK(st.st_mode)) {
      std::string target(st.st_size + 1, '\0');
      const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
      PCHECK(n >= 0) << path;
      target.resize(n);
      entry.bytes = std::move(target);
    } else if (S_ISDIR(st.st_mode)) {
      absl::StatusOr<std::vector<std::string>> names = ListDir(path);
      CHECK(names.ok()) << names.status();
      for (const std::string& name : *names) add(JoinPath(path, name));
    }
  };
  add(dir);
  return listing;
}

std::string Describe(const Entry& e) {
  return absl::StrCat("mode ", absl::StrFormat("%o", e.mode), ", ", e.size,
                      " bytes, mtime ", e.mtime_ns, " ns, ctime ", e.ctime_ns,
                      " ns");
}

// One line per path added, removed or changed.
std::vector<std::string> Differences(const Listing& before,
                                     const Listing& after) {
  std::vector<std::string> lines;
  for (const auto& [path, entry] : before) {
    auto it = after.find(path);
    if (it == after.end()) {
      lines.push_back(absl::StrCat("removed ", path));
    } else if (!(it->second == entry)) {
      lines.push_back(absl::StrCat(
          "changed ", path, ": ", Describe(entry), " -> ", Describe(it->second),
          entry.bytes == it->second.bytes ? "" : " (and its bytes)"));
    }
  }
  for (const auto& [path, entry] : after) {
    if (before.count(path) == 0) {
      lines.push_back(absl::StrCat("added ", path, ": ", Describe(entry)));
    }
  }
  return lines;
}

// --- Runs of the job ---------------------------------------------------------

struct Outcome {
  absl::StatusOr<int64_t> epochs;
  JobRunStats stats;
  std::vector<int64_t> totals;  // only when the run succeeded
};

std::vector<int64_t> Totals(const Session& session) {
  std::vector<int64_t> totals;
  for (int id = 0; id < kNodes; ++id) {
    totals.push_back(testing::Caffe2Total(session, id));
  }
  return totals;
}

void BuildJob(Job& job) {
  for (int id = 0; id < kNodes; ++id) testing::BuildCaffe2Pipeline(job, id);
}

// --- The read-only mount ---------------------------------------------------

// Set up once per process: the checkpoint directory, and the read-only path
// to it.
struct ReadOnlyCheckpoints {
  std::string skip_reason;  // non-empty: the tests are skipped
  std::string dir;          // the writable directory
  std::string read_only;    // the same directory, mounted read-only
  Listing listing;          // of `dir`, before any test
};

ReadOnlyCheckpoints* checkpoints = nullptr;

std::string Errno(absl::string_view what, int err) {
  return absl::StrCat(what, " failed with errno ", err, " (",
                      std::strerror(err), ") as euid ", ::geteuid());
}

// Whether a failure of a mount call means the test may not mount here (not
// root enough: a container without CAP_SYS_ADMIN, a user namespace) rather
// than a bug.
bool NotAllowed(int err) { return err == EPERM || err == EACCES; }

// The threads of this process; /proc/self/task has one entry per thread.
size_t ThreadCount() {
  absl::StatusOr<std::vector<std::string>> tasks = ListDir("/proc/self/task");
  CHECK(tasks.ok()) << tasks.status();
  return tasks->size();
}

// Enters a mount namespace of the process's own, so that nothing mounted
// here is seen outside it (or outlives it). Returns the reason to skip, or
// "" on success; CHECK-fails on what cannot be a matter of privileges.
std::string IsolateMounts() {
  if (::geteuid() != 0) {
    return absl::StrCat("needs root to bind-mount a directory read-only (euid ",
                        ::geteuid(), "; CI runs the tests as root)");
  }
  // A mount namespace belongs to a thread: one that exists now would stay
  // outside, and the job's threads, started later from this one, would not.
  CHECK_EQ(ThreadCount(), 1u) << "threads started before the test";
  if (::unshare(CLONE_NEWNS) != 0) {
    const int err = errno;
    CHECK(NotAllowed(err)) << Errno("unshare(CLONE_NEWNS)", err);
    return Errno("unshare(CLONE_NEWNS)", err);
  }
  // Private, so that the bind mount below does not propagate to the mount
  // namespace the test was started in when "/" is shared there.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    const int err = errno;
    CHECK(NotAllowed(err)) << Errno("making / private", err);
    return Errno("making / private", err);
  }
  return "";
}

// Mounts `dir` at `target` read-only; the reason to skip, or "".
std::string BindReadOnly(const std::string& dir, const std::string& target) {
  if (::mount(dir.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    const int err = errno;
    CHECK(NotAllowed(err)) << Errno("bind-mounting " + dir, err);
    return Errno(absl::StrCat("bind-mounting ", dir, " at ", target), err);
  }
  // A bind mount takes the flags of its source; read-only needs a remount.
  if (::mount(nullptr, target.c_str(), nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    const int err = errno;
    CHECK(NotAllowed(err)) << Errno("remounting read-only " + target, err);
    return Errno(absl::StrCat("remounting ", target, " read-only"), err);
  }
  return "";
}

// Writes the checkpoint directory: epochs 0..2 saved incrementally (each
// later one holds the dataset by reference to epoch 0), then a preemption
// inside epoch 3, committed as a mid-epoch checkpoint.
void WriteCheckpoints(const std::string& dir) {
  Job job;
  BuildJob(job);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir, .incremental = true});
  JobRunner* runner_ptr = nullptr;
  JobRunner runner(job, &manager,
                   {.on_epoch_end =
                        [&](const EpochStats& epoch) {
                          // Lands in the epoch group of the next epoch: the
                          // stop conditions were fetched before the save.
                          if (epoch.epoch == kPreemptedEpoch - 1) {
                            runner_ptr->RequestPreemptionAtNetBoundary(2);
                          }
                        },
                    .preempt_signals = {}});
  runner_ptr = &runner;
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  CHECK(IsPreempted(epochs.status())) << epochs.status();
  const std::optional<PreemptionStats>& preemption = runner.stats().preemption;
  CHECK(preemption.has_value());
  CHECK(preemption->stopped_at == StopPoint::kInEpoch)
      << StopPointName(preemption->stopped_at);
  CHECK_EQ(preemption->epoch, kPreemptedEpoch);
  CHECK(preemption->saved);
  CHECK_EQ(runner.stats().save_failures, 0);
}

class ReadOnlyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    checkpoints = new ReadOnlyCheckpoints;
    checkpoints->skip_reason = IsolateMounts();
    if (!checkpoints->skip_reason.empty()) return;
    checkpoints->dir = testing::NewTempDir("checkpoints");
    WriteCheckpoints(checkpoints->dir);
    checkpoints->read_only = testing::NewTempDir("read_only");
    checkpoints->skip_reason =
        BindReadOnly(checkpoints->dir, checkpoints->read_only);
    if (!checkpoints->skip_reason.empty()) return;
    checkpoints->listing = ListRecursively(checkpoints->dir);
    LOG(INFO) << "running on " << checkpoints->read_only
              << ", a read-only bind mount of " << checkpoints->dir << " ("
              << checkpoints->listing.size() << " paths)";
  }

  static void TearDownTestSuite() {
    if (checkpoints->skip_reason.empty()) {
      PCHECK(::umount(checkpoints->read_only.c_str()) == 0);
    }
    delete checkpoints;
    checkpoints = nullptr;
  }

  void SetUp() override {
    if (!checkpoints->skip_reason.empty()) {
      GTEST_SKIP() << checkpoints->skip_reason;
    }
    ro_ = checkpoints->read_only;
    // The mount must really refuse writes, or the test proves nothing.
    const std::string probe = JoinPath(ro_, "probe");
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ASSERT_LT(fd, 0) << "created " << probe << " on the read-only mount";
    ASSERT_EQ(err, EROFS) << std::strerror(err);
  }

  // Whatever the test did, the directory is exactly as it was written.
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_THAT(
        Differences(checkpoints->listing, ListRecursively(checkpoints->dir)),
        IsEmpty())
        << "a read entry point changed the checkpoint directory";
  }

  std::string Db(int id, int64_t epoch) const {
    return CheckpointDbPath(ro_, absl::StrCat("trainer_", id), epoch);
  }

  std::string ro_;
};

// One run of the job on the read-only path, resuming from `resume`.
// `on_restore` sees the session right after the restore.
Outcome Resume(const std::string& dir, const ResumeFrom& resume,
               const std::function<void(const Session&)>& on_restore) {
  Job job;
  BuildJob(job);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = dir, .incremental = true});
  JobRunner runner(job, &manager,
                   {.resume_from = resume,
                    .on_restore = [&](int64_t, bool) { on_restore(session); },
                    .preempt_signals = {}});
  Outcome outcome{runner.Train(session), runner.stats(), {}};
  if (outcome.epochs.ok()) outcome.totals = Totals(session);
  return outcome;
}

// Every save of a run on the read-only directory fails, saying why; the job
// goes on (Caffe2's rule), so the result is exact anyway.
void ExpectEverySaveRefused(const Outcome& run, const std::string& dir,
                            const std::vector<int64_t>& epochs) {
  ASSERT_EQ(run.stats.saves.size(), epochs.size());
  for (size_t i = 0; i < epochs.size(); ++i) {
    const SaveOutcome& save = run.stats.saves[i];
    EXPECT_EQ(save.epoch, epochs[i]);
    EXPECT_EQ(save.stats.status().code(), absl::StatusCode::kUnavailable)
        << save.stats.status();
    EXPECT_THAT(std::string(save.stats.status().message()),
                HasSubstr(absl::StrCat("checkpoint directory ", dir,
                                       " is not writable: Read-only file "
                                       "system")));
  }
  EXPECT_EQ(run.stats.save_failures, static_cast<int>(epochs.size()));
}

TEST_F(ReadOnlyTest, LatestContinuesTheMidEpochCheckpoint) {
  std::vector<int64_t> restored;
  Outcome run = Resume(ro_, ResumeFrom::Latest(), [&](const Session& session) {
    restored = Totals(session);
  });
  ASSERT_TRUE(run.epochs.ok()) << run.epochs.status();
  EXPECT_EQ(run.stats.resumed_from, std::optional<int64_t>(kPreemptedEpoch));
  EXPECT_EQ(*run.epochs, 4);
  ASSERT_FALSE(run.stats.epochs.empty());
  EXPECT_EQ(run.stats.epochs[0].epoch, kPreemptedEpoch);
  EXPECT_TRUE(run.stats.epochs[0].continued);
  // Stopped inside epoch 3, after epoch 2's 115 and before its 136.
  ASSERT_THAT(restored, SizeIs(kNodes));
  for (int64_t total : restored) {
    EXPECT_GE(total, 115);
    EXPECT_LT(total, 136);
  }
  EXPECT_THAT(run.totals, ElementsAre(145, 145));
  ExpectEverySaveRefused(run, ro_, {3, 4});
}

TEST_F(ReadOnlyTest, AnOlderEpochLoadsExactly) {
  std::vector<int64_t> restored;
  Outcome run = Resume(ro_, ResumeFrom::Epoch(1), [&](const Session& session) {
    restored = Totals(session);
  });
  ASSERT_TRUE(run.epochs.ok()) << run.epochs.status();
  EXPECT_EQ(run.stats.resumed_from, std::optional<int64_t>(1));
  EXPECT_EQ(*run.epochs, 4);
  EXPECT_THAT(restored, ElementsAre(103, 103));
  EXPECT_THAT(run.totals, ElementsAre(145, 145));
  ExpectEverySaveRefused(run, ro_, {2, 3, 4});
}

TEST_F(ReadOnlyTest, LoadBlobsReadsOneEpoch) {
  Job job;
  BuildJob(job);
  LocalSession session;
  MultiNodeCheckpointManager manager({.directory = ro_, .incremental = true});
  JobRunner runner(job, &manager, {.preempt_signals = {}});
  absl::StatusOr<bool> loaded =
      runner.LoadBlobsFromCheckpoints({"total"}, 2, session);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(*loaded);
  EXPECT_THAT(Totals(session), ElementsAre(115, 115));
}

// --- ckpt ------------------------------------------------------------------

// Runs the ckpt binary; the columns of its tables are padded with spaces,
// which the lines here have one of.
testing::ChildRun Ckpt(const std::vector<std::string>& args) {
  testing::ChildRun run =
      testing::RunBinary(testing::RunfilesPath("tools/ckpt"), args);
  for (std::string& line : run.lines) {
    line = absl::StrJoin(absl::StrSplit(line, ' ', absl::SkipEmpty()), " ");
  }
  LOG(INFO) << "ckpt " << absl::StrJoin(args, " ") << ":\n"
            << absl::StrJoin(run.lines, "\n");
  return run;
}

TEST_F(ReadOnlyTest, CkptList) {
  testing::ChildRun list = Ckpt({"list", ro_});
  ASSERT_EQ(list.exit_code(), 0) << list.Describe();
  ASSERT_EQ(list.lines.size(), 7u) << list.Describe();
  EXPECT_EQ(list.lines[0],
            absl::StrCat("checkpoint ", ro_, " (leveldb, format version 2)"));
  EXPECT_EQ(list.lines[1],
            "EPOCH STATE NODES BLOBS BYTES WRITTEN REFERENCED SAVE TIME");
  EXPECT_THAT(list.lines[2],
              StartsWith("0 committed trainer_0,trainer_1 8 582 582 - "));
  EXPECT_THAT(list.lines[3],
              StartsWith("1 committed trainer_0,trainer_1 8 582 216 366 "
                         "(epoch 0) "));
  EXPECT_THAT(list.lines[4],
              StartsWith("2 committed trainer_0,trainer_1 8 582 216 366 "
                         "(epoch 0) "));
  // What the preemption checkpoint holds depends on where each node's
  // thread stopped.
  EXPECT_THAT(list.lines[5], StartsWith("3 preempted mid-epoch (request) "
                                        "trainer_0,trainer_1 12 "));
  EXPECT_EQ(list.lines[6],
            "4 committed epochs (newest 3), 0 uncommitted, 0 incomplete");
}

TEST_F(ReadOnlyTest, CkptShow) {
  testing::ChildRun show = Ckpt({"show", Db(1, 2)});
  ASSERT_EQ(show.exit_code(), 0) << show.Describe();
  ASSERT_EQ(show.lines.size(), 8u) << show.Describe();
  EXPECT_EQ(show.lines[0], absl::StrCat("database ", Db(1, 2)));
  EXPECT_THAT(show.lines[1],
              StartsWith("node trainer_1, epoch 2, format version 2, saved "));
  EXPECT_EQ(show.lines[2],
            "4 blobs, 4 values, 291 bytes (183 held by reference in epoch 0)");
  EXPECT_EQ(show.lines[3], "NAME TYPE DTYPE SHAPE VALUES BYTES CRC32C HELD IN");
  EXPECT_THAT(show.lines[4], StartsWith("blob_names Tensor string [4] 1 75 "));
  EXPECT_THAT(show.lines[4], EndsWith(" epoch 0"));
  EXPECT_THAT(show.lines[6], StartsWith("total Tensor int64 [1] 1 38 "));
  EXPECT_THAT(show.lines[6], EndsWith(" -"));
  EXPECT_THAT(show.lines[7], StartsWith("val Tensor int64 [10] 1 108 "));
  EXPECT_THAT(show.lines[7], EndsWith(" epoch 0"));
}

TEST_F(ReadOnlyTest, CkptDump) {
  // Through the reference to epoch 0's database.
  testing::ChildRun dump = Ckpt({"dump", Db(0, 2), "val"});
  ASSERT_EQ(dump.exit_code(), 0) << dump.Describe();
  EXPECT_THAT(
      dump.lines,
      ElementsAre("blob: val", "type: Tensor", "stored: 1 value, 108 bytes",
                  absl::StrCat("held in: epoch 0 (", Db(0, 0), ")"),
                  "value: int64[10] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}"))
      << dump.Describe();
  dump = Ckpt({"dump", Db(1, 2), "total"});
  ASSERT_EQ(dump.exit_code(), 0) << dump.Describe();
  EXPECT_THAT(dump.lines,
              ElementsAre("blob: total", "type: Tensor",
                          "stored: 1 value, 38 bytes", "value: int64[1] {115}"))
      << dump.Describe();
}

TEST_F(ReadOnlyTest, CkptVerify) {
  testing::ChildRun verify = Ckpt({"verify", ro_});
  ASSERT_EQ(verify.exit_code(), 0) << verify.Describe();
  ASSERT_EQ(verify.lines.size(), 9u) << verify.Describe();
  const std::string referenced = "183 held by reference in epoch 0";
  EXPECT_THAT(
      std::vector<std::string>(verify.lines.begin(), verify.lines.begin() + 6),
      ElementsAre(
          "epoch 0 trainer_0: ok (4 blobs, 291 bytes)",
          "epoch 0 trainer_1: ok (4 blobs, 291 bytes)",
          "epoch 1 trainer_0: ok (4 blobs, 291 bytes, " + referenced + ")",
          "epoch 1 trainer_1: ok (4 blobs, 291 bytes, " + referenced + ")",
          "epoch 2 trainer_0: ok (4 blobs, 291 bytes, " + referenced + ")",
          "epoch 2 trainer_1: ok (4 blobs, 291 bytes, " + referenced + ")"));
  EXPECT_THAT(verify.lines[6], StartsWith("epoch 3 trainer_0: ok ("));
  EXPECT_THAT(verify.lines[7], StartsWith("epoch 3 trainer_1: ok ("));
  EXPECT_EQ(
      verify.lines[8],
      absl::StrCat("OK: verified 8 databases of 4 committed epochs in ", ro_));

  verify = Ckpt({"verify", ro_, "--epoch=3"});
  ASSERT_EQ(verify.exit_code(), 0) << verify.Describe();
  EXPECT_EQ(
      verify.lines.back(),
      absl::StrCat("OK: verified 2 databases of 1 committed epoch in ", ro_));
}

TEST_F(ReadOnlyTest, CkptDiff) {
  // Exit code 1 is diff's "the databases differ", not a failure.
  testing::ChildRun diff = Ckpt({"diff", Db(0, 1), Db(0, 2)});
  EXPECT_EQ(diff.exit_code(), 1) << diff.Describe();
  ASSERT_EQ(diff.lines.size(), 5u) << diff.Describe();
  EXPECT_EQ(diff.lines[0],
            absl::StrCat("--- ", Db(0, 1),
                         " (node trainer_0, epoch 1, 183 held by reference in "
                         "epoch 0)"));
  EXPECT_EQ(diff.lines[1],
            absl::StrCat("+++ ", Db(0, 2),
                         " (node trainer_0, epoch 2, 183 held by reference in "
                         "epoch 0)"));
  EXPECT_THAT(diff.lines[2],
              StartsWith("~ dataset:0_cursor: 1 of 1 values differ (CRC-32C "));
  EXPECT_THAT(diff.lines[3],
              StartsWith("~ total: 1 of 1 values differ (CRC-32C "));
  EXPECT_EQ(diff.lines[4], "0 added, 0 removed, 2 changed, 2 unchanged");

  diff = Ckpt({"diff", Db(1, 2), Db(1, 2)});
  EXPECT_EQ(diff.exit_code(), 0) << diff.Describe();
  ASSERT_FALSE(diff.lines.empty()) << diff.Describe();
  EXPECT_EQ(diff.lines.back(), "identical: 4 blobs");
}

}  // namespace
}  // namespace jobgraph

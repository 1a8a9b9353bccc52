// Simulated power loss under the whole save and commit path: the example
// job runs with libpower_loss_preload.so, which records what each fsync
// makes durable and cuts the power just before its N-th sync, rename or
// link under the checkpoint directory. The directory a power cut would
// leave (unsynced bytes gone, or torn at a page boundary; unsynced
// directory entries reverted) replaces the real one, and the job resumes
// from `latest`. For every N of a run, in one process and for each rank of
// an MPI job, with synchronous, incremental, asynchronous and preemption
// saves:
//  - every epoch the commit log lists verifies on every node (sizes,
//    CRC-32C, node and epoch), so a listed epoch is never missing a byte;
//  - the newest listed epoch is at least the newest the run had logged as
//    committed before the cut: a reported commit survives the power loss;
//  - the resume loads exactly that epoch and ends with the result of an
//    uninterrupted run.
// Remove any fsync of a file or directory on that path, or the durable close
// of a database, and some N fails one of these (the README of this folder
// lists which).

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/sanitizers.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/power_loss/power_loss_image.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;
using ::jobgraph::testing::RunBinary;
using ::jobgraph::testing::RunBinaryWatched;
using ::jobgraph::testing::RunfilesPath;
using ::jobgraph::testing::WatchedChild;
using ::jobgraph::testing_util::kSweepStride;

constexpr int kPreempted = 75;
constexpr char kMpirun[] = "/usr/bin/mpirun";
// The job: sum_pipeline's nodes read `num_records` values 0, 1, ... three
// per epoch into totals that start at 100. Every scenario's job saves at
// least twice (init, then each epoch), so every step of the path, the
// second commit's included, is walked; more epochs would walk the same
// steps again.
struct Scenario;
std::vector<std::string> JobFlags(const Scenario& s);

struct Scenario {
  std::string name;
  std::vector<std::string> flags;  // of sum_pipeline, beside JobFlags()
  int num_records = 4;
  bool async = false;
  // SIGTERM (a preemption notice) comes at the first record of epoch 1:
  // the run stops there and saves a mid-epoch checkpoint.
  bool preempt = false;
  // 0: one process; else mpirun -np 2, and the power is cut by the process
  // of rank `mpi_rank`.
  int ranks = 0;
  int mpi_rank = 0;
  // The walked run resumes (from `latest`) on what a crash left: a run
  // killed just before its first commit, with both nodes' databases of
  // epoch 0 complete at their final names but not committed. The resume
  // deletes those (nothing lists them) before it saves anew.
  bool over_leftovers = false;
};

std::vector<std::string> JobFlags(const Scenario& s) {
  return {"--nodes=2", absl::StrCat("--num_records=", s.num_records),
          "--records_per_epoch=3",
          // With a preemption, each record logs "record done" and sleeps
          // 100 ms: the notice, sent on the first such line, lands with two
          // records of the epoch still to go (200 ms for the test to send
          // it, even on a loaded machine).
          absl::StrCat("--record_delay_ms=", s.preempt ? 100 : 0)};
}

// The result line of a run resumed from epoch `newest` (-1: from scratch):
// the uninterrupted run's, but a resume from the last epoch runs one more
// (empty) epoch, as in Caffe2.
std::string ExpectedResult(const Scenario& s, int64_t newest) {
  const int64_t last_epoch = (s.num_records + 2) / 3;
  const int64_t total = 100 + s.num_records * (s.num_records - 1) / 2;
  return absl::StrCat("result: epochs=", std::max(last_epoch, newest + 1),
                      " totals=", total, ",", total);
}

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

std::string Preload() {
  return RunfilesPath("tests/power_loss/libpower_loss_preload.so");
}

// Environment a sanitizer build needs beside the preloaded library: ASan
// wants its runtime first among the libraries, which LD_PRELOAD puts after.
std::vector<std::string> SanitizerEnv(bool mpi) {
  std::string asan = "ASAN_OPTIONS=verify_asan_link_order=0";
  if (mpi) absl::StrAppend(&asan, ":fast_unwind_on_malloc=0");
  return {asan, "LSAN_OPTIONS=use_tls=0"};
}

enum class RunKind {
  kWalked,     // the scenario's run, whose events the test walks
  kLeftovers,  // before it, for over_leftovers: killed before its commit
  kResume,     // after a power cut, to check what survived
};

// One run of the scenario's job on `dir`; `env` as for RunBinary. Only the
// walked run is preempted or on ranks: a resume runs in one process (a
// checkpoint of any number of ranks resumes on any number).
ChildRun RunJob(const Scenario& s, const std::string& dir, RunKind kind,
                std::vector<std::string> env) {
  std::vector<std::string> args = JobFlags(s);
  args.insert(args.end(), s.flags.begin(), s.flags.end());
  args.push_back("--checkpoint_dir=" + dir);
  if (kind == RunKind::kResume ||
      (kind == RunKind::kWalked && s.over_leftovers)) {
    args.push_back("--resume_from_epoch=latest");
  }
  if (kind == RunKind::kLeftovers) {
    env.push_back("JOBGRAPH_FAILPOINT=commit.before_commit_log:crash");
  }
  for (std::string& e : SanitizerEnv(s.ranks > 0)) env.push_back(e);
  const std::string binary = RunfilesPath("examples/sum_pipeline");
  if (kind != RunKind::kWalked) return RunBinary(binary, args, env);
  if (s.preempt) {
    bool sent = false;
    return RunBinaryWatched(
        binary, args, {.extra_env = env},
        [&](WatchedChild& child, const std::string& line, bool from_stderr) {
          if (sent || !from_stderr || !absl::StrContains(line, "record done")) {
            return;
          }
          sent = child.SignalIfRunning(SIGTERM);
        });
  }
  if (s.ranks == 0) return RunBinary(binary, args, env);
  for (std::string& e : ::jobgraph::testing::OpenMpiTempEnv()) {
    env.push_back(std::move(e));
  }
  std::vector<std::string> mpi_args = {"--allow-run-as-root", "--oversubscribe",
                                       "-np", absl::StrCat(s.ranks)};
  // The ranks get the preloaded library, mpirun does not: under a sanitizer
  // the library needs that sanitizer's runtime, which only the ranks carry.
  for (auto it = env.begin(); it != env.end();) {
    if (absl::StartsWith(*it, "LD_PRELOAD=")) {
      mpi_args.push_back("-x");
      mpi_args.push_back(*it);
      it = env.erase(it);
    } else {
      ++it;
    }
  }
  mpi_args.push_back(binary);
  mpi_args.insert(mpi_args.end(), args.begin(), args.end());
  return RunBinary(kMpirun, mpi_args, env);
}

// The newest epoch the run logged as committed, -1 if none: a synchronous
// save's epoch line comes once it is committed; a background save and a
// preemption save say so.
int64_t NewestLoggedCommit(const ChildRun& run) {
  static const std::regex* patterns[] = {
      new std::regex(
          "\\] epoch ([0-9]+)( \\(init\\))?: .*checkpoint [0-9.]+ ms [0-9]+ B"),
      new std::regex("\\] epoch ([0-9]+): background checkpoint committed"),
      new std::regex("checkpoint of epoch ([0-9]+) \\(mid-[a-z]+\\) committed"),
      new std::regex("epoch ([0-9]+) is committed; a resume starts after it"),
      new std::regex("epoch ([0-9]+) is marked as the last"),
  };
  int64_t newest = -1;
  for (const std::regex* pattern : patterns) {
    for (std::sregex_iterator it(run.log.begin(), run.log.end(), *pattern), end;
         it != end; ++it) {
      int64_t epoch = 0;
      CHECK(absl::SimpleAtoi((*it)[1].str(), &epoch));
      newest = std::max(newest, epoch);
    }
  }
  return newest;
}

// The epochs the commit log of `dir` lists (none without a log), checking
// that it parses and that every listed epoch's databases verify for every
// node it names.
std::vector<int64_t> CommittedAndVerified(const std::string& dir,
                                          const std::string& context) {
  std::vector<int64_t> epochs;
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir);
  if (absl::IsNotFound(log.status())) return epochs;
  EXPECT_TRUE(log.ok()) << context << ": " << log.status();
  if (!log.ok()) return epochs;
  for (const CommittedEpoch& committed : log->epoch()) {
    epochs.push_back(committed.epoch());
    EXPECT_EQ(committed.node_size(), 2) << context;
    for (const std::string& node : committed.node()) {
      absl::StatusOr<CompactBlobIndex> db = VerifyCheckpointDb(
          log->db_type(), CheckpointDbPath(dir, node, committed.epoch()), node,
          committed.epoch());
      EXPECT_TRUE(db.ok()) << context << ": committed epoch "
                           << committed.epoch() << " of " << node << ": "
                           << db.status();
    }
  }
  return epochs;
}

// Per run: the events each process counted.
std::vector<power_loss::ProcessEvents> Events(const std::string& shadow) {
  absl::StatusOr<std::vector<power_loss::ProcessEvents>> events =
      power_loss::ReadEvents(shadow);
  CHECK(events.ok()) << events.status();
  return *std::move(events);
}

int64_t EventsOfRank(const std::vector<power_loss::ProcessEvents>& all,
                     int rank) {
  int64_t n = 0;
  for (const power_loss::ProcessEvents& p : all) {
    if (p.rank == rank) n = std::max<int64_t>(n, p.events.size());
  }
  return n;
}

// Every file and directory under `dir` with its bytes: two images with the
// same listing resume the same way, so each is checked once.
std::string Listing(const std::string& dir) {
  std::vector<std::string> entries;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    // Temporary names carry the pid of the run that made them.
    std::string item = std::regex_replace(
        std::filesystem::relative(entry.path(), dir).string(),
        std::regex("tmp-[0-9]+-"), "tmp-PID-");
    if (entry.is_regular_file()) {
      absl::StatusOr<std::string> bytes = ReadFileToString(entry.path());
      CHECK(bytes.ok()) << bytes.status();
      absl::StrAppend(&item, "\n", bytes->size(), "\n", *bytes);
    }
    entries.push_back(std::move(item));
  }
  std::sort(entries.begin(), entries.end());
  return absl::StrJoin(entries, "\n\n");
}

struct Totals {
  int crash_points = 0;
  int cut = 0;      // runs the power cut interrupted
  int images = 0;   // images built (strict and torn)
  int resumed = 0;  // distinct images checked and resumed
  int64_t torn_bytes = 0;
};

class PowerLossTest : public ::testing::TestWithParam<Scenario> {
 protected:
  // A run of the scenario on the directory `dir`, recorded into the shadow
  // store `shadow`; the power is cut before event `crash_at` of the process
  // of rank `crash_rank` (0: never).
  ChildRun Run(const std::string& dir, const std::string& shadow,
               int64_t crash_at, int crash_rank) {
    const Scenario& s = GetParam();
    if (s.over_leftovers) {
      ChildRun leftovers = RunJob(s, dir, RunKind::kLeftovers, {});
      CHECK(leftovers.killed()) << leftovers.Describe();
      CHECK(std::filesystem::exists(dir + "/trainer_1.0"));
    }
    absl::Status started = power_loss::Start(dir, shadow);
    CHECK(started.ok()) << started;
    return RunJob(s, dir, RunKind::kWalked,
                  power_loss::Environment(Preload(), dir, shadow, crash_at,
                                          s.ranks > 0 ? crash_rank : -1));
  }

  // Builds the image the power cut leaves of `dir` (strict, or torn with
  // `seed`), checks it and resumes from it, unless an identical image was
  // checked before. `logged` is the newest commit the cut run had logged.
  void CheckImage(const std::string& dir, const std::string& shadow,
                  int64_t logged, bool torn, uint32_t seed,
                  const std::string& context) {
    const Scenario& s = GetParam();
    const std::string image = dir + (torn ? ".torn" : ".image");
    absl::StatusOr<power_loss::ImageStats> stats = power_loss::BuildImage(
        shadow, image, dir, {.torn = torn, .seed = seed});
    ASSERT_TRUE(stats.ok()) << context << ": " << stats.status();
    totals_.torn_bytes += stats->torn_bytes;
    ++totals_.images;
    if (!checked_.insert(Listing(image)).second) {
      std::filesystem::remove_all(image);
      return;
    }
    ++totals_.resumed;

    const std::vector<int64_t> committed = CommittedAndVerified(image, context);
    const int64_t newest = committed.empty() ? -1 : committed.back();
    EXPECT_GE(newest, logged)
        << context << ": the run had logged epoch " << logged
        << " as committed, but after the power cut the commit log lists ["
        << absl::StrJoin(committed, ",") << "]";
    // Nothing beyond the saves that can be in flight: one synchronous save,
    // or a background save with the next one queued behind it.
    EXPECT_LE(newest, logged + (s.async ? 2 : 1)) << context;

    ChildRun resume = RunJob(s, image, RunKind::kResume, {});
    ASSERT_TRUE(resume.exited_ok()) << context << ": " << resume.Describe();
    EXPECT_EQ(resume.Result(), ExpectedResult(s, newest))
        << context << ": " << resume.Describe();
    if (newest >= 0) {
      const std::string from =
          absl::StrCat("resumed from epoch ", newest, " of ", image);
      EXPECT_TRUE(absl::StrContains(resume.log, from))
          << context << ": expected '" << from << "': " << resume.Describe();
    } else {
      EXPECT_FALSE(absl::StrContains(resume.log, "resumed from epoch"))
          << context << ": " << resume.Describe();
    }
    std::filesystem::remove_all(image);
  }

  Totals totals_;
  std::set<std::string> checked_;
};

TEST_P(PowerLossTest, EveryCrashPointResumesExactly) {
  const Scenario& s = GetParam();
  const std::string base = NewTempDir("power_loss");
  const int ranks = std::max(s.ranks, 1);

  // The run without a power cut, recorded: how many events each process
  // has. A preempted run stops after its preemption save.
  const std::string clean_dir = base + "/clean";
  std::filesystem::create_directory(clean_dir);
  ChildRun clean = Run(clean_dir, base + "/clean.shadow", 0, 0);
  if (s.preempt) {
    ASSERT_EQ(clean.exit_code(), kPreempted) << clean.Describe();
    ASSERT_TRUE(absl::StrContains(
        clean.log, "checkpoint of epoch 1 (mid-epoch) committed"))
        << clean.Describe();
  } else {
    ASSERT_TRUE(clean.exited_ok()) << clean.Describe();
    ASSERT_EQ(clean.Result(), ExpectedResult(s, -1)) << clean.Describe();
  }
  const std::vector<power_loss::ProcessEvents> events =
      Events(base + "/clean.shadow");
  ASSERT_EQ(events.size(), static_cast<size_t>(ranks));
  // A power cut after the run ended keeps all it logged.
  CheckImage(clean_dir, base + "/clean.shadow", NewestLoggedCommit(clean),
             false, 0, s.name + ": after the run");

  {
    const int rank = s.mpi_rank;
    const int64_t last = EventsOfRank(events, rank);
    ASSERT_GT(last, 0);
    // Every crash point, or every kSweepStride-th under a sanitizer
    // (checkpoint/util/sanitizers.h); the last one always.
    for (int64_t n = 1; n <= last;
         n = n < last ? std::min(n + kSweepStride, last) : last + 1) {
      const std::string context =
          absl::StrCat(s.name, ": rank ", rank, ", power cut before event ", n,
                       " of ", last);
      const std::string dir = absl::StrCat(base, "/r", rank, "_", n);
      const std::string shadow = dir + ".shadow";
      std::filesystem::create_directory(dir);
      ChildRun cut = Run(dir, shadow, n, rank);
      ++totals_.crash_points;
      // Events can come in another order from run to run (tables close on
      // other threads), never fewer: the cut lands in every run.
      const bool power_cut = power_loss::PowerWasCut(shadow);
      totals_.cut += power_cut;
      EXPECT_TRUE(power_cut) << context << ": " << cut.Describe();
      if (s.ranks == 0) {
        EXPECT_TRUE(cut.killed()) << context << ": " << cut.Describe();
      } else {
        EXPECT_NE(cut.exit_code(), 0) << context << ": " << cut.Describe();
      }
      const int64_t logged = NewestLoggedCommit(cut);
      CheckImage(dir, shadow, logged, false, 0, context);
      CheckImage(dir, shadow, logged, true, static_cast<uint32_t>(n),
                 context + " (torn)");
      std::filesystem::remove_all(dir);
      std::filesystem::remove_all(shadow);
      if (HasFatalFailure()) return;
    }
  }
  std::printf(
      "%s: %d crash points%s, %d cut the power; %d images (strict and "
      "torn), %d distinct ones checked and resumed; torn images kept %lld "
      "unsynced bytes\n",
      s.name.c_str(), totals_.crash_points,
      kSweepStride > 1
          ? absl::StrCat(" (one in ", kSweepStride, ": a sanitizer build)")
                .c_str()
          : "",
      totals_.cut, totals_.images, totals_.resumed,
      static_cast<long long>(totals_.torn_bytes));
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, PowerLossTest,
    ::testing::Values(
        Scenario{.name = "sync"},
        Scenario{.name = "incremental_keep_last_2",
                 .flags = {"--incremental_checkpoint", "--full_every=2",
                           "--keep_last=2"}},
        Scenario{
            .name = "async", .flags = {"--async_checkpoint"}, .async = true},
        Scenario{.name = "preemption", .preempt = true},
        Scenario{.name = "over_leftovers", .over_leftovers = true},
        // On ranks a save is slower to start: two saves (two records).
        Scenario{.name = "mpi_rank0", .num_records = 2, .ranks = 2},
        Scenario{
            .name = "mpi_rank1", .num_records = 2, .ranks = 2, .mpi_rank = 1}),
    [](const ::testing::TestParamInfo<Scenario>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace jobgraph

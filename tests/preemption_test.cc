// Preemption at every point between two nets, in process: a run is stopped
// at its n-th net boundary (JobRunner::RequestPreemptionAtNetBoundary), its
// preemption checkpoint saved, and a new runner on a new session resumes
// from `latest`. Whatever the boundary (init, the middle of an epoch with
// one or several Pipe threads, a nested loop, a GLOBAL epoch task's
// intermediate blobs, download, exit), the resumed run must end in exactly
// the state and with exactly the epoch count of a run that was never
// stopped. Chains of preemptions (each resumed run stopped again) too.

#include "checkpoint/preemption.h"

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/sanitizers.h"
#include "checkpoint/util/test_util.h"
#include "engine/data/data_test_util.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/net_builder.h"
#include "engine/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/caffe2_pipeline.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing_util::kSweepStride;
using ::testing::HasSubstr;
using testing_util::TempDir;

// What a finished run leaves: the epoch count and the named int64 blobs.
struct Outcome {
  int64_t epochs = 0;
  std::map<std::string, std::vector<int64_t>> blobs;

  friend bool operator==(const Outcome& a, const Outcome& b) {
    return a.epochs == b.epochs && a.blobs == b.blobs;
  }
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << "epochs=" << o.epochs;
  for (const auto& [name, values] : o.blobs) {
    os << " " << name << "=[";
    for (int64_t v : values) os << v << ",";
    os << "]";
  }
  return os;
}

// A job under test and the blobs ("node/blob") its outcome is made of.
struct TestJob {
  std::function<void(Job&)> build;
  std::vector<std::pair<std::string, std::string>> results;
  // Blobs ("node/blob") whose final value the job's definition fixes; every
  // finished run, stopped or not, must end with exactly these.
  std::map<std::string, std::vector<int64_t>> pinned;
};

// Checks the blobs `t` pins in a finished run's outcome.
void ExpectPinned(const TestJob& t, const Outcome& o, const std::string& what) {
  for (const auto& [name, expected] : t.pinned) {
    auto it = o.blobs.find(name);
    ASSERT_NE(it, o.blobs.end()) << what << ": no " << name;
    EXPECT_EQ(it->second, expected) << what << ": " << name;
  }
}

// The Caffe2 pipeline on two nodes, with a nested loop in the processor, a
// download group that derives a blob from the totals and an exit group.
TestJob Caffe2WithLoopAndGroups() {
  TestJob t;
  t.build = [](Job& job) {
    for (int id = 0; id < 2; ++id) {
      const std::string node = absl::StrCat("trainer_", id);
      testing::BuildCaffe2Pipeline(job, id);
      Task& ticks_init =
          job.init_group().NewTask(Node(node), {.name = "ticks"});
      ticks_init.net().Const<int64_t>("ticks", {0});
      Task& ticker = job.epoch_group().NewTask(Node(node), {.name = "ticker"});
      ticker.net().Loop(3, [&](NetBuilder& loop) {
        loop.Op("TestIncrement", {BlobRef("ticks")}, {BlobRef("ticks")});
        loop.NewNet();
        loop.Op("TestIncrement", {BlobRef("ticks")}, {BlobRef("ticks")});
      });
      Task& download =
          job.download_group().NewTask(Node(node), {.name = "final"});
      download.net().Add(BlobRef("total"), BlobRef("ticks"), BlobRef("final"));
      download.AddOutput(BlobRef("final", node));
      Task& exit = job.exit_group().NewTask(Node(node), {.name = "exit"});
      exit.net().Op("TestIncrement", {BlobRef("final")}, {BlobRef("final")});
    }
  };
  t.results = {{"trainer_0", "total"}, {"trainer_1", "total"},
               {"trainer_0", "ticks"}, {"trainer_1", "ticks"},
               {"trainer_0", "final"}, {"trainer_1", "final"}};
  return t;
}

// A Pipe of three threads over 60 records, 11 per epoch: every record is
// added to a root sum (under a lock) and to its thread's own sum, which lives
// in the thread's child workspace and is merged into the root at the end of
// each epoch. A lost or repeated record changes one of the sums or counts.
TestJob ThreadedPipe() {
  TestJob t;
  t.build = [](Job& job) {
    const Node node("w");
    Task& init = job.init_group().NewTask(node);
    Record data = ConstRecord(init.net(), {{"v", Tensor::Iota<int64_t>(60)}});
    Reader reader = Dataset(data, "data").NewReader(init.net());
    init.net().Const<int64_t>("sum", {0});
    init.net().Const<int64_t>("count", {0});
    init.net().Const<int64_t>("merged_sum", {0});
    init.net().Const<int64_t>("merges", {0});
    ReaderWithLimit limited(reader, /*num_iter=*/11);
    Task& pipe = Pipe(
        job.epoch_group(), node, limited,
        [](NetBuilder& net, const Record& row) {
          data_test::AccumulateRows(net, row.Field("v"), BlobRef("sum"),
                                    BlobRef("count"));
          net.NewNet();
          data_test::AccumulateRows(net, row.Field("v"), BlobRef("local_sum"),
                                    BlobRef("local_count"));
        },
        /*num_threads=*/3, "pipe");
    pipe.instance_init_net().Const<int64_t>("local_sum", {0});
    pipe.instance_init_net().Const<int64_t>("local_count", {0});
    data_test::AccumulateRows(pipe.instance_exit_net(), BlobRef("local_sum"),
                              BlobRef("merged_sum"), BlobRef("merges"));
    job.AddStopCondition(limited.data_finished());
  };
  t.results = {
      {"w", "sum"}, {"w", "count"}, {"w", "merged_sum"}, {"w", "merges"}};
  // Every record of Iota(60) (0..59) is read exactly once: sum 0+...+59 =
  // 59*60/2 = 1770 over 60 rows.
  constexpr int64_t kThreadedPipeSum = 1770;
  constexpr int64_t kThreadedPipeCount = 60;
  t.pinned = {{"w/sum", {kThreadedPipeSum}}, {"w/count", {kThreadedPipeCount}}};
  return t;
}

// A GLOBAL epoch task whose two nets pass an intermediate blob ("half",
// created in the epoch, so not in the checkpointed list) from one to the
// other, five epochs by an EpochLimiter.
TestJob GlobalEpochIntermediates() {
  TestJob t;
  t.build = [](Job& job) {
    const Node node("g");
    job.epoch_group() = TaskGroup("epoch", GLOBAL);
    Task& init = job.init_group().NewTask(node);
    init.net().Const<int64_t>("acc", {1});
    init.net().Const<int64_t>("one", {1});
    Task& step = job.epoch_group().NewTask(node, {.name = "step"});
    step.net().Add(BlobRef("acc"), BlobRef("one"), BlobRef("half"));
    step.net().NewNet();
    step.net().Add(BlobRef("half"), BlobRef("half"), BlobRef("acc"));
    EpochLimiter(job, node, 5);
  };
  t.results = {{"g", "acc"}};
  return t;
}

Outcome Collect(const TestJob& t, const Session& session, int64_t epochs) {
  Outcome o;
  o.epochs = epochs;
  for (const auto& [node, blob] : t.results) {
    absl::StatusOr<Tensor> value = session.FetchBlob(node, blob);
    EXPECT_TRUE(value.ok()) << node << "/" << blob << ": " << value.status();
    if (!value.ok()) continue;
    std::vector<int64_t> values(value->data<int64_t>(),
                                value->data<int64_t>() + value->numel());
    o.blobs[absl::StrCat(node, "/", blob)] = values;
  }
  return o;
}

// One run into `dir`, resuming from `latest`; preempted at net boundary
// `stop_at` unless it is negative. Returns the outcome when the run
// finished, nullopt when it was preempted.
std::optional<Outcome> RunOnce(const TestJob& t, const std::string& dir,
                               int64_t stop_at, bool* preempted_mid_group,
                               bool async = false) {
  Job job;
  t.build(job);
  LocalSession session;
  Checkpointer checkpointer({.directory = dir, .async = async});
  JobRunner runner(
      job, &checkpointer,
      {.resume_from = ResumeFrom::Latest(), .preempt_signals = {}});
  if (stop_at >= 0) runner.RequestPreemptionAtNetBoundary(stop_at);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  if (!epochs.ok()) {
    EXPECT_TRUE(IsPreempted(epochs.status())) << epochs.status();
    EXPECT_TRUE(runner.stats().preemption.has_value());
    EXPECT_TRUE(runner.stats().preemption->saved)
        << StopPointName(runner.stats().preemption->stopped_at);
    EXPECT_EQ(runner.stats().save_failures, 0);
    if (preempted_mid_group != nullptr) {
      const StopPoint stopped = runner.stats().preemption->stopped_at;
      *preempted_mid_group =
          stopped == StopPoint::kInInit || stopped == StopPoint::kInEpoch;
    }
    return std::nullopt;
  }
  EXPECT_EQ(runner.stats().save_failures, 0);
  return Collect(t, session, *epochs);
}

// (job, asynchronous checkpoints)
class PreemptionTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  bool async() const { return std::get<1>(GetParam()); }
  TestJob Job() const {
    switch (std::get<0>(GetParam())) {
      case 0:
        return Caffe2WithLoopAndGroups();
      case 1:
        return ThreadedPipe();
      default:
        return GlobalEpochIntermediates();
    }
  }
};

TEST_P(PreemptionTest, EveryNetBoundaryResumesExactly) {
  const TestJob t = Job();
  TempDir reference_dir;
  const std::optional<Outcome> reference =
      RunOnce(t, reference_dir.path(), -1, nullptr);
  ASSERT_TRUE(reference.has_value());
  ExpectPinned(t, *reference, "uninterrupted run");
  int mid_group = 0;
  int stops = 0;
  int64_t n = 0;
  // Every boundary, or every kSweepStride-th under a sanitizer
  // (checkpoint/util/sanitizers.h).
  for (;; n += kSweepStride) {
    TempDir dir;
    bool in_group = false;
    std::optional<Outcome> first =
        RunOnce(t, dir.path(), n, &in_group, async());
    if (first.has_value()) {
      // n is past the last boundary: the run was never stopped.
      EXPECT_EQ(*first, *reference);
      ExpectPinned(t, *first, "run never stopped");
      break;
    }
    ++stops;
    mid_group += in_group;
    std::optional<Outcome> resumed =
        RunOnce(t, dir.path(), -1, nullptr, async());
    ASSERT_TRUE(resumed.has_value()) << "stopped at boundary " << n;
    ASSERT_EQ(*resumed, *reference) << "stopped at boundary " << n;
    ExpectPinned(t, *resumed, absl::StrCat("stopped at boundary ", n));
    ASSERT_LT(n, 2000) << "the run never finished";
  }
  // Most boundaries lie inside a group, where the position matters.
  EXPECT_GT(n, 10);
  EXPECT_GT(mid_group, stops / 2) << "of " << stops;
}

TEST_P(PreemptionTest, ChainsOfPreemptionsResumeExactly) {
  const TestJob t = Job();
  TempDir reference_dir;
  const std::optional<Outcome> reference =
      RunOnce(t, reference_dir.path(), -1, nullptr);
  ASSERT_TRUE(reference.has_value());
  ExpectPinned(t, *reference, "uninterrupted run");
  // Not below 5: a stop in download or exit reruns both from their start
  // (four boundaries in the first job), so a stop at every boundary there
  // would never let them finish.
  for (int64_t every : {5, 13}) {
    TempDir dir;
    std::optional<Outcome> outcome;
    int runs = 0;
    while (!outcome.has_value()) {
      ASSERT_LT(++runs, 3000) << "no progress with a stop every " << every;
      outcome = RunOnce(t, dir.path(), every, nullptr, async());
    }
    EXPECT_EQ(*outcome, *reference) << "a stop every " << every;
    ExpectPinned(t, *outcome, absl::StrCat("a stop every ", every));
    EXPECT_GT(runs, 1) << "a stop every " << every;
  }
}

std::string JobName(
    const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
  static const char* const kNames[] = {"Caffe2LoopAndGroups", "ThreadedPipe",
                                       "GlobalEpochIntermediates"};
  return absl::StrCat(kNames[std::get<0>(info.param)],
                      std::get<1>(info.param) ? "Async" : "");
}

INSTANTIATE_TEST_SUITE_P(Jobs, PreemptionTest,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Bool()),
                         JobName);

// The commit log marks a preemption checkpoint, and the epoch's ordinary
// save replaces the mark.
TEST(PreemptionCommitLogTest, MidEpochEntryIsMarkedThenReplaced) {
  TempDir dir;
  const TestJob t = Caffe2WithLoopAndGroups();
  // Boundary 40 lies in epoch 2 of this job (checked below).
  ASSERT_FALSE(RunOnce(t, dir.path(), 40, nullptr).has_value());
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_GE(log->epoch_size(), 2);
  const CommittedEpoch& last = log->epoch(log->epoch_size() - 1);
  ASSERT_TRUE(last.has_preemption());
  EXPECT_EQ(last.preemption().group(), JOB_GROUP_EPOCH);
  EXPECT_EQ(last.preemption().signal(), "request");
  EXPECT_EQ(last.epoch(), log->epoch_size() - 1);
  for (int i = 0; i + 1 < log->epoch_size(); ++i) {
    EXPECT_FALSE(log->epoch(i).has_preemption()) << i;
  }
  const int64_t preempted_epoch = last.epoch();
  ASSERT_TRUE(RunOnce(t, dir.path(), -1, nullptr).has_value());
  log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok()) << log.status();
  const CommittedEpoch* replaced =
      FindCommittedEpoch(*log, preempted_epoch, {"trainer_0"});
  ASSERT_NE(replaced, nullptr);
  EXPECT_FALSE(replaced->has_preemption());
  EXPECT_EQ(replaced->node_size(), 2);
}

TEST(PreemptionCommitLogTest, AfterTheLastEpochAResumeRunsOnlyDownloadAndExit) {
  TempDir reference_dir;
  const TestJob t = Caffe2WithLoopAndGroups();
  const std::optional<Outcome> reference =
      RunOnce(t, reference_dir.path(), -1, nullptr);
  ASSERT_TRUE(reference.has_value());
  // Find a boundary in the download group: the first whose preemption is
  // recorded as "download".
  for (int64_t n = 0;; ++n) {
    ASSERT_LT(n, 2000);
    TempDir dir;
    Job job;
    t.build(job);
    LocalSession session;
    Checkpointer checkpointer({.directory = dir.path()});
    JobRunner runner(job, &checkpointer, {.preempt_signals = {}});
    runner.RequestPreemptionAtNetBoundary(n);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_FALSE(epochs.ok()) << "no boundary in download";
    if (runner.stats().preemption->stopped_at != StopPoint::kAfterLastEpoch) {
      continue;
    }
    EXPECT_THAT(epochs.status().message(),
                HasSubstr("after the last epoch, epoch 4 is marked"));
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
    ASSERT_TRUE(log.ok());
    EXPECT_EQ(log->epoch(log->epoch_size() - 1).preemption().group(),
              JOB_GROUP_DOWNLOAD);
    Job again;
    t.build(again);
    LocalSession resumed_session;
    Checkpointer resumed_checkpointer({.directory = dir.path()});
    JobRunner resumed(
        again, &resumed_checkpointer,
        {.resume_from = ResumeFrom::Latest(), .preempt_signals = {}});
    absl::StatusOr<int64_t> resumed_epochs = resumed.Train(resumed_session);
    ASSERT_TRUE(resumed_epochs.ok()) << resumed_epochs.status();
    // No epoch ran: only download and exit.
    EXPECT_TRUE(resumed.stats().epochs.empty());
    EXPECT_EQ(Collect(t, resumed_session, *resumed_epochs), *reference);
    break;
  }
}

// SIGTERM arriving inside a save (raised by a failpoint at each step of the
// save and commit, twice in one save too): the save completes and commits,
// the run stops right after it with the preemption status, and a resume
// ends exactly.
TEST(PreemptionSignalTest, ASignalDuringASaveStopsAfterIt) {
  TempDir reference_dir;
  const TestJob t = Caffe2WithLoopAndGroups();
  const std::optional<Outcome> reference =
      RunOnce(t, reference_dir.path(), -1, nullptr);
  ASSERT_TRUE(reference.has_value());
  for (const char* spec :
       {"save.after_db_write:sigterm", "commit.after_commit_log:sigterm",
        "save.after_rename:sigterm,commit.before_commit_log:sigterm"}) {
    SCOPED_TRACE(spec);
    TempDir dir;
    ASSERT_TRUE(Failpoints::EnableFromSpec(spec).ok());
    Job job;
    t.build(job);
    LocalSession session;
    Checkpointer checkpointer({.directory = dir.path()});
    JobRunner runner(job, &checkpointer, {.preempt_signals = {SIGTERM}});
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    Failpoints::DisableAll();
    ASSERT_TRUE(IsPreempted(epochs.status())) << epochs.status();
    // The first save is epoch 0's: the run stops right after it.
    EXPECT_THAT(epochs.status().message(),
                HasSubstr("preempted by SIGTERM after epoch 0: epoch 0 is "
                          "committed"));
    EXPECT_EQ(runner.stats().save_failures, 0);
    ASSERT_EQ(runner.stats().epochs.size(), 1u);
    EXPECT_TRUE(runner.stats().epochs[0].saved);
    std::optional<Outcome> resumed = RunOnce(t, dir.path(), -1, nullptr);
    ASSERT_TRUE(resumed.has_value());
    EXPECT_EQ(*resumed, *reference);
  }
}

// The ordinary save of a preempted epoch takes the preemption entry out of
// the commit log before it replaces the epoch's databases: if that save then
// fails (or the process dies), the log never lists a preemption checkpoint
// whose databases are no longer one.
TEST(PreemptionCommitLogTest, ResavingAPreemptedEpochForgetsItFirst) {
  TempDir reference_dir;
  const TestJob t = Caffe2WithLoopAndGroups();
  const std::optional<Outcome> reference =
      RunOnce(t, reference_dir.path(), -1, nullptr);
  ASSERT_TRUE(reference.has_value());
  TempDir dir;
  ASSERT_FALSE(RunOnce(t, dir.path(), 40, nullptr).has_value());
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  const int64_t preempted = log->epoch(log->epoch_size() - 1).epoch();
  ASSERT_TRUE(log->epoch(log->epoch_size() - 1).has_preemption());
  {
    // Every commit fails from now on: the resumed run goes on without.
    ASSERT_TRUE(
        Failpoints::EnableFromSpec("commit.before_commit_log:error").ok());
    Job job;
    t.build(job);
    LocalSession session;
    Checkpointer checkpointer({.directory = dir.path()});
    JobRunner runner(
        job, &checkpointer,
        {.resume_from = ResumeFrom::Latest(), .preempt_signals = {}});
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    Failpoints::DisableAll();
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    EXPECT_GT(runner.stats().save_failures, 0);
    EXPECT_EQ(Collect(t, session, *epochs), *reference);
  }
  log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(FindCommittedEpoch(*log, preempted, {"trainer_0"}), nullptr);
  EXPECT_EQ(log->epoch(log->epoch_size() - 1).epoch(), preempted - 1);
  std::optional<Outcome> resumed = RunOnce(t, dir.path(), -1, nullptr);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(*resumed, *reference);
}

// A group that also runs on a node whose state is not checkpointed cannot be
// continued from the middle: the stop saves nothing new, says why, and the
// newest committed epoch stays the place to resume from.
TEST(PreemptionCommitLogTest, AGroupOnAnUncheckpointedNodeIsNotSavedMidway) {
  TempDir dir;
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  job.epoch_group()
      .NewTask(Node("helper"), {.name = "side"})
      .net()
      .Op("TestIncrement", {}, {BlobRef("n")});
  LocalSession session;
  Checkpointer checkpointer({.directory = dir.path()});
  JobRunner runner(job, &checkpointer, {.preempt_signals = {}});
  // Epoch 0's save is done by then; this lands inside epoch 1.
  runner.RequestPreemptionAtNetBoundary(12);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  ASSERT_TRUE(IsPreempted(epochs.status())) << epochs.status();
  EXPECT_THAT(epochs.status().message(),
              HasSubstr("node 'helper' runs tasks in the epoch group but is "
                        "not checkpointed"));
  EXPECT_FALSE(runner.stats().preemption->saved);
  // The refused preemption checkpoint is a failed save like any other.
  EXPECT_EQ(runner.stats().save_failures, 1);
  ASSERT_EQ(runner.stats().save_errors.size(), 1u);
  EXPECT_THAT(runner.stats().save_errors[0],
              HasSubstr("unable to write the preemption checkpoint of epoch 1: "
                        "node 'helper' runs tasks"));
  ASSERT_FALSE(runner.stats().saves.empty());
  EXPECT_EQ(runner.stats().saves.back().kind, SaveKind::kPreemption);
  EXPECT_EQ(runner.stats().saves.back().stats.status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<CommitLog> log = ReadCommitLog(dir.path());
  ASSERT_TRUE(log.ok());
  EXPECT_FALSE(log->epoch(log->epoch_size() - 1).has_preemption());
}

TEST(PreemptionWithoutCheckpointerTest, StopsAndSaysNothingWasSaved) {
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  LocalSession session;
  JobRunner runner(job, nullptr, {.preempt_signals = {}});
  runner.RequestPreemptionAtNetBoundary(5);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  ASSERT_TRUE(IsPreempted(epochs.status())) << epochs.status();
  EXPECT_THAT(epochs.status().message(), HasSubstr("nothing saved"));
  EXPECT_FALSE(runner.stats().preemption->saved);
}

}  // namespace
}  // namespace jobgraph

// Local tiers of a job on several hosts (tier/host_tiers.h), from outside:
// sum_pipeline under `mpirun`, each rank standing for a host of its own
// (JOBGRAPH_HOST_NAME, so that `--local_checkpoint_dir=.../local-%h` gives
// each its own tier). A host is lost by killing its rank with SIGKILL on a
// logged event (mpirun then ends the whole job) and wiping its local tier;
// the job is run again on the hosts that remain. The result must equal an
// uninterrupted run's every time, and what the resume read from each tier
// must be what the partner layout allows: nothing from the shared
// directory when one host was lost, the lost nodes' databases from it when
// both copies were.
//
// The real thing, with hosts as Linux namespaces, is
// tools/cluster/tier_cluster_test.sh.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/commit/commit_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kMpirun[] = "/usr/bin/mpirun";

std::string SumPipeline() { return RunfilesPath("examples/sum_pipeline"); }
std::string Ckpt() { return RunfilesPath("tools/ckpt"); }

// A script that runs its arguments as a rank standing for host word
// (rank + 1) of $JG_TEST_HOSTS.
std::string HostWrapper() {
  static const std::string* path = [] {
    auto* p = new std::string(NewTempDir("host_wrapper") + "/as_host.sh");
    std::ofstream out(*p);
    out << "#!/bin/sh\n"
           "i=0\n"
           "for h in $JG_TEST_HOSTS; do\n"
           "  [ \"$i\" = \"$OMPI_COMM_WORLD_RANK\" ] && "
           "export JOBGRAPH_HOST_NAME=$h\n"
           "  i=$((i+1))\n"
           "done\n"
           // A failpoint on one host only, or on every one ("*").
           "[ -n \"$JG_TEST_FAILPOINT\" ] && "
           "{ [ \"$JG_TEST_FAILPOINT_HOST\" = \"*\" ] || "
           "[ \"$JOBGRAPH_HOST_NAME\" = \"$JG_TEST_FAILPOINT_HOST\" ]; } && "
           "export JOBGRAPH_FAILPOINT=$JG_TEST_FAILPOINT\n"
           "exec \"$@\"\n";
    out.close();
    ::chmod(p->c_str(), 0755);
    return p;
  }();
  return *path;
}

struct Dirs {
  std::string root;
  std::string shared() const { return root + "/shared"; }
  std::string local(const std::string& host) const {
    return root + "/local-" + host;
  }
  std::string pattern() const { return root + "/local-%h"; }
  std::string metrics() const { return root + "/metrics.jsonl"; }
};

// A failpoint (checkpoint/util/failpoint.h) on the rank of one host ("*":
// of every host).
struct HostFailpoint {
  std::string host;
  std::string spec;  // "name:action"
};

// Every rank holds its save of epoch 4 (the 5th, after epoch 0's) until the
// job is killed: a job whose rank is killed on a line of an earlier epoch
// cannot end first, however long the kill takes to land.
const HostFailpoint kHoldTheLastSave = {"*", "save.after_snapshot:hold@5"};

// mpirun of sum_pipeline on `hosts` (one rank each) with local tiers.
std::pair<std::vector<std::string>, std::vector<std::string>> JobOn(
    const std::vector<std::string>& hosts, const Dirs& dirs,
    const std::vector<std::string>& extra,
    const HostFailpoint& failpoint = {}) {
  std::vector<std::string> args = {"--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   absl::StrCat(hosts.size()),
                                   "-x",
                                   "JG_TEST_HOSTS",
                                   "-x",
                                   "JG_TEST_FAILPOINT",
                                   "-x",
                                   "JG_TEST_FAILPOINT_HOST",
                                   HostWrapper(),
                                   SumPipeline(),
                                   "--nodes=4",
                                   "--checkpoint_dir=" + dirs.shared(),
                                   "--local_checkpoint_dir=" + dirs.pattern(),
                                   "--metrics_out=" + dirs.metrics()};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<std::string> env = OpenMpiTempEnv();
  env.push_back("JG_TEST_HOSTS=" + absl::StrJoin(hosts, " "));
  env.push_back("JG_TEST_FAILPOINT=" + failpoint.spec);
  env.push_back("JG_TEST_FAILPOINT_HOST=" + failpoint.host);
  env.push_back("ASAN_OPTIONS=fast_unwind_on_malloc=0");
  env.push_back("LSAN_OPTIONS=use_tls=0");
  return {args, env};
}

ChildRun RunOn(const std::vector<std::string>& hosts, const Dirs& dirs,
               const std::vector<std::string>& extra,
               const HostFailpoint& failpoint = {}) {
  auto [args, env] = JobOn(hosts, dirs, extra, failpoint);
  return RunBinary(kMpirun, args, env);
}

// Runs the job on `hosts` (four by default) and kills host `lost`'s rank
// once rank 0 logs the end of epoch 3 (mpirun then ends the job).
ChildRun RunFourHostsAndLoseOne(const Dirs& dirs, int lost,
                                const std::vector<std::string>& extra,
                                const std::vector<std::string>& hosts = {
                                    "h0", "h1", "h2", "h3"}) {
  auto [args, env] = JobOn(hosts, dirs, extra, kHoldTheLastSave);
  return RunBinaryWithHookAt(
      kMpirun, args, env, "epoch 3: ", 1, [&](pid_t mpirun) {
        ASSERT_TRUE(KillRank(mpirun, lost, SIGKILL)) << "rank " << lost;
      });
}

// The result of an uninterrupted run (one process) resumed from `epoch`:
// the 4 epochs of the job, or, from the last, one more that reads nothing.
std::string ExpectedResult(int64_t resumed_from) {
  return absl::StrCat("result: epochs=", resumed_from >= 4 ? 5 : 4,
                      " totals=145,145,145,145");
}

// "resumed_from" of a metrics line, or -1.
int64_t ResumedFrom(const std::string& json) {
  const std::string key = "\"resumed_from\":";
  const size_t at = json.find(key);
  if (at == std::string::npos) return -1;
  const size_t start = at + key.size();
  const size_t end = json.find_first_of(",}", start);
  int64_t value = -1;
  if (!absl::SimpleAtoi(json.substr(start, end - start), &value)) return -1;
  return value;
}

// The last line of the metrics file.
std::string LastMetrics(const Dirs& dirs) {
  std::ifstream in(dirs.metrics());
  std::string line;
  std::string last;
  while (std::getline(in, line)) last = line;
  return last;
}

// `"key":<integer>` of the object `"resumed_file_bytes":{...}` in `json`.
int64_t ResumedBytes(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"resumed_file_bytes\":{");
  if (at == std::string::npos) return -1;
  const size_t k = json.find("\"" + key + "\":", at);
  if (k == std::string::npos) return -1;
  int64_t value = -1;
  const size_t start = k + key.size() + 3;
  const size_t end = json.find_first_of(",}", start);
  if (!absl::SimpleAtoi(json.substr(start, end - start), &value)) return -1;
  return value;
}

void ExpectSharedDirectoryVerifies(const Dirs& dirs) {
  ChildRun verify = RunBinary(Ckpt(), {"verify", dirs.shared()});
  EXPECT_TRUE(verify.exited_ok()) << verify.Describe();
}

// `saves`: --async_checkpoint=false or --async_checkpoint.
void LoseOneHostAndRecoverFromItsPartner(const std::string& saves) {
  Dirs dirs{NewTempDir("lost_one")};
  // Flushed at the run's first commit only: later epochs live in the
  // hosts' local tiers and their partners'.
  ChildRun first =
      RunFourHostsAndLoseOne(dirs, /*lost=*/1, {"--shared_every=100", saves});
  ASSERT_FALSE(first.exited_ok()) << first.Describe();
  // A background save copies to the partner in its own thread, over a side
  // channel, while the job goes on.
  const bool background = saves == "--async_checkpoint";
  auto says = [&](const std::string& text) {
    return first.log.find(text) != std::string::npos;
  };
  EXPECT_EQ(says("partner copies run in the background, as each save's "
                 "write ends, over a channel of their own"),
            background)
      << first.log;
  EXPECT_EQ(says("written in the background"), background) << first.log;
  EXPECT_FALSE(says("checkpoints are saved synchronously")) << first.log;
  ExpectSharedDirectoryVerifies(dirs);
  std::filesystem::remove_all(dirs.local("h1"));

  // The survivors, in another order: nodes land on other hosts than their
  // databases, which come over MPI from whichever host holds them.
  ChildRun second =
      RunOn({"h3", "h0", "h2"}, dirs,
            {"--shared_every=100", "--resume_from_epoch=latest", saves});
  ASSERT_TRUE(second.exited_ok()) << second.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(second.Result().value_or("(none)"),
            ExpectedResult(ResumedFrom(metrics)));
  EXPECT_THAT(second.log, HasSubstr("'s local tier, over MPI"));
  EXPECT_EQ(ResumedBytes(metrics, "shared"), 0) << metrics;
  EXPECT_GT(ResumedBytes(metrics, "partner"), 0) << metrics;
  EXPECT_GT(ResumedBytes(metrics, "local"), 0) << metrics;
  EXPECT_THAT(metrics, HasSubstr("\"resumed_tier\":\"local\""));
  ExpectSharedDirectoryVerifies(dirs);
}

TEST(MpiTierTest, ALostHostIsRecoveredFromItsPartnerWithoutTheSharedDirectory) {
  LoseOneHostAndRecoverFromItsPartner("--async_checkpoint=false");
}

TEST(MpiTierTest, ALostHostIsRecoveredFromItsPartnerWithBackgroundSaves) {
  LoseOneHostAndRecoverFromItsPartner("--async_checkpoint");
}

TEST(MpiTierTest, TwoLostPartnersFallBackToTheSharedDirectory) {
  Dirs dirs{NewTempDir("lost_two")};
  ChildRun first =
      RunFourHostsAndLoseOne(dirs, /*lost=*/2, {"--shared_every=2"});
  ASSERT_FALSE(first.exited_ok()) << first.Describe();
  // Node trainer_1's databases were on h1 and its partner h2: both gone.
  std::filesystem::remove_all(dirs.local("h1"));
  std::filesystem::remove_all(dirs.local("h2"));
  ChildRun second = RunOn({"h0", "h3"}, dirs,
                          {"--shared_every=2", "--resume_from_epoch=latest"});
  ASSERT_TRUE(second.exited_ok()) << second.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(second.Result().value_or("(none)"),
            ExpectedResult(ResumedFrom(metrics)));
  EXPECT_GT(ResumedBytes(metrics, "shared"), 0) << metrics;
  EXPECT_THAT(second.log, HasSubstr("from the shared directory"));
  ExpectSharedDirectoryVerifies(dirs);
}

TEST(MpiTierTest, ADamagedLocalCopyIsSkippedForThePartnersCopy) {
  Dirs dirs{NewTempDir("damaged")};
  ChildRun first = RunOn({"h0", "h1"}, dirs, {"--shared_every=100"});
  ASSERT_TRUE(first.exited_ok()) << first.Describe();
  EXPECT_EQ(first.Result().value_or("(none)"), ExpectedResult(0));
  // Every table of trainer_0's newest database in h0's tier, damaged.
  const std::string db = dirs.local("h0") + "/trainer_0.4";
  int damaged = 0;
  for (const auto& entry : std::filesystem::directory_iterator(db)) {
    if (entry.path().extension() != ".ldb") continue;
    std::fstream file(entry.path(),
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(10);
    file.put('\x5a');
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  // The shared directory's copy of epoch 4 goes too: the partner's must
  // be the one read.
  std::filesystem::remove_all(dirs.shared());
  ChildRun second = RunOn({"h0", "h1"}, dirs,
                          {"--shared_every=100", "--resume_from_epoch=4"});
  ASSERT_TRUE(second.exited_ok()) << second.Describe();
  EXPECT_THAT(second.log,
              HasSubstr("node 'trainer_0' of epoch 4: the copy in the local "
                        "tier of host h0 cannot be used, trying the next"));
  EXPECT_THAT(second.log, HasSubstr("node 'trainer_0' of epoch 4: "));
  EXPECT_THAT(second.log, HasSubstr("from host h1's local tier, over MPI"));
  EXPECT_EQ(second.Result().value_or("(none)"), ExpectedResult(4));
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(ResumedBytes(metrics, "shared"), 0) << metrics;
}

TEST(MpiTierTest,
     PreemptedRunExitsOnlyOnceTheSharedDirectoryHasItThenRequeued) {
  // With background saves, the one in flight is committed and flushed
  // before the mid-epoch state is.
  for (const std::string saves :
       {"--async_checkpoint=false", "--async_checkpoint"}) {
    SCOPED_TRACE(saves);
    Dirs dirs{NewTempDir("preempted")};
    // mpirun forwards SIGUSR1 to every rank: the mid-epoch state is committed
    // on the hosts, flushed to the shared directory, and only then does every
    // rank exit 75.
    auto [args, env] =
        JobOn({"h0", "h1", "h2"}, dirs,
              {"--shared_every=100", "--record_delay_ms=20", saves});
    ChildRun run =
        RunBinarySignalledAt(kMpirun, args, "record done", 5, SIGUSR1, env);
    EXPECT_EQ(run.exit_code(), 75) << run.Describe();
    absl::StatusOr<CommitLog> log = ReadCommitLog(dirs.shared());
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_GT(log->epoch_size(), 0);
    const CommittedEpoch& newest = log->epoch(log->epoch_size() - 1);
    EXPECT_TRUE(newest.has_preemption()) << CommittedEpochList(*log);
    EXPECT_EQ(newest.held_node_size(), 0);
    ExpectSharedDirectoryVerifies(dirs);
    // Requeued on other hosts, whose tiers are empty: the shared directory.
    ChildRun requeued =
        RunOn({"g0", "g1"}, dirs,
              {"--shared_every=100", "--resume_from_epoch=latest", saves});
    ASSERT_TRUE(requeued.exited_ok()) << requeued.Describe();
    EXPECT_EQ(requeued.Result().value_or("(none)"), ExpectedResult(0));
    const std::string metrics = LastMetrics(dirs);
    EXPECT_EQ(ResumedFrom(metrics), newest.epoch()) << metrics;
    EXPECT_EQ(ResumedBytes(metrics, "local"), 0) << metrics;
    EXPECT_EQ(ResumedBytes(metrics, "partner"), 0) << metrics;
    EXPECT_GT(ResumedBytes(metrics, "shared"), 0) << metrics;
  }
}

// Found by review: a run that resumed from further back without one host,
// and died before its first flush, left the shared directory as it was;
// that host still holds the epochs of the history the run abandoned, and
// they must not follow the run's newer commit.
TEST(MpiTierTest, AnAbandonedHistoryOnAnAbsentHostIsNotResumed) {
  Dirs dirs{NewTempDir("abandoned")};
  // Run A on h0, h1: killed after epoch 3; the shared directory has 0.
  // The tiers keep 3 epochs, so that epoch 1 is there to go back to.
  const std::vector<std::string> tiers = {"--shared_every=100",
                                          "--keep_local=3"};
  ChildRun a = RunFourHostsAndLoseOne(dirs, /*lost=*/1, tiers, {"h0", "h1"});
  ASSERT_FALSE(a.exited_ok()) << a.Describe();
  // Run B on h0, h2 goes back to epoch 1, commits epoch 2 on its hosts and
  // dies in that commit's flush, before the shared log lists it.
  std::vector<std::string> args = tiers;
  args.push_back("--resume_from_epoch=1");
  ChildRun b =
      RunOn({"h0", "h2"}, dirs, args, {"h0", "flush.before_commit:crash"});
  ASSERT_FALSE(b.exited_ok()) << b.Describe();
  ASSERT_THAT(b.log, HasSubstr("failpoint flush.before_commit: killing the "
                               "process with SIGKILL"));
  // C on all three: B's epoch 2 is the newest of the history; A's epoch 3
  // on h1 is older than it.
  args = tiers;
  args.push_back("--resume_from_epoch=latest");
  ChildRun c = RunOn({"h0", "h1", "h2"}, dirs, args);
  ASSERT_TRUE(c.exited_ok()) << c.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(ResumedFrom(metrics), 2) << metrics;
  EXPECT_EQ(c.Result().value_or("(none)"), ExpectedResult(2));
  EXPECT_THAT(c.log, HasSubstr("of host h1's local tier: not the history"));
}

// Found by review: a run on some of the hosts must not take out of their
// logs the epochs it cannot assemble without the others.
TEST(MpiTierTest, EpochsIncompleteWithoutAbsentHostsAreKept) {
  Dirs dirs{NewTempDir("incomplete")};
  ChildRun a = RunFourHostsAndLoseOne(dirs, /*lost=*/3, {"--shared_every=100"});
  ASSERT_FALSE(a.exited_ok()) << a.Describe();
  // Epoch 3 without h2 and h3: trainer_2's databases are on those only.
  ChildRun explicit_epoch = RunOn(
      {"h0", "h1"}, dirs, {"--shared_every=100", "--resume_from_epoch=3"});
  EXPECT_FALSE(explicit_epoch.exited_ok());
  EXPECT_THAT(explicit_epoch.log,
              HasSubstr("cannot resume from epoch 3: it is committed in the "
                        "local tiers"));
  EXPECT_THAT(explicit_epoch.log,
              HasSubstr("holds the database of node(s) 'trainer_2'"));
  // `latest` on h0, h1 goes back to the shared epoch 0, and dies before
  // it commits anything.
  ChildRun b = RunOn({"h0", "h1"}, dirs,
                     {"--shared_every=100", "--resume_from_epoch=latest"},
                     {"h0", "save.after_snapshot:crash"});
  ASSERT_FALSE(b.exited_ok()) << b.Describe();
  ASSERT_THAT(b.log, HasSubstr("failpoint save.after_snapshot: killing"));
  EXPECT_THAT(b.log, HasSubstr("epoch 3 cannot be assembled"));
  // With every host back, epoch 3 is there.
  ChildRun c = RunOn({"h0", "h1", "h2", "h3"}, dirs,
                     {"--shared_every=100", "--resume_from_epoch=latest"});
  ASSERT_TRUE(c.exited_ok()) << c.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_GE(ResumedFrom(metrics), 3) << metrics;
  EXPECT_EQ(c.Result().value_or("(none)"),
            ExpectedResult(ResumedFrom(metrics)));
  EXPECT_EQ(ResumedBytes(metrics, "shared"), 0) << metrics;
}

TEST(MpiTierTest, EveryEpochIsFlushedInTheBackgroundAndCommittedInOrder) {
  for (const std::string saves :
       {"--async_checkpoint=false", "--async_checkpoint"}) {
    SCOPED_TRACE(saves);
    Dirs dirs{NewTempDir("background")};
    ChildRun run = RunOn({"h0", "h1", "h2"}, dirs, {"--shared_every=1", saves});
    ASSERT_TRUE(run.exited_ok()) << run.Describe();
    EXPECT_EQ(run.Result().value_or("(none)"), ExpectedResult(0));
    // The first commit is flushed before its save returns; the others are
    // copied in the background and committed at a later save, the last at
    // the end of the run.
    EXPECT_THAT(run.log, HasSubstr("epoch 4 flushed to " + dirs.shared() +
                                   " (copied in the background)"));
    absl::StatusOr<CommitLog> log = ReadCommitLog(dirs.shared());
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<int64_t> epochs;
    for (const CommittedEpoch& e : log->epoch()) epochs.push_back(e.epoch());
    ASSERT_GE(epochs.size(), 2u) << CommittedEpochList(*log);
    EXPECT_EQ(epochs.front(), 0);
    EXPECT_EQ(epochs.back(), 4);
    EXPECT_TRUE(std::is_sorted(epochs.begin(), epochs.end()));
    ExpectSharedDirectoryVerifies(dirs);
  }
}

TEST(MpiTierTest, AHostLostDuringABackgroundFlushLeavesTheSharedLogComplete) {
  Dirs dirs{NewTempDir("lost_in_flush")};
  // h1's rank dies in its copier, after its second copy to the shared
  // directory (the first is the synchronous flush of epoch 0).
  ChildRun run = RunOn({"h0", "h1", "h2"}, dirs, {"--shared_every=1"},
                       {"h1", "flush.after_copy:crash@3"});
  ASSERT_FALSE(run.exited_ok()) << run.Describe();
  ExpectSharedDirectoryVerifies(dirs);
  std::filesystem::remove_all(dirs.local("h1"));
  ChildRun again = RunOn({"h0", "h2"}, dirs,
                         {"--shared_every=1", "--resume_from_epoch=latest"});
  ASSERT_TRUE(again.exited_ok()) << again.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(again.Result().value_or("(none)"),
            ExpectedResult(ResumedFrom(metrics)));
  ExpectSharedDirectoryVerifies(dirs);
}

TEST(MpiTierTest, AFailedBackgroundCopyMakesTheNextCommitsFlushNow) {
  Dirs dirs{NewTempDir("copy_fails")};
  // Every copy to the shared directory on h1 fails but the first (epoch
  // 0's, flushed before its save returns).
  ChildRun run = RunOn({"h0", "h1", "h2"}, dirs, {"--shared_every=1"},
                       {"h1", "flush.after_copy:error@2"});
  EXPECT_THAT(run.log, HasSubstr("cannot be copied to " + dirs.shared() +
                                 " in the background"));
  // After the failure the ranks learn of, a commit's flush runs before its
  // save returns (and fails there too), not in the background.
  bool flushed_now = false;
  for (absl::string_view line : absl::StrSplit(run.log, '\n')) {
    if (absl::StrContains(line, "is committed in the hosts' local tiers") &&
        absl::StrContains(line, "but cannot be flushed to") &&
        !absl::StrContains(line, "the tiers keep it") &&
        !absl::StrContains(line, "epoch 4 ")) {
      flushed_now = true;
    }
  }
  EXPECT_TRUE(flushed_now) << run.log;
  // The shared log still lists only what is complete there.
  ExpectSharedDirectoryVerifies(dirs);
  // The hosts' tiers kept the newest commit: the job resumes from it on
  // the same hosts, nothing read from the shared directory.
  ChildRun again = RunOn({"h0", "h1", "h2"}, dirs,
                         {"--shared_every=1", "--resume_from_epoch=latest"});
  ASSERT_TRUE(again.exited_ok()) << again.Describe();
  const std::string metrics = LastMetrics(dirs);
  EXPECT_EQ(ResumedFrom(metrics), 4) << metrics;
  EXPECT_EQ(ResumedBytes(metrics, "shared"), 0) << metrics;
  EXPECT_EQ(again.Result().value_or("(none)"), ExpectedResult(4));
}

// kill -9 of a random host's rank at a random logged event, its tier
// wiped, the job run again on the other three: exact every time, and with
// nothing flushed but the first commit, nothing read from the shared
// directory.
TEST(MpiTierTest, SigkillOfARandomHostAtRandomEventsThenResumeOnTheRest) {
  std::mt19937 random(TestSeed(
      20261128, "SigkillOfARandomHostAtRandomEventsThenResumeOnTheRest"));
  const std::vector<std::string> hosts = {"h0", "h1", "h2", "h3"};
  for (int trial = 0; trial < 6; ++trial) {
    Dirs dirs{NewTempDir(absl::StrCat("random", trial))};
    const int victim = static_cast<int>(random() % hosts.size());
    // Of rank 0's 10 record lines, one before the last epoch's.
    const int at_line = 1 + static_cast<int>(random() % 9);
    const std::string every = trial % 3 == 0   ? "100"
                              : trial % 3 == 1 ? "2"
                                               : "1";
    // Every other trial saves in the background: a kill may then land
    // between a save's write and its commit at the next boundary.
    const std::string saves =
        trial % 2 == 1 ? "--async_checkpoint" : "--async_checkpoint=false";
    const std::vector<std::string> tiers = {"--shared_every=" + every,
                                            "--record_delay_ms=10", saves};
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": host ", hosts[victim],
                              " killed at rank 0's record line ", at_line,
                              ", --shared_every=", every, " ", saves));
    auto [args, env] = JobOn(hosts, dirs, tiers, kHoldTheLastSave);
    ChildRun first = RunBinaryWithHookAt(
        kMpirun, args, env, "record done", at_line, [&](pid_t mpirun) {
          ASSERT_TRUE(KillRank(mpirun, victim, SIGKILL)) << "rank " << victim;
        });
    ASSERT_FALSE(first.exited_ok()) << first.Describe();
    ExpectSharedDirectoryVerifies(dirs);
    std::filesystem::remove_all(dirs.local(hosts[victim]));
    std::vector<std::string> rest;
    for (int h = 1; h < 4; ++h) rest.push_back(hosts[(victim + h) % 4]);
    std::vector<std::string> again_args = tiers;
    again_args.push_back("--resume_from_epoch=latest");
    ChildRun again = RunOn(rest, dirs, again_args);
    ASSERT_TRUE(again.exited_ok()) << again.Describe();
    const std::string metrics = LastMetrics(dirs);
    const int64_t resumed = ResumedFrom(metrics);
    EXPECT_EQ(again.Result().value_or("(none)"),
              ExpectedResult(std::max<int64_t>(resumed, 0)))
        << metrics;
    if (every == "100" && resumed >= 0) {
      EXPECT_EQ(ResumedBytes(metrics, "shared"), 0) << metrics;
    }
    ExpectSharedDirectoryVerifies(dirs);
  }
}

}  // namespace
}  // namespace testing
}  // namespace jobgraph

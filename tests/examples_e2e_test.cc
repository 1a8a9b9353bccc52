// End-to-end tests of the built binaries a user runs: the example pipelines
// (results, resumes, SIGKILL at random moments) and `ckpt verify`'s exit
// codes on clean and damaged checkpoints.

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/util/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace {

using ::jobgraph::testing::ChildRun;
using ::jobgraph::testing::NewTempDir;
using ::jobgraph::testing::RunBinary;
using ::jobgraph::testing::RunBinaryKilledAt;
using ::jobgraph::testing::RunfilesPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ChildRun SumPipeline(const std::vector<std::string>& args) {
  return RunBinary(RunfilesPath("examples/sum_pipeline"), args);
}

ChildRun Ckpt(const std::vector<std::string>& args) {
  return RunBinary(RunfilesPath("tools/ckpt"), args);
}

std::string LastLine(const ChildRun& run) {
  return run.lines.empty() ? "" : run.lines.back();
}

TEST(SumPipeline, DefaultResult) {
  ChildRun run = SumPipeline({});
  ASSERT_TRUE(run.exited_ok()) << run.Describe();
  EXPECT_EQ(LastLine(run), "result: epochs=4 totals=145");
}

// Also with incremental saves, a full one every second epoch, synchronous
// and in the background: resuming from an epoch whose database refers to
// the one before it is as exact.
TEST(SumPipeline, ResumingFromEveryEpochGivesTheSameTotals) {
  for (const std::vector<std::string>& saves :
       std::vector<std::vector<std::string>>{
           {"--incremental_checkpoint=false"},
           {"--incremental_checkpoint=true"},
           {"--incremental_checkpoint=true", "--async_checkpoint"}}) {
    SCOPED_TRACE(absl::StrJoin(saves, " "));
    const std::string dir = NewTempDir("sum_resume");
    std::vector<std::string> args = {"--checkpoint_dir=" + dir,
                                     "--full_every=2"};
    args.insert(args.end(), saves.begin(), saves.end());
    ChildRun full = SumPipeline(args);
    ASSERT_TRUE(full.exited_ok()) << full.Describe();
    EXPECT_EQ(LastLine(full), "result: epochs=4 totals=145");
    for (int epoch = 0; epoch <= 4; ++epoch) {
      std::vector<std::string> resume = args;
      resume.push_back(absl::StrCat("--resume_from_epoch=", epoch));
      ChildRun resumed = SumPipeline(resume);
      ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
      // Resuming from the last epoch runs one more (empty) epoch, as in
      // Caffe2.
      EXPECT_EQ(
          LastLine(resumed),
          absl::StrCat("result: epochs=", epoch == 4 ? 5 : 4, " totals=145"))
          << "resumed from " << epoch;
      EXPECT_THAT(resumed.log,
                  HasSubstr(absl::StrCat("resumed from epoch ", epoch)));
    }
  }
}

TEST(SumPipeline, ThreeNodes) {
  const std::string dir = NewTempDir("sum_nodes");
  ChildRun run = SumPipeline({"--nodes=3", "--checkpoint_dir=" + dir});
  ASSERT_TRUE(run.exited_ok()) << run.Describe();
  EXPECT_EQ(LastLine(run), "result: epochs=4 totals=145,145,145");
  ChildRun resumed = SumPipeline(
      {"--nodes=3", "--checkpoint_dir=" + dir, "--resume_from_epoch=2"});
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_EQ(LastLine(resumed), "result: epochs=4 totals=145,145,145");
}

// Killed at a random epoch's log line (several trials, fixed seed): the line
// is logged once the epoch is committed, and the kill lands wherever the run
// has got to by then (sleeping, or saving the next epoch). Then resumed from
// the newest committed epoch: always the uninterrupted result, and the
// checkpoint directory always verifies. No step depends on timing.
TEST(SumPipeline, SigkillAtRandomEpochsThenResumeLatest) {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> epoch(0, 3);
  for (int trial = 0; trial < 5; ++trial) {
    const std::string dir = NewTempDir("sum_kill");
    const std::vector<std::string> args = {
        "--nodes=2", "--checkpoint_dir=" + dir, "--epoch_delay_ms=60"};
    const int kill_at = epoch(rng);
    const std::string line = kill_at == 0
                                 ? "epoch 0 (init): "
                                 : absl::StrCat("epoch ", kill_at, ": ");
    SCOPED_TRACE(absl::StrCat("trial ", trial, ", killed at '", line, "'"));
    ChildRun killed =
        RunBinaryKilledAt(RunfilesPath("examples/sum_pipeline"), args, line);
    ASSERT_TRUE(killed.killed()) << killed.Describe();
    ASSERT_TRUE(PathExists(JoinPath(dir, "MANIFEST.jobgraph")).value());
    ChildRun verify = Ckpt({"verify", dir});
    EXPECT_EQ(verify.exit_code(), 0) << verify.Describe();
    std::vector<std::string> resume_args = args;
    resume_args.push_back("--resume_from_epoch=latest");
    ChildRun resumed = SumPipeline(resume_args);
    ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
    // The run resumes from the epoch it was killed at or a later one that
    // was committed before the kill landed; it never starts over.
    EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch"));
    EXPECT_THAT(LastLine(resumed),
                ::testing::MatchesRegex("result: epochs=[45] totals=145,145"));
  }
}

// --metrics_out appends one JSON line per epoch; a resumed run continues the
// same file. Times vary from run to run; everything else is exact.
TEST(SumPipeline, MetricsOutWritesOneJsonLinePerEpoch) {
  const std::string dir = NewTempDir("sum_metrics");
  const std::string metrics = JoinPath(dir, "metrics.jsonl");
  ChildRun full = SumPipeline({"--checkpoint_dir=" + JoinPath(dir, "ckpt"),
                               "--metrics_out=" + metrics});
  ASSERT_TRUE(full.exited_ok()) << full.Describe();
  ChildRun resumed =
      SumPipeline({"--checkpoint_dir=" + JoinPath(dir, "ckpt"),
                   "--metrics_out=" + metrics, "--resume_from_epoch=2"});
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  const std::vector<std::string> lines = absl::StrSplit(
      ReadFileToString(metrics).value(), '\n', absl::SkipEmpty());
  const std::vector<std::string> expected = {
      R"({"epoch":0,"run_micros":0,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":null})",
      R"({"epoch":1,"run_micros":T,"records":3,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":null})",
      R"({"epoch":2,"run_micros":T,"records":3,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":null})",
      R"({"epoch":3,"run_micros":T,"records":3,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":null})",
      R"({"epoch":4,"run_micros":T,"records":1,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":null})",
      R"({"epoch":3,"run_micros":T,"records":3,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":2,"resumed_tier":"shared","resumed_bytes":291})",
      R"({"epoch":4,"run_micros":T,"records":1,"saved":true,"save_micros":T,"save_bytes":291,"save_referenced_bytes":0,"resumed_from":2,"resumed_tier":"shared","resumed_bytes":291})",
  };
  ASSERT_EQ(lines.size(), expected.size()) << ReadFileToString(metrics).value();
  for (size_t i = 0; i < lines.size(); ++i) {
    // Every time is a positive number of microseconds.
    const std::string timeless = std::regex_replace(
        lines[i], std::regex(R"(_micros":[1-9][0-9]*)"), "_micros\":T");
    EXPECT_EQ(timeless, expected[i]) << lines[i];
  }
}

// A second run started into the directory of a running one (a requeue racing
// the job it replaces) refuses at once and names the running one.
TEST(SumPipeline, ASecondRunIntoTheSameDirectoryIsRefused) {
  const std::string dir = NewTempDir("sum_twice");
  ChildRun second;
  ChildRun first = RunBinaryKilledAt(
      RunfilesPath("examples/sum_pipeline"),
      {"--checkpoint_dir=" + dir, "--epoch_delay_ms=100000"}, "epoch 0 (init)",
      [&] { second = SumPipeline({"--checkpoint_dir=" + dir}); });
  EXPECT_TRUE(first.killed()) << first.Describe();
  EXPECT_EQ(second.exit_code(), 1) << second.Describe();
  EXPECT_THAT(second.log,
              HasSubstr(absl::StrCat("node 'trainer_0' of checkpoint "
                                     "directory ",
                                     dir, " is in use by another run (host ")));
  EXPECT_EQ(second.Result(), std::nullopt);
  // The refused run changed nothing: only epoch 0 of the first is there,
  // with the lock file the killed run left behind.
  EXPECT_THAT(
      ListDir(dir).value(),
      ::testing::ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                             "trainer_0.0", "trainer_0.lock"));
  // With the first run gone, the job resumes.
  ChildRun resumed =
      SumPipeline({"--checkpoint_dir=" + dir, "--resume_from_epoch=latest"});
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_EQ(LastLine(resumed), "result: epochs=4 totals=145");
}

TEST(SumPipeline, BadFlagsFailWithAClearMessage) {
  ChildRun nodes = SumPipeline({"--nodes=0"});
  EXPECT_EQ(nodes.exit_code(), 2) << nodes.Describe();
  EXPECT_THAT(nodes.log, HasSubstr("--nodes"));
  ChildRun resume = SumPipeline({"--resume_from_epoch=2"});
  EXPECT_EQ(resume.exit_code(), 2) << resume.Describe();
  EXPECT_THAT(resume.log, HasSubstr("--checkpoint_dir"));
  const std::string dir = NewTempDir("sum_badresume");
  ChildRun word =
      SumPipeline({"--checkpoint_dir=" + dir, "--resume_from_epoch=soon"});
  // Rejected by Abseil's flag parsing (a ResumeFrom flag), whose status is 1.
  EXPECT_EQ(word.exit_code(), 1) << word.Describe();
  EXPECT_THAT(word.log, HasSubstr("soon"));
  ChildRun pool = SumPipeline({"--memory_pool_mib=-1"});
  EXPECT_EQ(pool.exit_code(), 2) << pool.Describe();
  EXPECT_THAT(pool.log,
              HasSubstr("--memory_pool_mib must be between 0 and 1048576 (0 "
                        "turns the pool off), got -1"));
}

// --resume_from_epoch is a ResumeFrom flag: Abseil's flag parsing rejects a
// bad value, naming the flag and the accepted forms, with its status, 1, as
// it does an unknown flag.
TEST(SumPipeline, FlagParsingRejectsABadResumeValueAndUnknownFlags) {
  const std::string dir = NewTempDir("sum_flagparse");
  ChildRun word =
      SumPipeline({"--checkpoint_dir=" + dir, "--resume_from_epoch=soon"});
  EXPECT_EQ(word.exit_code(), 1) << word.Describe();
  EXPECT_THAT(word.log, HasSubstr("'soon' specified for flag "
                                  "'resume_from_epoch'"));
  EXPECT_THAT(word.log, HasSubstr("give a non-negative epoch number or "
                                  "'latest'"));
  EXPECT_TRUE(ListDir(dir).value().empty()) << "nothing was run";
  ChildRun unknown = SumPipeline({"--no_such_flag=1"});
  EXPECT_EQ(unknown.exit_code(), 1) << unknown.Describe();
  EXPECT_THAT(unknown.log, HasSubstr("no_such_flag"));
}

// The synopsis --help prints names every common flag.
TEST(SumPipeline, HelpListsEveryCommonFlag) {
  ChildRun help = SumPipeline({"--help"});
  const std::string out = absl::StrJoin(help.lines, "\n");
  for (const char* flag :
       {"[--checkpoint_dir=DIR]", "[--resume_from_epoch=E|latest]",
        "[--keep_last=N]", "[--metrics_out=FILE]", "[--async_checkpoint]",
        "[--dump_plan]", "[--plan_dot=FILE]", "[--epoch_delay_ms=MS]",
        "[--record_delay_ms=MS]", "[--preempt_signals=TERM,USR1,INT]",
        "[--preempt_exit_code=75]", "[--session=auto|local|mpi]", "[--nodes=N]",
        "[--num_records=N]", "[--records_per_epoch=N]", "[--initial_total=N]",
        "[--incremental_checkpoint]", "[--full_every=N]",
        "[--memory_pool_mib=MIB]"}) {
    EXPECT_THAT(out, HasSubstr(flag)) << help.Describe();
  }
}

TEST(SumPipeline, DumpPlanAndPlanDot) {
  ChildRun dump = SumPipeline({"--dump_plan"});
  ASSERT_TRUE(dump.exited_ok()) << dump.Describe();
  ASSERT_GE(dump.lines.size(), 2u);
  EXPECT_EQ(dump.lines[0], "init_group {");
  EXPECT_EQ(dump.lines[1], "  name: \"init\"");
  EXPECT_EQ(dump.Result(), std::nullopt);  // it printed the plan and stopped

  const std::string dir = NewTempDir("plan_dot");
  const std::string dot = dir + "/job.dot";
  ChildRun drawn = SumPipeline({"--plan_dot=" + dot});
  ASSERT_TRUE(drawn.exited_ok()) << drawn.Describe();
  const std::string graph = ReadFileToString(dot).value();
  EXPECT_TRUE(absl::StartsWith(graph, "digraph")) << graph.substr(0, 80);
  EXPECT_THAT(graph, HasSubstr("trainer_0/pipe"));
  EXPECT_EQ(LastLine(drawn), "result: epochs=4 totals=145");
}

// Flips one byte in the middle of the table file of the database `db`.
void DamageTable(const std::string& db) {
  std::string table;
  // A local: value() of a temporary StatusOr would dangle in a range-for.
  const std::vector<std::string> files = ListDir(db).value();
  for (const std::string& name : files) {
    if (absl::EndsWith(name, ".ldb")) table = JoinPath(db, name);
  }
  ASSERT_FALSE(table.empty()) << "no table file in " << db;
  std::string bytes = ReadFileToString(table).value();
  bytes[bytes.size() / 2] ^= 0x5a;
  ASSERT_TRUE(WriteFileAtomically(table, bytes).ok());
}

TEST(Ckpt, VerifyExitCodesOnCleanAndDamagedCheckpoints) {
  const std::string dir = NewTempDir("ckpt_verify");
  ASSERT_TRUE(SumPipeline({"--checkpoint_dir=" + dir}).exited_ok());
  ChildRun clean = Ckpt({"verify", dir});
  EXPECT_EQ(clean.exit_code(), 0) << clean.Describe();

  // Flip one byte in the middle of the newest database's table file.
  ASSERT_NO_FATAL_FAILURE(DamageTable(dir + "/trainer_0.4"));
  ChildRun damaged = Ckpt({"verify", dir});
  EXPECT_EQ(damaged.exit_code(), 1) << damaged.Describe();
  EXPECT_THAT(absl::StrJoin(damaged.lines, "\n"), HasSubstr("trainer_0.4"));

  // The job itself falls back to epoch 3 and still ends at 145.
  ChildRun resumed =
      SumPipeline({"--checkpoint_dir=" + dir, "--resume_from_epoch=latest"});
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 3"));
  EXPECT_EQ(LastLine(resumed), "result: epochs=4 totals=145");

  EXPECT_EQ(Ckpt({"verify"}).exit_code(), 2);
  EXPECT_EQ(Ckpt({"verify", dir + "/nowhere"}).exit_code(), 2);
}

// Incremental saves, a full one every third epoch: 0 full, 1 and 2 refer
// to 0, 3 full, 4 refers to 3. Damage in epoch 3's database makes 3 and 4
// unusable: verify names both (and only them), and `latest` takes 2,
// whose chain is intact, exactly.
TEST(Ckpt, DamageToAReferencedDatabaseIsDamageToEveryEpochReadingIt) {
  const std::string dir = NewTempDir("ckpt_referenced");
  const std::vector<std::string> args = {
      "--checkpoint_dir=" + dir, "--incremental_checkpoint", "--full_every=3"};
  ASSERT_TRUE(SumPipeline(args).exited_ok());
  ChildRun list = Ckpt({"list", dir});
  ASSERT_TRUE(list.exited_ok()) << list.Describe();
  ASSERT_EQ(list.lines.size(), 8u) << list.Describe();
  EXPECT_THAT(list.lines[3], HasSubstr("183 (epoch 0)"));  // epoch 1
  EXPECT_THAT(list.lines[5], ::testing::ContainsRegex("committed .* - "));
  EXPECT_THAT(list.lines[6], HasSubstr("183 (epoch 3)"));  // epoch 4

  const std::string db = dir + "/trainer_0.3";
  ASSERT_NO_FATAL_FAILURE(DamageTable(db));

  ChildRun verify = Ckpt({"verify", dir});
  EXPECT_EQ(verify.exit_code(), 1) << verify.Describe();
  std::vector<std::string> damaged;
  for (const std::string& line : verify.lines) {
    if (absl::StrContains(line, "DAMAGED")) {
      damaged.push_back(line.substr(0, line.find(':')));
      EXPECT_THAT(line, HasSubstr(db)) << line;
    }
  }
  EXPECT_THAT(damaged, ElementsAre("epoch 3 trainer_0", "epoch 4 trainer_0"));

  std::vector<std::string> resume = args;
  resume.push_back("--resume_from_epoch=latest");
  ChildRun resumed = SumPipeline(resume);
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_THAT(resumed.log, HasSubstr("skipping committed epoch 4"));
  EXPECT_THAT(resumed.log, HasSubstr("skipping committed epoch 3"));
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch 2"));
  EXPECT_EQ(LastLine(resumed), "result: epochs=4 totals=145");
  // The resumed run saved 3 and 4 again: everything verifies.
  verify = Ckpt({"verify", dir});
  EXPECT_EQ(verify.exit_code(), 0) << verify.Describe();
}

// Also with incremental saves: the training data is then written once and
// referred to, the parameters written every epoch.
TEST(LinearRegression, KilledAndResumedParametersAreBitIdentical) {
  const std::string binary = RunfilesPath("examples/linear_regression");
  const std::string full_dir = NewTempDir("lr_full");
  const std::vector<std::string> common = {"--epochs=8", "--epoch_delay_ms=40"};
  std::vector<std::string> full_args = common;
  full_args.push_back("--checkpoint_dir=" + full_dir);
  full_args.push_back("--model_out=" + full_dir + "/model");
  ChildRun full = RunBinary(binary, full_args);
  ASSERT_TRUE(full.exited_ok()) << full.Describe();
  const std::optional<std::string> bits = full.LineStartingWith("bits:");
  ASSERT_TRUE(bits.has_value()) << full.Describe();

  for (const char* saves :
       {"--incremental_checkpoint=false", "--incremental_checkpoint=true"}) {
    SCOPED_TRACE(saves);
    const std::string dir = NewTempDir("lr_killed");
    std::vector<std::string> args = common;
    args.push_back("--checkpoint_dir=" + dir);
    args.push_back("--model_out=" + dir + "/model");
    args.push_back(saves);
    // Killed once epoch 3 has been logged (after its checkpoint).
    ChildRun killed = RunBinaryKilledAt(binary, args, "] epoch 3:");
    ASSERT_TRUE(killed.killed()) << killed.Describe();
    args.push_back("--resume_from_epoch=latest");
    ChildRun resumed = RunBinary(binary, args);
    ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
    EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch"));
    EXPECT_EQ(resumed.LineStartingWith("bits:"), bits);
    EXPECT_EQ(resumed.Result(), full.Result());
  }
}

TEST(TextStats, KilledAndResumedOutputIsIdentical) {
  const std::string dir = NewTempDir("text");
  std::string text;
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
  for (int i = 0; i < 3000; ++i) {
    text += absl::StrCat(words[i % 5], " ", words[(i * 7) % 5], " line", i % 13,
                         "\n");
  }
  const std::string input = dir + "/input.txt";
  ASSERT_TRUE(WriteFileAtomically(input, text).ok());
  const std::string binary = RunfilesPath("examples/text_stats");
  ChildRun full =
      RunBinary(binary, {"--input=" + input, "--lines_per_epoch=200"});
  ASSERT_TRUE(full.exited_ok()) << full.Describe();
  EXPECT_EQ(full.Result(), "result: lines=3000 words=9000 distinct=18");
  // Any batch size that divides the epoch gives the same counts and words,
  // with any number of threads, also when the file ends inside a batch
  // (3005 lines: the last epoch reads 5, in a short batch).
  const std::string odd_input = dir + "/odd.txt";
  ASSERT_TRUE(
      WriteFileAtomically(odd_input, text + "x y\nx\nz\nY\ny Z x\n").ok());
  std::vector<std::string> odd_reference;
  for (const char* batch : {"1", "8", "200"}) {
    for (const std::string& file : {input, odd_input}) {
      ChildRun batched = RunBinary(
          binary, {"--input=" + file, "--lines_per_epoch=200",
                   absl::StrCat("--batch_size=", batch), "--threads=3"});
      ASSERT_TRUE(batched.exited_ok()) << batched.Describe();
      if (file == input) {
        EXPECT_EQ(batched.lines, full.lines) << "--batch_size=" << batch;
        continue;
      }
      EXPECT_EQ(batched.Result(), "result: lines=3005 words=9008 distinct=21");
      if (odd_reference.empty()) odd_reference = batched.lines;
      EXPECT_EQ(batched.lines, odd_reference) << "--batch_size=" << batch;
    }
  }
  ChildRun bad = RunBinary(
      binary, {"--input=" + input, "--lines_per_epoch=200", "--batch_size=7"});
  EXPECT_EQ(bad.exit_code(), 2) << bad.Describe();
  EXPECT_THAT(bad.log, HasSubstr("--batch_size=7 does not divide "
                                 "--lines_per_epoch=200"));

  const std::vector<std::string> args = {
      "--input=" + input, "--lines_per_epoch=200", "--threads=3",
      "--checkpoint_dir=" + dir + "/ckpt", "--epoch_delay_ms=30"};
  ChildRun killed = RunBinaryKilledAt(binary, args, "] epoch 4:");
  ASSERT_TRUE(killed.killed()) << killed.Describe();
  std::vector<std::string> resume = args;
  resume.push_back("--resume_from_epoch=latest");
  ChildRun resumed = RunBinary(binary, resume);
  ASSERT_TRUE(resumed.exited_ok()) << resumed.Describe();
  EXPECT_THAT(resumed.log, HasSubstr("resumed from epoch"));
  EXPECT_EQ(resumed.lines, full.lines);
}

}  // namespace
}  // namespace jobgraph

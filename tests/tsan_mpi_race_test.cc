// jobgraph's ThreadSanitizer suppressions for Open MPI
// (checkpoint/leveldb/leveldb_tsan_suppressions.cc) must not hide a race
// between jobgraph code and a buffer it handed to MPI. tsan_mpi_race_child
// makes exactly such a race, under mpirun as the MPI tests start ranks, and
// TSan must report it with both sides: the jobgraph thread's write, and Open
// MPI's copy of the buffer inside MpiSession::AllGather. Suppressions that
// match a frame anywhere in Open MPI's libraries hide this report, since
// Open MPI's side of it runs through them.
//
// Only a TSan build (--config=tsan) can show anything; other builds skip.

#include <stdlib.h>

#include <string>
#include <system_error>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace jobgraph {
namespace testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

#ifdef ABSL_HAVE_THREAD_SANITIZER
constexpr bool kTsanBuild = true;
#else
constexpr bool kTsanBuild = false;
#endif

constexpr char kMpirun[] = "/usr/bin/mpirun";
// ThreadSanitizer's exit status after a report (its default; the child runs
// with it set, whatever the test's own TSAN_OPTIONS say).
constexpr int kTsanExitCode = 66;

// The first data race report in `log`, from its WARNING line to its SUMMARY
// line; empty if there is none.
std::string FirstRaceReport(const std::string& log) {
  const size_t begin = log.find("WARNING: ThreadSanitizer: data race");
  if (begin == std::string::npos) return "";
  const size_t summary = log.find("SUMMARY: ThreadSanitizer", begin);
  if (summary == std::string::npos) return log.substr(begin);
  return log.substr(begin, log.find('\n', summary) - begin);
}

TEST(TsanMpiRaceTest, ARaceOnABufferHandedToMpiIsReported) {
  if (!kTsanBuild) {
    GTEST_SKIP() << "not a ThreadSanitizer build, so no race can be "
                    "reported: run this test with --config=tsan";
  }
  std::vector<std::string> env = ::jobgraph::testing::OpenMpiTempEnv();
  // In place of the test's own TSAN_OPTIONS: no suppressions but jobgraph's
  // defaults, and the report on stderr.
  env.push_back(absl::StrCat("TSAN_OPTIONS=exitcode=", kTsanExitCode));
  const ChildRun run =
      RunBinary(kMpirun,
                {"--allow-run-as-root", "--oversubscribe", "-np", "1",
                 RunfilesPath("tests/tsan_mpi_race_child")},
                env);

  // Both accesses happened, under the suppressions every jobgraph MPI
  // program carries.
  EXPECT_EQ(run.Result(), "result: gathered=4096 overwritten=true")
      << run.Describe();
  EXPECT_TRUE(run.LineStartingWith("suppression: ").has_value())
      << "the child carries no TSan suppressions, so it proves nothing about "
         "them\n"
      << run.Describe();

  const std::string report = FirstRaceReport(run.log);
  ASSERT_FALSE(report.empty()) << "no data race reported\n" << run.Describe();
  // The jobgraph thread's write...
  EXPECT_THAT(report, HasSubstr("jobgraph::(anonymous namespace)::"
                                "OverwritePayload"));
  // ... and Open MPI's read of the same bytes, called from jobgraph.
  EXPECT_THAT(report,
              ContainsRegex("\\((libmpi|libopen-pal|libopen-rte|mca_[a-z_]+)"
                            "\\.so"));
  EXPECT_THAT(report, HasSubstr("jobgraph::MpiSession::AllGather"));
  EXPECT_EQ(run.exit_code(), kTsanExitCode) << run.Describe();
}

}  // namespace
}  // namespace testing
}  // namespace jobgraph

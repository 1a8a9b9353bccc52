// The README's builder-API example, compiled and run, so the README's code
// stays true: the lines between "README begin" and "README end" are the ones
// the README shows.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "checkpoint/job_runner.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/session.h"
#include "gtest/gtest.h"

namespace {

TEST(ReadmeBuilderTest, SumPipelineEndsWithTotal145) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/readme_ckpt";
  std::filesystem::remove_all(dir);
  {
    // README begin
    jobgraph::Job job;
    jobgraph::Node node("trainer_0");
    jobgraph::Task& init = job.init_group().NewTask(node);  // GLOBAL
    jobgraph::Record data = jobgraph::ConstRecord(
        init.net(), {{"val", jobgraph::Tensor::Iota<int64_t>(10)}});
    jobgraph::Reader reader =
        jobgraph::Dataset(data, "dataset:0").NewReader(init.net());
    jobgraph::BlobRef total = init.net().Const<int64_t>("total", {100});

    jobgraph::ReaderWithLimit epoch_reader(reader, /*num_iter=*/3);
    jobgraph::Pipe(job.epoch_group(), node, epoch_reader,
                   [&](jobgraph::NetBuilder& net, const jobgraph::Record& row) {
                     net.Add(total, row.Field("val"), total);
                   });
    job.AddStopCondition(epoch_reader.data_finished());

    jobgraph::LocalSession session;
    jobgraph::CheckpointManager checkpoints({.directory = dir});  // "/tmp/ckpt"
    // Resumes from the newest committed epoch; from scratch if there is none.
    jobgraph::JobRunner runner(job, &checkpoints,
                               {.resume_from = jobgraph::ResumeFrom::Latest()});
    absl::StatusOr<int64_t> last_epoch = runner.Train(session);
    // README end
    ASSERT_TRUE(last_epoch.ok()) << last_epoch.status();
    EXPECT_EQ(*last_epoch, 4);
    absl::StatusOr<jobgraph::Tensor> sum =
        session.FetchBlob("trainer_0", "total");
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->scalar<int64_t>(), 145);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The README shows the block between the markers above, four spaces less
// indented; a README edited alone fails here.
TEST(ReadmeBuilderTest, ReadmeShowsThisTestsCode) {
  const std::string source = ReadFile("tests/readme_builder_test.cc");
  const std::string readme = ReadFile("README.md");
  ASSERT_FALSE(source.empty());
  ASSERT_FALSE(readme.empty());
  const std::string begin = "// README begin\n";
  const size_t start = source.find(begin);
  const size_t end = source.find("    // README end");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::string expected;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(source).substr(
                          start + begin.size(), end - start - begin.size()),
                      '\n')) {
    if (absl::ConsumePrefix(&line, "    ") || line.empty()) {
      expected.append(line.data(), line.size());
      expected.push_back('\n');
    } else {
      FAIL() << "line not indented by four spaces: " << line;
    }
  }
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_NE(readme.find(expected), std::string::npos)
      << "README.md's builder example differs from this test's code; copy "
         "this block into README.md:\n"
      << expected;
}

}  // namespace

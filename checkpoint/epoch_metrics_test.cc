#include "checkpoint/epoch_metrics.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

EpochStats Stats(int64_t epoch, std::optional<int64_t> resumed_from) {
  EpochStats stats;
  stats.epoch = epoch;
  stats.run_micros = 1200 + epoch;
  stats.saved = epoch != 2;
  stats.save_micros = stats.saved ? 400 : 0;
  stats.save_bytes = stats.saved ? 291 : 0;
  // Epoch 3's save was incremental.
  stats.save_referenced_bytes = epoch == 3 ? 183 : 0;
  stats.resumed_from = resumed_from;
  return stats;
}

TEST(EpochMetricsTest, JsonHasEveryFieldInAFixedOrder) {
  EXPECT_EQ(EpochMetricsJson(Stats(3, 1), 7),
            "{\"epoch\":3,\"run_micros\":1203,\"records\":7,\"saved\":true,"
            "\"save_micros\":400,\"save_bytes\":291,"
            "\"save_referenced_bytes\":183,\"resumed_from\":1}");
  EXPECT_EQ(EpochMetricsJson(Stats(2, std::nullopt), std::nullopt),
            "{\"epoch\":2,\"run_micros\":1202,\"saved\":false,"
            "\"save_micros\":0,\"save_bytes\":0,\"save_referenced_bytes\":0,"
            "\"resumed_from\":null}");
}

TEST(EpochMetricsTest, AResumedRunSaysWhereItReadAndHowMuch) {
  EpochStats stats = Stats(3, 2);
  stats.resumed_tier = "local";
  stats.resumed_bytes = 4096;
  EXPECT_EQ(EpochMetricsJson(stats, 3),
            "{\"epoch\":3,\"run_micros\":1203,\"records\":3,\"saved\":true,"
            "\"save_micros\":400,\"save_bytes\":291,"
            "\"save_referenced_bytes\":183,\"resumed_from\":2,"
            "\"resumed_tier\":\"local\",\"resumed_bytes\":4096}");
}

TEST(EpochMetricsTest, AppendsOneLinePerEpochAcrossRuns) {
  testing_util::TempDir dir;
  const std::string path = dir.Join("m.jsonl");
  {
    auto file = EpochMetricsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append(Stats(1, std::nullopt), 3).ok());
  }
  {
    // A resumed run appends to the same file.
    auto file = EpochMetricsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append(Stats(2, 1)).ok());
  }
  EXPECT_EQ(ReadFileToString(path).value(),
            "{\"epoch\":1,\"run_micros\":1201,\"records\":3,\"saved\":true,"
            "\"save_micros\":400,\"save_bytes\":291,\"save_referenced_bytes\":"
            "0,\"resumed_from\":null}\n"
            "{\"epoch\":2,\"run_micros\":1202,\"saved\":false,"
            "\"save_micros\":0,\"save_bytes\":0,\"save_referenced_bytes\":0,"
            "\"resumed_from\":1}\n");
}

TEST(EpochMetricsTest, UnopenablePathNamesIt) {
  const std::string path = "/nonexistent-dir-for-metrics/m.jsonl";
  auto file = EpochMetricsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file.status().message(),
            "cannot open metrics file /nonexistent-dir-for-metrics/m.jsonl: "
            "No such file or directory");
}

}  // namespace
}  // namespace jobgraph

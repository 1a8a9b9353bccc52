// EpochMetricsFile: one JSON object per line per epoch, for people who plot a
// run (or a run and its resumes) with a few lines of Python or jq:
//
//   {"epoch":3,"run_micros":12100,"records":3,"saved":true,
//    "save_micros":4000,"save_bytes":291,"save_referenced_bytes":183,
//    "resumed_from":2}
//
// "records" is present when the caller counts them; "resumed_from" is null
// for a run that started from scratch, and a resumed run's lines say where
// the resume read its databases and how many bytes
// ("resumed_tier":"local" for a local tier, "shared" for the checkpoint
// directory, "mixed" for both; "resumed_bytes"; with local tiers on
// several hosts also "resumed_file_bytes":{"local":N,"partner":N,
// "shared":N}, the database files' bytes read from the tier of the host
// that runs each node, fetched from another host's, and read from the
// shared directory); "save_referenced_bytes" is the part
// of "save_bytes" an incremental save referred to instead of writing. Lines
// are appended, so the runs of a job that is interrupted and resumed build
// one file; each line is written with a single write(2) and is complete once
// Append returns.
//
// Hook it into a run through JobRunnerOptions::on_epoch_end. Owns its file
// descriptor. Not thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_EPOCH_METRICS_H_
#define JOBGRAPH_CHECKPOINT_EPOCH_METRICS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/job_runner.h"

namespace jobgraph {

// The JSON object (without a newline) for one epoch.
std::string EpochMetricsJson(const EpochStats& stats,
                             std::optional<int64_t> records);

class EpochMetricsFile {
 public:
  // Opens `path` for appending, creating it if needed. Errors name the path.
  static absl::StatusOr<std::unique_ptr<EpochMetricsFile>> Open(
      const std::string& path);
  ~EpochMetricsFile();
  EpochMetricsFile(const EpochMetricsFile&) = delete;
  EpochMetricsFile& operator=(const EpochMetricsFile&) = delete;

  // Appends EpochMetricsJson(stats, records) and a newline.
  absl::Status Append(const EpochStats& stats,
                      std::optional<int64_t> records = std::nullopt);

  const std::string& path() const { return path_; }

 private:
  EpochMetricsFile(std::string path, int fd);

  const std::string path_;
  const int fd_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_EPOCH_METRICS_H_

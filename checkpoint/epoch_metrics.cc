#include "checkpoint/epoch_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jobgraph {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  const std::string message = absl::StrCat("cannot ", what, " metrics file ",
                                           path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(message);
  }
  if (err == ENOSPC) return absl::ResourceExhaustedError(message);
  return absl::UnavailableError(message);
}

}  // namespace

std::string EpochMetricsJson(const EpochStats& stats,
                             std::optional<int64_t> records) {
  std::string json = absl::StrCat("{\"epoch\":", stats.epoch,
                                  ",\"run_micros\":", stats.run_micros);
  if (records.has_value()) absl::StrAppend(&json, ",\"records\":", *records);
  absl::StrAppend(&json, ",\"saved\":", stats.saved ? "true" : "false",
                  ",\"save_micros\":", stats.save_micros,
                  ",\"save_bytes\":", stats.save_bytes,
                  ",\"save_referenced_bytes\":", stats.save_referenced_bytes,
                  ",\"resumed_from\":",
                  stats.resumed_from.has_value()
                      ? absl::StrCat(*stats.resumed_from)
                      : std::string("null"));
  if (stats.resumed_from.has_value() && !stats.resumed_tier.empty()) {
    absl::StrAppend(&json, ",\"resumed_tier\":\"", stats.resumed_tier,
                    "\",\"resumed_bytes\":", stats.resumed_bytes);
    if (stats.resumed_tier_bytes.has_value()) {
      const CheckpointStats::TierBytes& t = *stats.resumed_tier_bytes;
      absl::StrAppend(&json, ",\"resumed_file_bytes\":{\"local\":", t.local,
                      ",\"partner\":", t.partner, ",\"shared\":", t.shared,
                      "}");
    }
  }
  absl::StrAppend(&json, "}");
  return json;
}

absl::StatusOr<std::unique_ptr<EpochMetricsFile>> EpochMetricsFile::Open(
    const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", path);
  return std::unique_ptr<EpochMetricsFile>(new EpochMetricsFile(path, fd));
}

EpochMetricsFile::EpochMetricsFile(std::string path, int fd)
    : path_(std::move(path)), fd_(fd) {}

EpochMetricsFile::~EpochMetricsFile() { ::close(fd_); }

absl::Status EpochMetricsFile::Append(const EpochStats& stats,
                                      std::optional<int64_t> records) {
  const std::string line = EpochMetricsJson(stats, records) + "\n";
  // O_APPEND makes one write(2) land as one line even if another process
  // appends to the same file; a short write is reported, not retried, so a
  // line is never split by a second write.
  const ssize_t n = ::write(fd_, line.data(), line.size());
  if (n < 0) return ErrnoError("append to", path_);
  if (static_cast<size_t>(n) != line.size()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("short write to metrics file ", path_, ": ", n, " of ",
                     line.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

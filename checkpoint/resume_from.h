// ResumeFrom: what a user asked to resume a job from (nothing, a committed
// epoch, or the newest committed epoch that verifies). Parsed once, where the
// user typed it (a flag, a config field), and passed around as a value.
//
// An Abseil flag may hold a ResumeFrom directly:
//   ABSL_FLAG(jobgraph::ResumeFrom, resume_from_epoch, {}, "...");
// so a bad value is rejected by flag parsing with the accepted forms.
//
// A plain value type; thread-compatible.

#ifndef JOBGRAPH_CHECKPOINT_RESUME_FROM_H_
#define JOBGRAPH_CHECKPOINT_RESUME_FROM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

struct ResumeFrom {
  enum class Kind { kScratch, kEpoch, kLatest };
  Kind kind = Kind::kScratch;
  // The epoch, for kEpoch.
  int64_t epoch = 0;

  static ResumeFrom Scratch() { return {}; }
  static ResumeFrom Latest() { return {Kind::kLatest, 0}; }
  static ResumeFrom Epoch(int64_t epoch) { return {Kind::kEpoch, epoch}; }

  // "" (from scratch), "latest", or a non-negative epoch number. Anything
  // else is InvalidArgument with the accepted forms.
  static absl::StatusOr<ResumeFrom> Parse(absl::string_view text);
  // The inverse of Parse ("" for kScratch).
  std::string ToString() const;

  bool from_scratch() const { return kind == Kind::kScratch; }
  bool operator==(const ResumeFrom& other) const {
    return kind == other.kind && epoch == other.epoch;
  }
  bool operator!=(const ResumeFrom& other) const { return !(*this == other); }
};

// Abseil flag support (found by argument-dependent lookup).
bool AbslParseFlag(absl::string_view text, ResumeFrom* resume,
                   std::string* error);
std::string AbslUnparseFlag(const ResumeFrom& resume);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_RESUME_FROM_H_

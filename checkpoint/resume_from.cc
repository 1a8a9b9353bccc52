#include "checkpoint/resume_from.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace jobgraph {

absl::StatusOr<ResumeFrom> ResumeFrom::Parse(absl::string_view text) {
  if (text.empty()) return Scratch();
  if (text == "latest") return Latest();
  int64_t epoch = 0;
  if (!std::all_of(text.begin(), text.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(text, &epoch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume_from_epoch '", text,
        "' is not valid: give a non-negative epoch number or 'latest'"));
  }
  return Epoch(epoch);
}

std::string ResumeFrom::ToString() const {
  switch (kind) {
    case Kind::kScratch:
      return "";
    case Kind::kLatest:
      return "latest";
    case Kind::kEpoch:
      return absl::StrCat(epoch);
  }
  return "";
}

bool AbslParseFlag(absl::string_view text, ResumeFrom* resume,
                   std::string* error) {
  absl::StatusOr<ResumeFrom> parsed = ResumeFrom::Parse(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *resume = *parsed;
  return true;
}

std::string AbslUnparseFlag(const ResumeFrom& resume) {
  return resume.ToString();
}

}  // namespace jobgraph

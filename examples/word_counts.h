// WordCounts: a checkpointable blob type holding word counts, and the
// operators of the text_stats example that fill and read it. Linking this
// library registers the type, its serializer and the operators.
//
// A word is a maximal run of ASCII letters and digits and of bytes >= 0x80
// (so UTF-8 words stay whole); ASCII letters are lowercased; everything else
// separates words. "Don't stop-2" gives "don", "t", "stop", "2".
//
// Operators:
//   CreateWordCounts() -> counts
//       A new, empty WordCounts (replacing whatever the blob held).
//   CountWords(lines, counts) -> counts
//       Adds the words of every element of `lines` (a string tensor) and
//       the number of lines. The output must be the `counts` input. Safe to
//       run from several threads on one blob: each batch is tokenized without
//       the lock and merged under it.
//   TopWords(counts) -> words, word_counts, totals
//       args: k (int >= 0). The k most frequent words by count descending,
//       then word ascending: `words` (string [<=k]), `word_counts` (int64
//       [<=k]); `totals` int64 [3] = {lines, words, distinct words}.
//
// Checkpoint format: BlobProto.type "WordCounts", the payload in `content`:
// varints (protobuf coding) version (1), lines, total words, entries; then
// for each entry, in increasing byte order of the word, the word's length,
// its bytes and its count. Decoding checks the order, that counts are
// positive and sum to the total, and that nothing follows.

#ifndef JOBGRAPH_EXAMPLES_WORD_COUNTS_H_
#define JOBGRAPH_EXAMPLES_WORD_COUNTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jobgraph {
namespace examples {

inline constexpr char kWordCountsTypeName[] = "WordCounts";

// Thread-safe: every method takes the mutex.
class WordCounts {
 public:
  WordCounts() = default;
  WordCounts(const WordCounts&) = delete;
  WordCounts& operator=(const WordCounts&) = delete;

  // Splits `line` into words (see the file comment), appending to `words`.
  static void Tokenize(absl::string_view line, std::vector<std::string>* words);

  // Counts the words of `lines` and adds them, and lines.size(), in one step.
  void AddLines(absl::Span<const std::string> lines);

  int64_t lines() const;
  int64_t total_words() const;
  int64_t distinct() const;

  // The `k` most frequent words, by count descending then word ascending.
  std::vector<std::pair<std::string, int64_t>> Top(int64_t k) const;

  // The checkpoint payload, and back. Decode errors are DataLoss.
  std::string Encode() const;
  static absl::StatusOr<std::unique_ptr<WordCounts>> Decode(
      absl::string_view bytes);

 private:
  // std::mutex, not absl::Mutex: Debian's Abseil is not built with TSan,
  // which would not see absl::Mutex's ordering.
  mutable std::mutex mu_;
  std::map<std::string, int64_t, std::less<>> counts_ ABSL_GUARDED_BY(mu_);
  int64_t lines_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t words_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace examples
}  // namespace jobgraph

#endif  // JOBGRAPH_EXAMPLES_WORD_COUNTS_H_

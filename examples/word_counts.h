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
//       run from several threads on one blob: each thread counts into a
//       shard of its own (see WordCounts).
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

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jobgraph {
namespace examples {

inline constexpr char kWordCountsTypeName[] = "WordCounts";

// Thread-safe. Counting threads do not share a lock: each thread adds into
// a shard of its own (threads beyond kShards share shards), and the shards
// are merged only when the counts are read (TopWords, a checkpoint), which
// is at an epoch boundary.
class WordCounts {
 public:
  WordCounts() = default;
  WordCounts(const WordCounts&) = delete;
  WordCounts& operator=(const WordCounts&) = delete;

  // Calls `word(w)` for every word of `line` (see the file comment), in
  // order. `w` is a view into `line`, or into `scratch` when the word had
  // to be lowercased; it is valid until the next call.
  template <typename F>
  static void ForEachWord(absl::string_view line, std::string& scratch,
                          F&& word);

  // Counts the words of `lines` and adds them, and lines.size(), in one step
  // (a reader sees all of a call's counts or none of them).
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

  static constexpr int kShards = 8;

 private:
  struct alignas(64) Shard {
    // std::mutex, not absl::Mutex: Debian's Abseil is not built with TSan,
    // which would not see absl::Mutex's ordering.
    std::mutex mu;
    absl::flat_hash_map<std::string, int64_t> counts ABSL_GUARDED_BY(mu);
    int64_t lines ABSL_GUARDED_BY(mu) = 0;
    int64_t words ABSL_GUARDED_BY(mu) = 0;
  };

  // Every shard locked, in index order (the only order anyone locks two).
  class AllShards;
  // Every word with its count over all shards, in increasing byte order.
  std::map<std::string, int64_t> Merged() const;

  mutable std::array<Shard, kShards> shards_;
};

namespace word_counts_internal {
inline bool IsWordByte(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
         (u >= 'A' && u <= 'Z') || u >= 0x80;
}
}  // namespace word_counts_internal

template <typename F>
void WordCounts::ForEachWord(absl::string_view line, std::string& scratch,
                             F&& word) {
  using word_counts_internal::IsWordByte;
  const char* p = line.data();
  const char* const end = p + line.size();
  while (p < end) {
    while (p < end && !IsWordByte(*p)) ++p;
    const char* const start = p;
    bool upper = false;
    while (p < end && IsWordByte(*p)) {
      upper |= (*p >= 'A' && *p <= 'Z');
      ++p;
    }
    if (p == start) continue;
    if (!upper) {
      word(absl::string_view(start, static_cast<size_t>(p - start)));
      continue;
    }
    scratch.assign(start, static_cast<size_t>(p - start));
    for (char& c : scratch) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    word(absl::string_view(scratch));
  }
}

}  // namespace examples
}  // namespace jobgraph

#endif  // JOBGRAPH_EXAMPLES_WORD_COUNTS_H_

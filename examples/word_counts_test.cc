#include "examples/word_counts.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace examples {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<std::string> Words(absl::string_view line) {
  std::vector<std::string> words;
  std::string scratch;
  WordCounts::ForEachWord(line, scratch,
                          [&](absl::string_view w) { words.emplace_back(w); });
  return words;
}

TEST(WordCountsTest, WordsAreRunsOfLettersDigitsAndNonAsciiBytesLowercased) {
  EXPECT_THAT(Words("Don't stop-2"), ElementsAre("don", "t", "stop", "2"));
  EXPECT_THAT(Words("  Grüße, WORLD!\tx9 "),
              ElementsAre("grüße", "world", "x9"));
  EXPECT_THAT(Words(""), ElementsAre());
  EXPECT_THAT(Words(" ,;- "), ElementsAre());
}

// Threads count into shards of their own; what is read back is the sum, the
// same as one thread counting everything.
TEST(WordCountsTest, ConcurrentCountsEqualSequentialCounts) {
  std::vector<std::string> lines;
  for (int i = 0; i < 2000; ++i) {
    lines.push_back(absl::StrCat("w", i % 37, " W", i % 11, " common"));
  }
  WordCounts sequential;
  sequential.AddLines(lines);

  WordCounts concurrent;
  std::vector<std::thread> threads;
  constexpr int kThreads = WordCounts::kShards + 3;  // some share a shard
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < lines.size(); i += kThreads) {
        concurrent.AddLines({lines[i]});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(concurrent.lines(), 2000);
  EXPECT_EQ(concurrent.total_words(), 6000);
  EXPECT_EQ(concurrent.distinct(), 37 + 11 + 1 - 11);  // w0..w10 are shared
  EXPECT_EQ(concurrent.Encode(), sequential.Encode());
  EXPECT_THAT(concurrent.Top(2),
              ElementsAre(Pair("common", 2000),
                          Pair("w0", 2000 / 37 + 1 + 2000 / 11 + 1)));
}

TEST(WordCountsTest, EncodeDecodeRoundTripsAndKeepsCounting) {
  WordCounts counts;
  counts.AddLines({"b a", "c b", "b"});
  const std::string bytes = counts.Encode();
  absl::StatusOr<std::unique_ptr<WordCounts>> decoded =
      WordCounts::Decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)->Encode(), bytes);
  (*decoded)->AddLines({"a"});
  EXPECT_THAT((*decoded)->Top(3),
              ElementsAre(Pair("b", 3), Pair("a", 2), Pair("c", 1)));
  EXPECT_EQ((*decoded)->lines(), 4);
  EXPECT_EQ((*decoded)->total_words(), 6);
}

// The checkpoint payload's bytes (word_counts.h), as checkpoints written
// before the counts were sharded hold them: they must keep resuming.
TEST(WordCountsTest, EncodeIsTheDocumentedFormat) {
  WordCounts counts;
  counts.AddLines({"b A", "c b", "B"});
  // version 1, lines 3, words 5, entries 3; "a" 1, "b" 3, "c" 1.
  EXPECT_EQ(counts.Encode(), std::string("\x01\x03\x05\x03"
                                         "\x01"
                                         "a\x01"
                                         "\x01"
                                         "b\x03"
                                         "\x01"
                                         "c\x01"));
}

// Counts decoded into one shard, then more counted from many threads (so in
// other shards too), read back as the sum.
TEST(WordCountsTest, DecodedCountsMergeWithCountsFromOtherThreads) {
  std::vector<std::string> lines;
  for (int i = 0; i < 400; ++i) lines.push_back(absl::StrCat("x", i % 7, " y"));
  WordCounts before;
  before.AddLines({"x1 z", "y"});
  absl::StatusOr<std::unique_ptr<WordCounts>> decoded =
      WordCounts::Decode(before.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::vector<std::thread> threads;
  constexpr int kThreads = 2 * WordCounts::kShards;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < lines.size(); i += kThreads) {
        (*decoded)->AddLines({lines[i]});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  WordCounts expected;
  expected.AddLines({"x1 z", "y"});
  expected.AddLines(lines);
  EXPECT_EQ((*decoded)->Encode(), expected.Encode());
  EXPECT_EQ((*decoded)->lines(), 402);
  EXPECT_EQ((*decoded)->total_words(), 803);
}

TEST(WordCountsTest, DamagedPayloadIsDataLoss) {
  WordCounts counts;
  counts.AddLines({"b a"});
  std::string bytes = counts.Encode();
  bytes.back() = static_cast<char>(bytes.back() + 1);  // a count changes
  EXPECT_EQ(WordCounts::Decode(bytes).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace examples
}  // namespace jobgraph

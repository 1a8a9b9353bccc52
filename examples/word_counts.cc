#include "examples/word_counts.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace examples {
namespace {

constexpr uint32_t kFormatVersion = 1;

// The shard of the calling thread: threads take shards round-robin in the
// order they first count (process-wide), so a few threads counting at once
// rarely share one; sharing costs only contention.
int ThreadShard() {
  static std::atomic<int> next{0};
  thread_local const int shard =
      next.fetch_add(1, std::memory_order_relaxed) % WordCounts::kShards;
  return shard;
}

}  // namespace

class WordCounts::AllShards {
 public:
  explicit AllShards(std::array<Shard, kShards>& shards) : shards_(shards) {
    for (Shard& shard : shards_) shard.mu.lock();
  }
  ~AllShards() {
    for (auto it = shards_.rbegin(); it != shards_.rend(); ++it) {
      it->mu.unlock();
    }
  }
  AllShards(const AllShards&) = delete;
  AllShards& operator=(const AllShards&) = delete;

 private:
  std::array<Shard, kShards>& shards_;
};

void WordCounts::AddLines(absl::Span<const std::string> lines) {
  Shard& shard = shards_[ThreadShard()];
  std::string scratch;
  int64_t words = 0;
  std::lock_guard<std::mutex> lock(shard.mu);
  for (const std::string& line : lines) {
    ForEachWord(line, scratch, [&](absl::string_view word) {
      ++words;
      auto it = shard.counts.find(word);
      if (it != shard.counts.end()) {
        ++it->second;
      } else {
        shard.counts.emplace(std::string(word), 1);
      }
    });
  }
  shard.lines += static_cast<int64_t>(lines.size());
  shard.words += words;
}

std::map<std::string, int64_t> WordCounts::Merged() const {
  std::map<std::string, int64_t> merged;
  AllShards lock(shards_);
  for (const Shard& shard : shards_) {
    for (const auto& [word, count] : shard.counts) merged[word] += count;
  }
  return merged;
}

int64_t WordCounts::lines() const {
  AllShards lock(shards_);
  int64_t n = 0;
  for (const Shard& shard : shards_) n += shard.lines;
  return n;
}

int64_t WordCounts::total_words() const {
  AllShards lock(shards_);
  int64_t n = 0;
  for (const Shard& shard : shards_) n += shard.words;
  return n;
}

int64_t WordCounts::distinct() const {
  return static_cast<int64_t>(Merged().size());
}

std::vector<std::pair<std::string, int64_t>> WordCounts::Top(int64_t k) const {
  const std::map<std::string, int64_t> merged = Merged();
  std::vector<std::pair<std::string, int64_t>> all(merged.begin(),
                                                   merged.end());
  const auto by_count = [](const std::pair<std::string, int64_t>& a,
                           const std::pair<std::string, int64_t>& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first < b.first;
  };
  const size_t n = std::min<size_t>(all.size(), std::max<int64_t>(k, 0));
  std::partial_sort(all.begin(), all.begin() + n, all.end(), by_count);
  all.resize(n);
  return all;
}

std::string WordCounts::Encode() const {
  std::string bytes;
  {
    // Lines and words are read under the same locks as the counts, so the
    // three agree even while other threads count.
    std::map<std::string, int64_t> merged;
    int64_t lines = 0;
    int64_t words = 0;
    {
      AllShards lock(shards_);
      for (const Shard& shard : shards_) {
        for (const auto& [word, count] : shard.counts) merged[word] += count;
        lines += shard.lines;
        words += shard.words;
      }
    }
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteVarint32(kFormatVersion);
    out.WriteVarint64(static_cast<uint64_t>(lines));
    out.WriteVarint64(static_cast<uint64_t>(words));
    out.WriteVarint64(merged.size());
    for (const auto& [word, count] : merged) {
      out.WriteVarint32(static_cast<uint32_t>(word.size()));
      out.WriteString(word);
      out.WriteVarint64(static_cast<uint64_t>(count));
    }
  }  // the coded stream flushes into `bytes` here
  return bytes;
}

absl::StatusOr<std::unique_ptr<WordCounts>> WordCounts::Decode(
    absl::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::DataLossError("word counts: payload larger than 2 GiB");
  }
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  const auto corrupt = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("word counts: ", what));
  };
  uint32_t version = 0;
  uint64_t lines = 0, words = 0, entries = 0;
  if (!in.ReadVarint32(&version)) return corrupt("truncated header");
  if (version != kFormatVersion) {
    return corrupt(absl::StrCat("unknown format version ", version));
  }
  if (!in.ReadVarint64(&lines) || !in.ReadVarint64(&words) ||
      !in.ReadVarint64(&entries)) {
    return corrupt("truncated header");
  }
  const uint64_t limit = std::numeric_limits<int64_t>::max();
  if (lines > limit || words > limit || entries > bytes.size()) {
    return corrupt("header values out of range");
  }
  std::map<std::string, int64_t, std::less<>> counts;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    uint32_t size = 0;
    std::string word;
    uint64_t count = 0;
    if (!in.ReadVarint32(&size) || !in.ReadString(&word, size) ||
        !in.ReadVarint64(&count)) {
      return corrupt(absl::StrCat("truncated at entry ", i, " of ", entries));
    }
    if (word.empty() || count == 0 || count > limit - sum) {
      return corrupt(
          absl::StrCat("bad entry ", i, " ('", word, "': ", count, ")"));
    }
    if (!counts.empty() && !(counts.rbegin()->first < word)) {
      return corrupt(
          absl::StrCat("entry ", i, " ('", word, "') is out of order"));
    }
    sum += count;
    counts.emplace_hint(counts.end(), std::move(word),
                        static_cast<int64_t>(count));
  }
  if (sum != words) {
    return corrupt(absl::StrCat("counts sum to ", sum, ", not the recorded ",
                                words, " words"));
  }
  if (in.CurrentPosition() != static_cast<int>(bytes.size())) {
    return corrupt("trailing bytes after the last entry");
  }
  auto result = std::make_unique<WordCounts>();
  {
    Shard& shard = result->shards_[0];
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.counts.reserve(counts.size());
    for (auto& [word, count] : counts) shard.counts.emplace(word, count);
    shard.lines = static_cast<int64_t>(lines);
    shard.words = static_cast<int64_t>(words);
  }
  return result;
}

namespace {

class WordCountsSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kWordCountsTypeName; }

  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    BlobProto proto;
    proto.set_name(std::string(name));
    proto.set_type(type_name());
    proto.set_content(blob.Get<WordCounts>().Encode());
    if (static_cast<int64_t>(proto.content().size()) > kMaxChunkBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("blob '", name, "': ", proto.content().size(),
                       " bytes of word counts exceed the ", kMaxChunkBytes,
                       "-byte limit of one checkpoint value"));
    }
    return sink(std::string(name), proto.SerializeAsString());
  }

  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    absl::StatusOr<std::unique_ptr<WordCounts>> counts =
        WordCounts::Decode(proto.content());
    if (!counts.ok()) {
      return absl::DataLossError(absl::StrCat(
          "blob '", proto.name(), "': ", counts.status().message()));
    }
    target->Reset(std::move(*counts));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_TYPE(WordCounts, kWordCountsTypeName);
JG_REGISTER_BLOB_SERIALIZER(WordCounts, WordCountsSerializer);

// The WordCounts in input `i`, or FailedPrecondition naming the blob.
absl::StatusOr<WordCounts*> InputCounts(const OperatorBase& op, int i) {
  Blob* blob = op.InputBlob(i);
  if (!blob->IsType<WordCounts>()) {
    return op.Error(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("input '", op.InputName(i), "' holds ", blob->TypeName(),
                     ", not WordCounts (create it with "
                     "CreateWordCounts)"));
  }
  return blob->GetMutable<WordCounts>();
}

class CreateWordCountsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    if (InputSize() != 0 || OutputSize() != 1) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "expects CreateWordCounts() -> counts");
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    OutputBlob(0)->Reset(std::make_unique<WordCounts>());
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(CreateWordCounts, CreateWordCountsOp);

class CountWordsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    if (InputSize() != 2 || OutputSize() != 1 ||
        OutputName(0) != InputName(1)) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "expects CountWords(lines, counts) -> counts");
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* lines, Input(0));
    if (lines->dtype() != STRING) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("input '", InputName(0),
                                "' must be a string tensor, got ",
                                lines->DebugString(2)));
    }
    JG_ASSIGN_OR_RETURN(WordCounts * counts, InputCounts(*this, 1));
    counts->AddLines(lines->values<std::string>());
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(CountWords, CountWordsOp);

class TopWordsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    if (InputSize() != 1 || OutputSize() != 3) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "expects TopWords(counts) -> words, word_counts, totals");
    }
    k_ = GetArg<int64_t>("k", 10);
    if (k_ < 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("k must be >= 0, got ", k_));
    }
    return absl::OkStatus();
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(WordCounts * counts, InputCounts(*this, 0));
    std::vector<std::pair<std::string, int64_t>> top = counts->Top(k_);
    std::vector<std::string> words;
    std::vector<int64_t> word_counts;
    for (auto& [word, count] : top) {
      words.push_back(std::move(word));
      word_counts.push_back(count);
    }
    *Output(0) = Tensor::FromVector<std::string>(words);
    *Output(1) = Tensor::FromVector<int64_t>(word_counts);
    *Output(2) = Tensor::FromVector<int64_t>(
        {counts->lines(), counts->total_words(), counts->distinct()});
    return absl::OkStatus();
  }

 private:
  int64_t k_ = 10;
};
JG_REGISTER_OPERATOR(TopWords, TopWordsOp);

}  // namespace
}  // namespace examples
}  // namespace jobgraph

#include "engine/serialization.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/serialization_internal.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Pairs = std::vector<std::pair<std::string, std::string>>;
using Segments = std::vector<std::pair<int64_t, int64_t>>;

template <typename T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

Pairs SerializeOrDie(absl::string_view name, const Tensor& tensor,
                     int64_t chunk_bytes) {
  Blob blob;
  blob.Reset(std::make_unique<Tensor>(tensor));
  absl::StatusOr<Pairs> pairs =
      SerializeBlobToPairs(name, blob, SerializationOptions{chunk_bytes});
  EXPECT_TRUE(pairs.ok()) << pairs.status();
  return pairs.ok() ? *std::move(pairs) : Pairs();
}

// Assembles `pairs` (in the given order) into one blob and returns it.
absl::Status Assemble(const Pairs& pairs, Blob* target) {
  BlobAssembler assembler;
  for (const auto& [key, value] : pairs) {
    absl::StatusOr<BlobKey> parsed = ParseBlobKey(key);
    if (!parsed.ok()) return parsed.status();
    absl::Status status = assembler.Add(parsed->blob_name, value, target);
    if (!status.ok()) return status;
  }
  return assembler.Finish();
}

// The chunks a fixed-width tensor should get, computed independently.
Segments ExpectedFixedWidthSegments(int64_t numel, int64_t element_size,
                                    int64_t chunk_bytes) {
  const int64_t per = std::max<int64_t>(1, chunk_bytes / element_size);
  Segments segments;
  for (int64_t b = 0; b == 0 || b < numel; b += per) {
    segments.emplace_back(b, std::min(numel, b + per));
  }
  return segments;
}

// Serializes `tensor` as blob "x", checks every chunk (key, header, data
// slice, size bound) and that it assembles back bit for bit.
void CheckRoundTrip(const Tensor& tensor, int64_t chunk_bytes,
                    const Segments& expected) {
  SCOPED_TRACE(
      absl::StrCat(tensor.DebugString(), " chunk_bytes=", chunk_bytes));
  const Pairs emitted = SerializeOrDie("x", tensor, chunk_bytes);
  ASSERT_EQ(emitted.size(), expected.size());
  // Chunks come in the bytewise order of their keys (x#%0, x#%1, x#%10,
  // x#%2, ...), so a sorted store receives sorted keys.
  EXPECT_TRUE(std::is_sorted(
      emitted.begin(), emitted.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; }));
  // Checked below in chunk-index order.
  Pairs pairs(emitted.size());
  for (const auto& pair : emitted) {
    absl::StatusOr<BlobKey> key = ParseBlobKey(pair.first);
    ASSERT_TRUE(key.ok() && key->chunk.has_value()) << pair.first;
    ASSERT_LT(static_cast<size_t>(*key->chunk), pairs.size());
    pairs[*key->chunk] = pair;
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    EXPECT_EQ(pairs[k].first, absl::StrCat("x#%", k));
    BlobProto proto;
    ASSERT_TRUE(proto.ParseFromString(pairs[k].second));
    EXPECT_EQ(proto.name(), "x");
    EXPECT_EQ(proto.type(), "Tensor");
    const TensorProto& t = proto.tensor();
    EXPECT_EQ(std::vector<int64_t>(t.dims().begin(), t.dims().end()),
              tensor.shape());
    EXPECT_EQ(t.data_type(), tensor.dtype());
    ASSERT_TRUE(t.has_segment());
    const auto [begin, end] = expected[k];
    EXPECT_EQ(t.segment().begin(), begin);
    EXPECT_EQ(t.segment().end(), end);
    EXPECT_EQ(t.float_data_size() + t.int32_data_size() + t.int64_data_size() +
                  t.double_data_size(),
              0);
    if (tensor.dtype() == STRING) {
      EXPECT_TRUE(t.raw_data().empty());
      ASSERT_EQ(t.string_data_size(), end - begin);
      int64_t bytes = 0;
      for (int64_t i = begin; i < end; ++i) {
        EXPECT_EQ(t.string_data(i - begin), tensor.data<std::string>()[i]);
        bytes += 2 + tensor.data<std::string>()[i].size();
      }
      if (end - begin > 1) {
        EXPECT_LE(bytes, chunk_bytes);
      }
    } else {
      const size_t size = DataTypeSize(tensor.dtype());
      EXPECT_EQ(t.string_data_size(), 0);
      ASSERT_EQ(t.raw_data().size(), (end - begin) * size);
      EXPECT_EQ(std::memcmp(
                    t.raw_data().data(),
                    static_cast<const char*>(tensor.raw_data()) + begin * size,
                    t.raw_data().size()),
                0);
      EXPECT_LE(t.raw_data().size(),
                std::max<size_t>(size, static_cast<size_t>(chunk_bytes)));
    }
  }
  // In order, and reversed.
  for (bool reverse : {false, true}) {
    Pairs ordered = pairs;
    if (reverse) std::reverse(ordered.begin(), ordered.end());
    Blob out;
    ASSERT_TRUE(Assemble(ordered, &out).ok());
    ASSERT_TRUE(out.IsType<Tensor>());
    EXPECT_TRUE(out.Get<Tensor>().BitwiseEquals(tensor))
        << out.Get<Tensor>().DebugString();
  }
}

std::vector<Tensor> EveryDtype() {
  const std::vector<int64_t> shape = {3, 5};
  std::vector<bool> bools;
  std::vector<uint8_t> bytes;
  std::vector<int32_t> int32s;
  std::vector<int64_t> int64s;
  std::vector<float> floats;
  std::vector<double> doubles;
  std::vector<std::string> strings;
  for (int i = 0; i < 15; ++i) {
    bools.push_back(i % 3 == 0);
    bytes.push_back(static_cast<uint8_t>(255 - i * 17));
    int32s.push_back(i % 2 ? std::numeric_limits<int32_t>::min() + i
                           : std::numeric_limits<int32_t>::max() - i);
    int64s.push_back(i % 2 ? std::numeric_limits<int64_t>::min() + i
                           : (int64_t{1} << 40) * -i);
    floats.push_back(i * 0.1f - 0.7f);
    doubles.push_back(i * 1e300 - 3e-300);
    strings.push_back(std::string(i % 4, static_cast<char>('a' + i)));
  }
  Tensor b(BOOL, shape);
  for (int i = 0; i < 15; ++i) b.mutable_data<bool>()[i] = bools[i];
  return {b,
          Tensor::FromVector(bytes, shape),
          Tensor::FromVector(int32s, shape),
          Tensor::FromVector(int64s, shape),
          Tensor::FromVector(floats, shape),
          Tensor::FromVector(doubles, shape),
          Tensor::FromVector(strings, shape)};
}

TEST(SerializationTest, EveryDtypeRoundTripsInManyChunks) {
  for (const Tensor& tensor : EveryDtype()) {
    for (int64_t chunk_bytes : {7, 16, 1 << 20}) {
      Segments expected;
      if (tensor.dtype() == STRING) {
        // Element i has i % 4 bytes, i.e. 2 + i % 4 encoded.
        const std::string* s = tensor.data<std::string>();
        int64_t begin = 0;
        while (begin < tensor.numel()) {
          int64_t end = begin;
          int64_t bytes = 0;
          while (end < tensor.numel() &&
                 (end == begin ||
                  bytes + 2 + static_cast<int64_t>(s[end].size()) <=
                      chunk_bytes)) {
            bytes += 2 + s[end].size();
            ++end;
          }
          expected.emplace_back(begin, end);
          begin = end;
        }
      } else {
        expected = ExpectedFixedWidthSegments(
            tensor.numel(), DataTypeSize(tensor.dtype()), chunk_bytes);
      }
      CheckRoundTrip(tensor, chunk_bytes, expected);
    }
  }
}

TEST(SerializationTest, ChunkCountsForFifteenElements) {
  // chunk_bytes = 7: 7 bools per chunk; one 4- or 8-byte element per chunk.
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[0], 7).size(), 3u);   // bool
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[2], 7).size(), 15u);  // int32
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[5], 7).size(), 15u);  // double
  // chunk_bytes = 16: 16 bools, 4 int32s, 2 doubles per chunk.
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[0], 16).size(), 1u);
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[2], 16).size(), 4u);
  EXPECT_EQ(SerializeOrDie("x", EveryDtype()[5], 16).size(), 8u);
}

TEST(SerializationTest, SmallTensorIsOneChunkUnderKeyHashPercentZero) {
  const Pairs pairs =
      SerializeOrDie("weights", Tensor::FromVector<float>({1, 2, 3}),
                     SerializationOptions().chunk_bytes);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first, "weights#%0");
  BlobProto proto;
  ASSERT_TRUE(proto.ParseFromString(pairs[0].second));
  EXPECT_EQ(proto.name(), "weights");
  EXPECT_EQ(proto.tensor().segment().begin(), 0);
  EXPECT_EQ(proto.tensor().segment().end(), 3);
  EXPECT_EQ(proto.tensor().raw_data().size(), 12u);
}

TEST(SerializationTest, DefaultChunkIs64MiB) {
  EXPECT_EQ(SerializationOptions().chunk_bytes, 64 << 20);
}

TEST(SerializationTest, TensorJustOverAChunkBoundarySplitsInTwo) {
  // 64 bytes = 16 floats per chunk.
  CheckRoundTrip(Tensor::Iota<float>(16), 64, {{0, 16}});
  CheckRoundTrip(Tensor::Iota<float>(17), 64, {{0, 16}, {16, 17}});
  // 65 bytes still hold only 16 whole floats.
  CheckRoundTrip(Tensor::Iota<float>(17), 65, {{0, 16}, {16, 17}});
  CheckRoundTrip(Tensor::Iota<float>(33), 64, {{0, 16}, {16, 32}, {32, 33}});
}

TEST(SerializationTest, StringsAreChunkedByEncodedBytes) {
  // Encoded sizes (2 + length): 5, 4, 2, 7, 12, 3.
  const Tensor t = Tensor::FromVector<std::string>(
      {"abc", "de", "", "fghij", "0123456789", "x"});
  CheckRoundTrip(t, 7, {{0, 1}, {1, 3}, {3, 4}, {4, 5}, {5, 6}});
  CheckRoundTrip(t, 9, {{0, 2}, {2, 4}, {4, 5}, {5, 6}});
  CheckRoundTrip(t, 1000, {{0, 6}});
}

TEST(SerializationTest, EmptyTensorsRecordTheirShape) {
  for (DataType dtype : {FLOAT, INT64, BOOL, STRING}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0}}) {
      const Tensor t(dtype, shape);
      CheckRoundTrip(t, 16, {{0, 0}});
      const Pairs pairs = SerializeOrDie("x", t, 16);
      ASSERT_EQ(pairs.size(), 1u);
      EXPECT_EQ(pairs[0].first, "x#%0");
      Blob out;
      ASSERT_TRUE(DeserializeBlob("x", pairs[0].second, &out).ok());
      EXPECT_EQ(out.Get<Tensor>().shape(), shape);
      EXPECT_EQ(out.Get<Tensor>().dtype(), dtype);
    }
  }
}

TEST(SerializationTest, ScalarsHaveNoDims) {
  CheckRoundTrip(Tensor::Scalar<double>(-2.5), 7, {{0, 1}});
  CheckRoundTrip(Tensor::Scalar<std::string>("s"), 7, {{0, 1}});
  const Pairs pairs = SerializeOrDie("x", Tensor::Scalar<int64_t>(42), 7);
  ASSERT_EQ(pairs.size(), 1u);
  BlobProto proto;
  ASSERT_TRUE(proto.ParseFromString(pairs[0].second));
  EXPECT_EQ(proto.tensor().dims_size(), 0);
  Blob out;
  ASSERT_TRUE(DeserializeBlob("x", pairs[0].second, &out).ok());
  EXPECT_EQ(out.Get<Tensor>().shape(), std::vector<int64_t>{});
  EXPECT_EQ(out.Get<Tensor>().scalar<int64_t>(), 42);
}

TEST(SerializationTest, SpecialFloatBitsArePreserved) {
  const std::vector<float> floats = {
      FromBits<float>(0x7fc00000),  // quiet NaN
      FromBits<float>(0x7fc00001),  // quiet NaN with payload
      FromBits<float>(0xffc12345),  // negative NaN with payload
      FromBits<float>(0x7f800001),  // signalling NaN
      -0.0f,
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::denorm_min(),
  };
  const std::vector<double> doubles = {
      FromBits<double>(0x7ff8000000000000),
      FromBits<double>(0x7ff8dead0000beef),
      FromBits<double>(0xfff0000000000001),
      FromBits<double>(0x7ff0000000000001),
      -0.0,
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::denorm_min(),
  };
  for (const Tensor& t :
       {Tensor::FromVector(floats), Tensor::FromVector(doubles)}) {
    for (int64_t chunk_bytes : {4, 8, 1024}) {
      const Pairs pairs = SerializeOrDie("x", t, chunk_bytes);
      Blob out;
      ASSERT_TRUE(Assemble(pairs, &out).ok());
      const Tensor& got = out.Get<Tensor>();
      ASSERT_EQ(got.nbytes(), t.nbytes());
      EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), t.nbytes()), 0);
    }
  }
}

TEST(SerializationTest, StringsWithNulsAndInvalidUtf8RoundTrip) {
  const Tensor t = Tensor::FromVector<std::string>(
      {std::string("a\0b", 3), std::string("\xff\xfe\x80", 3), "",
       std::string(1, '\0'), std::string(300, 'z')},
      {5, 1});
  CheckRoundTrip(t, 4, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
  CheckRoundTrip(t, 1 << 20, {{0, 5}});
}

TEST(SerializationTest, StringBlobUsesContentUnderTheBareName) {
  Blob blob;
  blob.Reset(std::make_unique<std::string>(std::string("hi\0\xff", 4)));
  absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("s", blob);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 1u);
  EXPECT_EQ((*pairs)[0].first, "s");
  BlobProto proto;
  ASSERT_TRUE(proto.ParseFromString((*pairs)[0].second));
  EXPECT_EQ(proto.name(), "s");
  EXPECT_EQ(proto.type(), "std::string");
  EXPECT_EQ(proto.content(), std::string("hi\0\xff", 4));
  EXPECT_FALSE(proto.has_tensor());

  Blob out;
  out.Reset(std::make_unique<Tensor>());  // replaced by the first piece
  ASSERT_TRUE(Assemble(*pairs, &out).ok());
  ASSERT_TRUE(out.IsType<std::string>());
  EXPECT_EQ(out.Get<std::string>(), std::string("hi\0\xff", 4));
}

TEST(SerializationTest, CounterIsAnInt64TensorOfOneUnderTheBareName) {
  for (int64_t count : {int64_t{0}, int64_t{-5}, int64_t{1} << 62}) {
    Blob blob;
    blob.Reset(std::make_unique<Counter>(count));
    absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("epochs", blob);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    ASSERT_EQ(pairs->size(), 1u);
    EXPECT_EQ((*pairs)[0].first, "epochs");
    BlobProto proto;
    ASSERT_TRUE(proto.ParseFromString((*pairs)[0].second));
    EXPECT_EQ(proto.type(), "std::unique_ptr<Counter<int64_t>>");
    EXPECT_THAT(proto.tensor().dims(), ElementsAre(1));
    EXPECT_EQ(proto.tensor().data_type(), INT64);
    ASSERT_EQ(proto.tensor().raw_data().size(), 8u);

    Blob out;
    ASSERT_TRUE(DeserializeBlob("epochs", (*pairs)[0].second, &out).ok());
    ASSERT_TRUE(out.IsType<Counter>());
    EXPECT_EQ(out.Get<Counter>().Retrieve(), count);
  }
}

TEST(SerializationTest, Caffe2StyleCounterWithInt64DataLoads) {
  BlobProto proto;
  proto.set_name("c");
  proto.set_type("std::unique_ptr<Counter<int64_t>>");
  proto.mutable_tensor()->add_dims(1);
  proto.mutable_tensor()->set_data_type(INT64);
  proto.mutable_tensor()->add_int64_data(7);
  Blob out;
  ASSERT_TRUE(DeserializeBlob("c", proto.SerializeAsString(), &out).ok());
  EXPECT_EQ(out.Get<Counter>().Retrieve(), 7);

  proto.mutable_tensor()->add_int64_data(8);  // two elements: not a counter
  absl::Status status = DeserializeBlob("c", proto.SerializeAsString(), &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("blob 'c'"));
}

struct NotSerializable {
  int x = 0;
};

TEST(SerializationTest, TypeWithoutSerializerIsAnErrorNamingTheBlob) {
  Blob blob;
  blob.Reset(std::make_unique<NotSerializable>());
  int calls = 0;
  absl::Status status =
      SerializeBlob("odd", blob, {}, [&](std::string, std::string) {
        ++calls;
        return absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("blob 'odd' holds jobgraph::(anonymous "
                        "namespace)::NotSerializable, which has no registered "
                        "serializer;"));
  EXPECT_EQ(calls, 0);
}

TEST(SerializationTest, UninitializedBlobIsAnErrorNamingTheBlob) {
  Blob blob;
  absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("empty", blob);
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pairs.status().message(),
              HasSubstr("blob 'empty' is uninitialized"));
}

TEST(SerializationTest, BadChunkBytesAndNamesAreInvalidArgument) {
  Blob blob;
  blob.Reset(std::make_unique<Tensor>(Tensor::Iota<float>(4)));
  for (int64_t chunk_bytes : {int64_t{0}, int64_t{-1}, kMaxChunkBytes + 1}) {
    absl::StatusOr<Pairs> pairs =
        SerializeBlobToPairs("w", blob, SerializationOptions{chunk_bytes});
    EXPECT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(pairs.status().message(),
                HasSubstr(absl::StrCat("serializing blob 'w': chunk_bytes must "
                                       "be in [1, 1073741824], got ",
                                       chunk_bytes)));
  }
  EXPECT_TRUE(
      SerializeBlobToPairs("w", blob, SerializationOptions{kMaxChunkBytes})
          .ok());
  EXPECT_EQ(SerializeBlobToPairs("", blob).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status status = SerializeBlobToPairs("a#%b", blob).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("blob 'a#%b'"));
}

TEST(SerializationTest, SinkErrorsStopSerialization) {
  Blob blob;
  blob.Reset(std::make_unique<Tensor>(Tensor::Iota<int32_t>(10)));
  std::vector<std::string> keys;
  absl::Status status = SerializeBlob(
      "x", blob, SerializationOptions{8}, [&](std::string key, std::string) {
        keys.push_back(key);
        if (keys.size() == 2) return absl::UnavailableError("disk full");
        return absl::OkStatus();
      });
  EXPECT_EQ(status, absl::UnavailableError("disk full"));
  EXPECT_THAT(keys, ElementsAre("x#%0", "x#%1"));
}

TEST(SerializationTest, ParseBlobKey) {
  absl::StatusOr<BlobKey> key = ParseBlobKey("x#%0");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->blob_name, "x");
  EXPECT_EQ(key->chunk, 0);
  key = ParseBlobKey("layer/w#%123");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->blob_name, "layer/w");
  EXPECT_EQ(key->chunk, 123);
  key = ParseBlobKey("counter");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->blob_name, "counter");
  EXPECT_FALSE(key->chunk.has_value());
  EXPECT_EQ(TensorChunkKey("w", 12), "w#%12");
  for (absl::string_view bad :
       {"", "#%0", "x#%", "x#%01", "x#%-1", "x#%+1", "x#%1a", "x#%0#%1",
        "x#%99999999999999999999"}) {
    EXPECT_EQ(ParseBlobKey(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_THAT(ParseBlobKey("x#%01").status().message(),
              HasSubstr("malformed database key 'x#%01'"));
}

TEST(BlobAssemblerTest, InterleavedOutOfOrderChunksOfSeveralBlobs) {
  const Tensor a = Tensor::Iota<int64_t>(10);  // 2 per chunk: 5 chunks
  const Tensor b = Tensor::FromVector<std::string>({"p", "q", "r"});
  Pairs pairs = SerializeOrDie("a", a, 16);
  for (auto& pair : SerializeOrDie("b", b, 3)) pairs.push_back(pair);
  ASSERT_EQ(pairs.size(), 8u);
  std::mt19937 rng(7);
  std::shuffle(pairs.begin(), pairs.end(), rng);

  Blob blob_a, blob_b;
  BlobAssembler assembler;
  int a_pieces = 0;
  for (const auto& [key, value] : pairs) {
    absl::StatusOr<BlobKey> parsed = ParseBlobKey(key);
    ASSERT_TRUE(parsed.ok());
    Blob* target = parsed->blob_name == "a" ? &blob_a : &blob_b;
    ASSERT_TRUE(assembler.Add(parsed->blob_name, value, target).ok()) << key;
    EXPECT_TRUE(assembler.IsStarted(parsed->blob_name));
    if (parsed->blob_name == "a") {
      ++a_pieces;
      EXPECT_EQ(assembler.IsComplete("a"), a_pieces == 5);
    }
  }
  ASSERT_TRUE(assembler.Finish().ok());
  EXPECT_EQ(assembler.num_complete(), 2);
  EXPECT_THAT(assembler.CompleteBlobs(), ElementsAre("a", "b"));
  EXPECT_FALSE(assembler.IsStarted("c"));
  EXPECT_TRUE(blob_a.Get<Tensor>().BitwiseEquals(a));
  EXPECT_TRUE(blob_b.Get<Tensor>().BitwiseEquals(b));
}

TEST(BlobAssemblerTest, FirstPieceResetsTheTarget) {
  Blob target;
  target.Reset(std::make_unique<Tensor>(Tensor::Iota<float>(100)));
  const Pairs pairs = SerializeOrDie("x", Tensor::Iota<int32_t>(3), 4);
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", pairs[1].second, &target).ok());
  EXPECT_EQ(target.Get<Tensor>().dtype(), INT32);
  EXPECT_EQ(target.Get<Tensor>().shape(), std::vector<int64_t>{3});
}

TEST(BlobAssemblerTest, DuplicateChunkIsDataLoss) {
  const Pairs pairs = SerializeOrDie("x", Tensor::Iota<float>(8), 8);
  ASSERT_EQ(pairs.size(), 4u);
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", pairs[1].second, &target).ok());
  absl::Status status = assembler.Add("x", pairs[1].second, &target);
  EXPECT_EQ(status, absl::DataLossError(
                        "blob 'x': segment [2, 4) overlaps a piece already "
                        "loaded"));
}

TEST(BlobAssemblerTest, OverlappingChunksFromDifferentChunkSizesAreDataLoss) {
  const Tensor t = Tensor::Iota<float>(8);
  const Pairs small = SerializeOrDie("x", t, 8);   // [0,2) [2,4) ...
  const Pairs large = SerializeOrDie("x", t, 12);  // [0,3) [3,6) [6,8)
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", small[1].second, &target).ok());  // [2,4)
  EXPECT_EQ(assembler.Add("x", large[1].second, &target).code(),   // [3,6)
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(assembler.Add("x", large[0].second, &target).code(),  // [0,3)
            absl::StatusCode::kDataLoss);
  ASSERT_TRUE(assembler.Add("x", small[0].second, &target).ok());  // [0,2)
}

TEST(BlobAssemblerTest, MissingChunkMakesFinishFail) {
  const Pairs pairs = SerializeOrDie("x", Tensor::Iota<double>(10), 24);
  ASSERT_EQ(pairs.size(), 4u);  // [0,3) [3,6) [6,9) [9,10)
  Blob target;
  BlobAssembler assembler;
  for (int k : {0, 1, 3}) {
    ASSERT_TRUE(assembler.Add("x", pairs[k].second, &target).ok());
  }
  EXPECT_FALSE(assembler.IsComplete("x"));
  EXPECT_TRUE(assembler.IsStarted("x"));
  EXPECT_EQ(assembler.num_complete(), 0);
  EXPECT_EQ(
      assembler.Finish(),
      absl::DataLossError("blob 'x' is incomplete: got 7 of 10 elements"));
  // A chunk on its own.
  Blob alone;
  EXPECT_EQ(
      DeserializeBlob("x", pairs[2].second, &alone),
      absl::DataLossError("blob 'x' is incomplete: got 3 of 10 elements"));
}

TEST(BlobAssemblerTest, PieceAfterCompletionIsDataLoss) {
  const Pairs pairs = SerializeOrDie("x", Tensor::Iota<float>(0), 8);
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", pairs[0].second, &target).ok());
  EXPECT_TRUE(assembler.IsComplete("x"));
  absl::Status status = assembler.Add("x", pairs[0].second, &target);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("after the tensor was complete"));
}

TEST(BlobAssemblerTest, MismatchedDimsOrTypeIsDataLoss) {
  const Pairs first = SerializeOrDie("x", Tensor::Iota<float>(8), 16);
  const Pairs other_shape = SerializeOrDie("x", Tensor(FLOAT, {2, 4}), 16);
  const Pairs other_type = SerializeOrDie("x", Tensor::Iota<int32_t>(8), 16);
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", first[0].second, &target).ok());
  EXPECT_EQ(assembler.Add("x", other_shape[1].second, &target),
            absl::DataLossError("blob 'x': a piece of float[2,4] after pieces "
                                "of float[8]"));
  EXPECT_EQ(assembler.Add("x", other_type[1].second, &target),
            absl::DataLossError("blob 'x': a piece of int32[8] after pieces "
                                "of float[8]"));
}

TEST(BlobAssemblerTest, SegmentlessPieceAfterTheFirstIsDataLoss) {
  BlobProto whole;
  whole.set_name("x");
  whole.set_type("Tensor");
  whole.mutable_tensor()->add_dims(4);
  whole.mutable_tensor()->set_data_type(FLOAT);
  for (float f : {1.f, 2.f, 3.f, 4.f})
    whole.mutable_tensor()->add_float_data(f);
  const Pairs chunk = SerializeOrDie("x", Tensor::Iota<float>(4), 8);
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("x", chunk[0].second, &target).ok());
  EXPECT_EQ(assembler.Add("x", whole.SerializeAsString(), &target),
            absl::DataLossError(
                "blob 'x': a piece without a segment after the first"));
  // Alone, a segment-less piece is the whole tensor.
  Blob alone;
  ASSERT_TRUE(DeserializeBlob("x", whole.SerializeAsString(), &alone).ok());
  EXPECT_TRUE(alone.Get<Tensor>().BitwiseEquals(
      Tensor::FromVector<float>({1, 2, 3, 4})));
}

TEST(BlobAssemblerTest, NonTensorBlobMayAppearOnlyOnce) {
  Blob blob;
  blob.Reset(std::make_unique<std::string>("v"));
  absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("s", blob);
  ASSERT_TRUE(pairs.ok());
  Blob target;
  BlobAssembler assembler;
  ASSERT_TRUE(assembler.Add("s", (*pairs)[0].second, &target).ok());
  EXPECT_TRUE(assembler.IsComplete("s"));
  EXPECT_EQ(assembler.Add("s", (*pairs)[0].second, &target),
            absl::DataLossError(
                "blob 's' (type 'std::string') appears more than once"));
}

TEST(BlobAssemblerTest, UnknownTypeAndCorruptValuesAreErrorsNamingTheBlob) {
  BlobProto proto;
  proto.set_name("t");
  proto.set_type("std::unique_ptr<TimerInstance>");
  Blob target;
  BlobAssembler assembler;
  EXPECT_EQ(assembler.Add("t", proto.SerializeAsString(), &target),
            absl::FailedPreconditionError(
                "blob 't' has type 'std::unique_ptr<TimerInstance>', which has "
                "no registered deserializer"));

  const Pairs pairs = SerializeOrDie("x", Tensor::Iota<float>(100), 1 << 20);
  const std::string truncated =
      pairs[0].second.substr(0, pairs[0].second.size() - 1);
  absl::Status status = DeserializeBlob("x", truncated, &target);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("blob 'x': a value of "));

  BlobProto bad_bool;
  bad_bool.set_type("Tensor");
  bad_bool.mutable_tensor()->add_dims(2);
  bad_bool.mutable_tensor()->set_data_type(BOOL);
  bad_bool.mutable_tensor()->set_raw_data(std::string("\x01\x02", 2));
  EXPECT_EQ(DeserializeBlob("b", bad_bool.SerializeAsString(), &target),
            absl::DataLossError("blob 'b': bool element 1 has byte value 2"));

  BlobProto short_raw;
  short_raw.set_type("Tensor");
  short_raw.mutable_tensor()->add_dims(2);
  short_raw.mutable_tensor()->set_data_type(INT32);
  short_raw.mutable_tensor()->set_raw_data(std::string(7, '\0'));
  EXPECT_EQ(DeserializeBlob("r", short_raw.SerializeAsString(), &target),
            absl::DataLossError("blob 'r': segment [0, 2) of int32 needs 8 "
                                "bytes of raw_data, got 7"));

  BlobProto negative;
  negative.set_type("Tensor");
  negative.mutable_tensor()->add_dims(-1);
  negative.mutable_tensor()->set_data_type(FLOAT);
  EXPECT_EQ(DeserializeBlob("n", negative.SerializeAsString(), &target),
            absl::DataLossError("blob 'n': invalid tensor shape [-1]"));
}

TEST(BlobAssemblerTest, Caffe2PerTypeFieldsLoad) {
  auto load = [](BlobProto proto) -> Tensor {
    proto.set_type("Tensor");
    Blob out;
    absl::Status status =
        DeserializeBlob("c2", proto.SerializeAsString(), &out);
    EXPECT_TRUE(status.ok()) << status;
    return status.ok() ? out.Get<Tensor>() : Tensor();
  };
  BlobProto p;
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(FLOAT);
  p.mutable_tensor()->add_float_data(1.5f);
  p.mutable_tensor()->add_float_data(-0.0f);
  EXPECT_TRUE(load(p).BitwiseEquals(Tensor::FromVector<float>({1.5f, -0.0f})));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(DOUBLE);
  p.mutable_tensor()->add_double_data(2.25);
  p.mutable_tensor()->add_double_data(-1e300);
  EXPECT_TRUE(
      load(p).BitwiseEquals(Tensor::FromVector<double>({2.25, -1e300})));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(INT64);
  p.mutable_tensor()->add_int64_data(-3);
  p.mutable_tensor()->add_int64_data(int64_t{1} << 50);
  EXPECT_TRUE(load(p).BitwiseEquals(
      Tensor::FromVector<int64_t>({-3, int64_t{1} << 50})));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(INT32);
  p.mutable_tensor()->add_int32_data(-7);
  p.mutable_tensor()->add_int32_data(9);
  EXPECT_TRUE(load(p).BitwiseEquals(Tensor::FromVector<int32_t>({-7, 9})));

  p.Clear();
  p.mutable_tensor()->add_dims(3);
  p.mutable_tensor()->set_data_type(UINT8);
  for (int v : {0, 128, 255}) p.mutable_tensor()->add_int32_data(v);
  EXPECT_TRUE(
      load(p).BitwiseEquals(Tensor::FromVector<uint8_t>({0, 128, 255})));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(BOOL);
  p.mutable_tensor()->add_int32_data(1);
  p.mutable_tensor()->add_int32_data(0);
  Tensor bools(BOOL, {2});
  bools.mutable_data<bool>()[0] = true;
  EXPECT_TRUE(load(p).BitwiseEquals(bools));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(STRING);
  p.mutable_tensor()->add_string_data("u");
  p.mutable_tensor()->add_string_data(std::string("\0v", 2));
  EXPECT_TRUE(load(p).BitwiseEquals(
      Tensor::FromVector<std::string>({"u", std::string("\0v", 2)})));

  // Chunked Caffe2 style: float_data with segments.
  Blob target;
  BlobAssembler assembler;
  for (int k = 0; k < 2; ++k) {
    BlobProto chunk;
    chunk.set_type("Tensor");
    chunk.mutable_tensor()->add_dims(4);
    chunk.mutable_tensor()->set_data_type(FLOAT);
    chunk.mutable_tensor()->mutable_segment()->set_begin(2 * k);
    chunk.mutable_tensor()->mutable_segment()->set_end(2 * k + 2);
    chunk.mutable_tensor()->add_float_data(2 * k);
    chunk.mutable_tensor()->add_float_data(2 * k + 1);
    ASSERT_TRUE(assembler.Add("c2", chunk.SerializeAsString(), &target).ok());
  }
  ASSERT_TRUE(assembler.Finish().ok());
  EXPECT_TRUE(target.Get<Tensor>().BitwiseEquals(Tensor::Iota<float>(4)));

  p.Clear();
  p.mutable_tensor()->add_dims(2);
  p.mutable_tensor()->set_data_type(UINT8);
  p.mutable_tensor()->add_int32_data(1);
  p.mutable_tensor()->add_int32_data(256);
  p.set_type("Tensor");
  EXPECT_EQ(DeserializeBlob("u", p.SerializeAsString(), &target),
            absl::DataLossError("blob 'u': uint8 element 1 is 256"));
}

TEST(SerializationInternalTest,
     ScannerMatchesProtobufAndLeavesBulkDataInPlace) {
  const Tensor t = Tensor::Iota<float>(6);
  const Pairs pairs = SerializeOrDie("x", t, 1 << 20);
  serialization_internal::ScannedBlobProto scanned;
  ASSERT_TRUE(
      serialization_internal::ScanBlobProto(pairs[0].second, &scanned).ok());
  ASSERT_TRUE(scanned.raw_data.has_value());
  // A view into the value: no copy.
  EXPECT_GE(scanned.raw_data->data(), pairs[0].second.data());
  EXPECT_LE(scanned.raw_data->data() + scanned.raw_data->size(),
            pairs[0].second.data() + pairs[0].second.size());
  EXPECT_EQ(scanned.raw_data->size(), 24u);
  EXPECT_TRUE(scanned.header.tensor().raw_data().empty());

  BlobProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(pairs[0].second));
  EXPECT_EQ(parsed.tensor().raw_data(), std::string(*scanned.raw_data));
  parsed.mutable_tensor()->clear_raw_data();
  EXPECT_EQ(parsed.SerializeAsString(), scanned.header.SerializeAsString());

  // raw_data twice: the last occurrence wins, as in protobuf.
  BlobProto first;
  first.mutable_tensor()->set_raw_data("aaaa");
  BlobProto second;
  second.mutable_tensor()->set_raw_data("bbbb");
  const std::string both =
      first.SerializeAsString() + second.SerializeAsString();
  ASSERT_TRUE(serialization_internal::ScanBlobProto(both, &scanned).ok());
  EXPECT_EQ(*scanned.raw_data, "bbbb");
  ASSERT_TRUE(parsed.ParseFromString(both));
  EXPECT_EQ(parsed.tensor().raw_data(), "bbbb");

  EXPECT_EQ(serialization_internal::ScanBlobProto("\xff", &scanned).code(),
            absl::StatusCode::kDataLoss);
}

// The >2 GiB property without allocating: the layout of huge tensors keeps
// every chunk within chunk_bytes and covers every element exactly once.
TEST(SerializationInternalTest, HugeTensorsSplitIntoBoundedChunks) {
  struct Case {
    int64_t numel;
    size_t element_size;
    int64_t chunk_bytes;
    size_t expected_chunks;
  };
  for (const Case& c : {
           Case{(int64_t{3} << 30) / 4, 4, int64_t{64} << 20, 48},
           Case{(int64_t{5} << 30) / 8 + 1, 8, kMaxChunkBytes, 6},
           Case{int64_t{3} << 30, 1, int64_t{64} << 20, 48},
       }) {
    const Segments chunks = serialization_internal::FixedWidthChunks(
        c.numel, c.element_size, c.chunk_bytes);
    EXPECT_EQ(chunks.size(), c.expected_chunks);
    int64_t next = 0;
    for (const auto& [begin, end] : chunks) {
      EXPECT_EQ(begin, next);
      EXPECT_GT(end, begin);
      EXPECT_LE((end - begin) * static_cast<int64_t>(c.element_size),
                c.chunk_bytes);
      next = end;
    }
    EXPECT_EQ(next, c.numel);
  }
  EXPECT_EQ(serialization_internal::ElementsPerChunk(8, 7), 1);
  EXPECT_EQ(serialization_internal::ElementsPerChunk(4, 64 << 20), 16 << 20);
}

// The same bound on real values: a moderate tensor with a tiny chunk size
// gives many values, none larger than chunk_bytes plus a small header.
TEST(SerializationTest, EveryValueIsBoundedByChunkBytesPlusHeader) {
  const Tensor t = Tensor::Iota<float>(100000);
  const int64_t chunk_bytes = 1000;
  const Pairs pairs = SerializeOrDie("weights", t, chunk_bytes);
  EXPECT_EQ(pairs.size(), 400u);  // 250 floats per chunk
  for (const auto& [key, value] : pairs) {
    EXPECT_LE(value.size(), static_cast<size_t>(chunk_bytes) + 64) << key;
  }
  // Emitted in key order: "weights#%99" sorts after "weights#%399".
  EXPECT_EQ(pairs.front().first, "weights#%0");
  EXPECT_EQ(pairs.back().first, "weights#%99");
  Blob out;
  ASSERT_TRUE(Assemble(pairs, &out).ok());
  EXPECT_TRUE(out.Get<Tensor>().BitwiseEquals(t));
}

TEST(SerializationTest, StringElementLargerThanAChunkIsItsOwnChunk) {
  const Tensor t =
      Tensor::FromVector<std::string>({"a", std::string(100, 'b'), "c"});
  CheckRoundTrip(t, 10, {{0, 1}, {1, 2}, {2, 3}});
}

TEST(SerializationTest, StringsOverTheValueLimitAreRejected) {
  // One allocation of 1 GiB + 1 byte, moved between the two blobs.
  std::string huge(static_cast<size_t>(kMaxChunkBytes) + 1, 'h');
  Blob blob;
  std::string* held =
      blob.Reset(std::make_unique<std::string>(std::move(huge)));
  absl::Status status =
      SerializeBlob("big", blob, {}, [](std::string, std::string) {
        return absl::InternalError("sink must not be called");
      });
  EXPECT_EQ(status, absl::InvalidArgumentError(
                        "cannot serialize blob 'big': a string of 1073741825 "
                        "bytes is over the limit of 1073741824"));

  Tensor t(STRING, {2});
  t.mutable_data<std::string>()[1] = std::move(*held);
  blob.Reset(std::make_unique<Tensor>(std::move(t)));
  status = SerializeBlob("big", blob, {}, [](std::string, std::string) {
    return absl::InternalError("sink must not be called");
  });
  EXPECT_EQ(status, absl::InvalidArgumentError(
                        "cannot serialize blob 'big': string element 1 has "
                        "1073741825 bytes, more than the limit of 1073741824"));
}

class DummySerializer final : public BlobSerializer {
 public:
  explicit DummySerializer(std::string name) : name_(std::move(name)) {}
  std::string type_name() const override { return name_; }
  absl::Status Serialize(absl::string_view, const Blob&,
                         const SerializationOptions&,
                         const BlobSink&) const override {
    return absl::OkStatus();
  }
  absl::Status Deserialize(const BlobProto&, Blob*) const override {
    return absl::OkStatus();
  }

 private:
  std::string name_;
};

TEST(SerializationTest, RegisteringTwiceIsAlreadyExists) {
  EXPECT_EQ(RegisterBlobSerializer(std::type_index(typeid(Tensor)),
                                   std::make_unique<DummySerializer>("Other"))
                .code(),
            absl::StatusCode::kAlreadyExists);
  struct Fresh {};
  EXPECT_EQ(RegisterBlobSerializer(std::type_index(typeid(Fresh)),
                                   std::make_unique<DummySerializer>("Tensor"))
                .code(),
            absl::StatusCode::kAlreadyExists);
  // Neither attempt registered anything.
  EXPECT_EQ(FindBlobSerializer(std::type_index(typeid(Fresh))), nullptr);
  EXPECT_EQ(FindBlobSerializer("Other"), nullptr);
  EXPECT_NE(FindBlobSerializer(std::type_index(typeid(Counter))), nullptr);
  EXPECT_EQ(FindBlobSerializer("std::unique_ptr<Counter<int64_t>>"),
            FindBlobSerializer(std::type_index(typeid(Counter))));
}

// A damaged shape must not make loading allocate more than the machine has.
TEST(SerializationTest, AShapeLargerThanMemoryIsRefusedBeforeAllocating) {
  const Tensor small = Tensor::Iota<float>(4);
  Pairs pairs = SerializeOrDie("x", small, 1 << 20);
  ASSERT_EQ(pairs.size(), 1u);
  BlobProto proto;
  ASSERT_TRUE(proto.ParseFromString(pairs[0].second));
  proto.mutable_tensor()->clear_dims();
  proto.mutable_tensor()->add_dims(int64_t{1} << 50);  // 4 PiB of floats
  proto.mutable_tensor()->mutable_segment()->set_end(int64_t{1} << 50);
  Blob out;
  absl::Status s = DeserializeBlob("x", proto.SerializeAsString(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("blob 'x': tensor shape [1125899906842624] needs"));
}

}  // namespace
}  // namespace jobgraph

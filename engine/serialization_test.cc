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
#include "engine/serialization_test_util.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using serialization_test::Pairs;
using serialization_test::SerializeOrDie;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Segments = std::vector<std::pair<int64_t, int64_t>>;

template <typename T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
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

// SerializeBlobBorrowing gives the values SerializeBlob gives, byte for
// byte, as head + body; a fixed-width chunk's body is its elements in the
// tensor's own memory, every other value comes whole in the head.
TEST(SerializationTest, BorrowingGivesTheSameValuesWithElementsInPlace) {
  std::vector<std::unique_ptr<Blob>> blobs;
  for (const Tensor& tensor : EveryDtype()) {
    blobs.push_back(std::make_unique<Blob>());
    blobs.back()->Reset(std::make_unique<Tensor>(tensor));
  }
  blobs.push_back(std::make_unique<Blob>());
  blobs.back()->Reset(std::make_unique<std::string>("bytes"));
  blobs.push_back(std::make_unique<Blob>());
  blobs.back()->Reset(std::make_unique<Counter>(7));
  for (const std::unique_ptr<Blob>& held : blobs) {
    const Blob& blob = *held;
    for (int64_t chunk_bytes : {7, 16, 1 << 20}) {
      SCOPED_TRACE(
          absl::StrCat(blob.TypeName(), ", chunk_bytes ", chunk_bytes));
      const Pairs expected =
          SerializeBlobToPairs("b", blob, {.chunk_bytes = chunk_bytes}).value();
      const Tensor* tensor =
          blob.IsType<Tensor>() && blob.Get<Tensor>().dtype() != STRING
              ? &blob.Get<Tensor>()
              : nullptr;
      const char* const elements =
          tensor != nullptr ? static_cast<const char*>(tensor->raw_data())
                            : nullptr;
      std::vector<std::pair<size_t, size_t>> borrowed;  // offset, size
      Pairs got;
      ASSERT_TRUE(
          SerializeBlobBorrowing(
              "b", blob, {.chunk_bytes = chunk_bytes},
              [&](std::string key, std::string head, absl::string_view body) {
                if (tensor == nullptr) {
                  EXPECT_TRUE(body.empty());
                } else {
                  borrowed.emplace_back(body.data() - elements, body.size());
                }
                got.emplace_back(std::move(key), absl::StrCat(head, body));
                return absl::OkStatus();
              })
              .ok());
      EXPECT_EQ(got, expected);
      if (tensor == nullptr) continue;
      // The bodies are the tensor's elements, each byte in exactly one.
      std::sort(borrowed.begin(), borrowed.end());
      size_t next = 0;
      for (const auto& [offset, size] : borrowed) {
        EXPECT_EQ(offset, next);
        next = offset + size;
      }
      EXPECT_EQ(next, tensor->nbytes());
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

// Every value carries the name in BlobProto.name, a proto3 string, which
// protobuf does not parse unless it is valid UTF-8: such a blob could be
// written but never loaded (found by blob_fuzzer).
TEST(SerializationTest, NamesThatAreNotUtf8AreInvalidArgument) {
  Blob blob;
  blob.Reset(std::make_unique<Tensor>(Tensor::Iota<float>(4)));
  absl::Status status =
      SerializeBlobToPairs("w\x94", blob, SerializationOptions{4}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("blob 'w\\x94': its name is not valid UTF-8"));
  blob.Reset(std::make_unique<std::string>("s"));
  EXPECT_EQ(SerializeBlobToPairs("\xc3(", blob).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Names in any script still work.
  absl::StatusOr<Pairs> pairs = SerializeBlobToPairs("gewichte/\xc3\xa4", blob);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  Blob out;
  ASSERT_TRUE(Assemble(*pairs, &out).ok());
  EXPECT_EQ(out.Get<std::string>(), "s");
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
  // SerializeBlob never writes a name that is not UTF-8.
  for (absl::string_view bad : {"w\x94", "w\x94#%0", "\xff#%3"}) {
    EXPECT_EQ(ParseBlobKey(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_THAT(ParseBlobKey("w\x94#%0").status().message(),
              HasSubstr("malformed database key 'w\\x94#%0': the blob name "
                        "is not valid UTF-8"));
  key = ParseBlobKey("\xc3\xa4#%2");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->blob_name, "\xc3\xa4");
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

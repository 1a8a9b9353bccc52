#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/blob.h"
#include "engine/serialization.h"
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

// AddWhole: a blob the caller knows is one value (Load, from the blob
// index) is deserialized without state kept by name, and must be whole.
TEST(BlobAssemblerTest, AddWholeTakesOneCompleteValueAndKeepsNoState) {
  const Tensor t = Tensor::Iota<float>(6);
  const Pairs whole = SerializeOrDie("w", t, 1 << 20);
  ASSERT_EQ(whole.size(), 1u);
  Blob str;
  str.Reset(std::make_unique<std::string>("v"));
  absl::StatusOr<Pairs> str_pairs = SerializeBlobToPairs("s", str);
  ASSERT_TRUE(str_pairs.ok());
  const Pairs chunks = SerializeOrDie("x", Tensor::Iota<double>(10), 24);
  ASSERT_EQ(chunks.size(), 4u);

  BlobAssembler assembler;
  Blob w, s, x, garbled;
  w.Reset(std::make_unique<std::string>("replaced"));
  ASSERT_TRUE(assembler.AddWhole("w", whole[0].second, &w).ok());
  ASSERT_TRUE(assembler.AddWhole("s", (*str_pairs)[0].second, &s).ok());
  EXPECT_TRUE(w.Get<Tensor>().BitwiseEquals(t));
  EXPECT_EQ(s.Get<std::string>(), "v");
  EXPECT_EQ(assembler.num_complete(), 2);
  EXPECT_FALSE(assembler.IsStarted("w"));
  EXPECT_THAT(assembler.CompleteBlobs(), ElementsAre());
  // A piece of a tensor of several is not the whole blob.
  EXPECT_EQ(
      assembler.AddWhole("x", chunks[2].second, &x),
      absl::DataLossError("blob 'x' is incomplete: got 3 of 10 elements"));
  EXPECT_EQ(assembler.AddWhole("g", "\xff", &garbled).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(assembler.num_complete(), 2);
  // Whole blobs are not counted as started ones that Finish checks.
  ASSERT_TRUE(assembler.Add("x", chunks[0].second, &x).ok());
  EXPECT_EQ(
      assembler.Finish(),
      absl::DataLossError("blob 'x' is incomplete: got 3 of 10 elements"));
  for (int k : {1, 2, 3}) {
    ASSERT_TRUE(assembler.Add("x", chunks[k].second, &x).ok());
  }
  EXPECT_TRUE(assembler.Finish().ok());
  EXPECT_EQ(assembler.num_complete(), 3);
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

// Found by plan_position_fuzzer: a damaged value declaring a STRING tensor of
// 125 million elements made the loader allocate 4 GB before it looked at the
// data. A shape must now fit in the bytes of the blob's values first.
TEST(BlobAssemblerTest, ShapeLargerThanItsValuesIsDataLossBeforeAllocating) {
  BlobProto huge;
  huge.set_name("s");
  huge.set_type(kTensorTypeName);
  huge.mutable_tensor()->set_data_type(STRING);
  for (int64_t d : {67, 114, 16383}) huge.mutable_tensor()->add_dims(d);
  const std::string value = huge.SerializeAsString();
  Blob target;
  absl::Status status = DeserializeBlob("s", value, &target);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(std::string(status.message()),
            "blob 's': its shape [67,114,16383] declares 125133354 string "
            "elements, more than its values' " +
                std::to_string(value.size()) + " bytes can hold");
  EXPECT_FALSE(target.IsInitialized());

  // A first piece of a chunked tensor: the blob's other values may hold the
  // rest, so the bound is what the caller says they hold.
  const Pairs pairs = SerializeOrDie("f", Tensor::Iota<float>(1000), 400);
  ASSERT_EQ(pairs.size(), 10u);
  const int64_t all = [&] {
    int64_t n = 0;
    for (const auto& [key, v] : pairs) n += static_cast<int64_t>(v.size());
    return n;
  }();
  {
    BlobAssembler assembler;
    Blob f;
    status = assembler.Add("f", pairs[0].second, &f, 999);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(std::string(status.message()),
              "blob 'f': its shape [1000] declares 1000 float elements, more "
              "than its values' 999 bytes can hold");
    EXPECT_FALSE(f.IsInitialized());
  }
  for (int64_t bytes : {int64_t{1000}, all, int64_t{-1}}) {
    BlobAssembler assembler;
    Blob f;
    for (const auto& [key, v] : pairs) {
      ASSERT_TRUE(assembler.Add("f", v, &f, bytes).ok()) << bytes;
    }
    ASSERT_TRUE(assembler.Finish().ok());
    EXPECT_TRUE(f.Get<Tensor>().BitwiseEquals(Tensor::Iota<float>(1000)));
  }
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
}  // namespace
}  // namespace jobgraph

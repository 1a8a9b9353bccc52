#include "engine/wire_format.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "engine/blob.h"
#include "engine/serialization_test_util.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using serialization_test::Pairs;
using serialization_test::SerializeOrDie;

// The hand-written header must be byte-identical to protobuf's encoding,
// or databases would differ from those of earlier releases (and the golden
// files of the format tests).
TEST(SerializationInternalTest, TensorHeaderMatchesProtobufByteForByte) {
  struct Case {
    std::string name;
    std::vector<int64_t> dims;
    DataType data_type;
    int64_t begin;
    int64_t end;
  };
  const std::vector<Case> cases = {
      {"x", {}, FLOAT, 0, 1},        // a scalar
      {"x", {0}, INT64, 0, 0},       // empty: an empty segment
      {"w", {3, 4}, DOUBLE, 0, 12},  // begin 0 is omitted
      {"w", {3, 4}, FLOAT, 5, 12},   // a later chunk
      {"", {2}, UINT8, 0, 2},        // no name
      {std::string(300, 'n'), {1 << 20, 300}, STRING, 1 << 20, 1 << 21},
      {"big", {int64_t{1} << 40}, INT32, int64_t{1} << 39, int64_t{1} << 40},
      {"undefined", {1}, UNDEFINED, 0, 1},  // data_type 0 is omitted
      {"negative", {-1, 2}, static_cast<DataType>(-3), -5, -1},
  };
  for (const Case& c : cases) {
    BlobProto proto;
    proto.set_name(c.name);
    proto.set_type(kTensorTypeName);
    TensorProto* tensor = proto.mutable_tensor();
    for (int64_t d : c.dims) tensor->add_dims(d);
    tensor->set_data_type(c.data_type);
    tensor->mutable_segment()->set_begin(c.begin);
    tensor->mutable_segment()->set_end(c.end);
    const std::string expected = proto.SerializeAsString();

    std::string written = "prefix";
    serialization_internal::AppendTensorHeader(c.name, c.dims, c.data_type,
                                               c.begin, c.end, &written);
    EXPECT_EQ(written, "prefix" + expected) << proto.ShortDebugString();
    EXPECT_EQ(serialization_internal::TensorHeaderSize(
                  c.name, c.dims, c.data_type, c.begin, c.end),
              expected.size())
        << proto.ShortDebugString();
  }
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

// What ScanBlobProto must agree with: protobuf's own parse, with the bulk
// fields taken out.
void ExpectScanMatchesProtobuf(const std::string& value) {
  SCOPED_TRACE(absl::CHexEscape(value));
  BlobProto parsed;
  const bool parses = parsed.ParseFromString(value);
  serialization_internal::ScannedBlobProto scanned;
  const absl::Status status =
      serialization_internal::ScanBlobProto(value, &scanned);
  ASSERT_EQ(status.ok(), parses) << status;
  if (!parses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    return;
  }
  EXPECT_EQ(scanned.raw_data.has_value() ? std::string(*scanned.raw_data) : "",
            parsed.tensor().raw_data());
  ASSERT_EQ(scanned.string_data.size(),
            static_cast<size_t>(parsed.tensor().string_data_size()));
  for (size_t i = 0; i < scanned.string_data.size(); ++i) {
    EXPECT_EQ(scanned.string_data[i], parsed.tensor().string_data(i));
  }
  EXPECT_EQ(scanned.header.has_tensor(), parsed.has_tensor());
  if (parsed.has_tensor()) {
    parsed.mutable_tensor()->clear_raw_data();
    parsed.mutable_tensor()->clear_string_data();
  }
  EXPECT_EQ(scanned.header.SerializeAsString(), parsed.SerializeAsString());
  EXPECT_EQ(scanned.header.tensor().has_segment(),
            parsed.tensor().has_segment());
}

// The fast path (the fields Save writes, in the usual encodings) and the
// general scanner behind it must decide exactly as protobuf does, on the
// values Save writes and on every one-byte change or truncation of them.
TEST(SerializationInternalTest, ScannerAgreesWithProtobufOnDamagedValues) {
  std::vector<std::string> values;
  for (const auto& [key, value] :
       SerializeOrDie("weights", Tensor::Iota<float>(6), 1 << 20)) {
    values.push_back(value);
  }
  for (const auto& [key, value] : SerializeOrDie(
           "w2",
           Tensor::FromVector<int64_t>(std::vector<int64_t>(40, 7), {5, 8}),
           64)) {
    values.push_back(value);
  }
  const Tensor strings =
      Tensor::FromVector<std::string>({"ab", "", std::string("\xff\0", 2)});
  for (const auto& [key, value] : SerializeOrDie("s", strings, 1 << 20)) {
    values.push_back(value);
  }
  // Valid but unusual encodings that only the general scanner takes.
  values.push_back(
      std::string("\x0a\x01x\x1a\x03\x08\x96\x01", 8));  // dims unpacked
  values.push_back(std::string("\x0a\x01x\x1a\x02\x3a\x00", 7));  // tensor.name
  values.push_back(
      std::string("\x0a\x01x\x20\x05", 5));  // a varint in a bytes field
  values.push_back(std::string("\x0a\x02\xc3\x28", 4));  // name not UTF-8
  values.push_back(std::string("\x8a\x00\x01x", 4));     // a two-byte tag
  values.push_back(
      std::string("\x1a\x0b\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13));

  // Lengths in 5 bytes (protobuf accepts them) and in 6 (it refuses them),
  // for the name, the tensor, raw_data and the segment.
  values.push_back(std::string("\x0a\x81\x80\x80\x80\x00x", 7));
  values.push_back(std::string("\x0a\x81\x80\x80\x80\x80\x00x", 8));
  values.push_back(std::string("\x1a\x82\x80\x80\x80\x00\x62\x00", 8));
  values.push_back(std::string("\x1a\x82\x80\x80\x80\x80\x00\x62\x00", 9));
  values.push_back(std::string("\x1a\x07\x62\x81\x80\x80\x80\x00z", 9));
  values.push_back(std::string("\x1a\x08\x62\x81\x80\x80\x80\x80\x00z", 10));
  values.push_back(std::string("\x1a\x06\x5a\x80\x80\x80\x80\x00", 8));
  values.push_back(std::string("\x1a\x07\x5a\x80\x80\x80\x80\x80\x00", 9));

  for (const std::string& value : values) {
    ExpectScanMatchesProtobuf(value);
    for (size_t cut = 0; cut < value.size(); ++cut) {
      ExpectScanMatchesProtobuf(value.substr(0, cut));
    }
    // Every byte of the header (and a few of the data) set to values that
    // change tags, lengths and varint continuation bits.
    const size_t limit = std::min<size_t>(value.size(), 48);
    for (size_t i = 0; i < limit; ++i) {
      for (int b : {0x00, 0x01, 0x02, 0x08, 0x0a, 0x12, 0x1a, 0x5a, 0x62, 0x7f,
                    0x80, 0xff}) {
        std::string damaged = value;
        damaged[i] = static_cast<char>(b);
        ExpectScanMatchesProtobuf(damaged);
      }
    }
  }
}

}  // namespace
}  // namespace jobgraph

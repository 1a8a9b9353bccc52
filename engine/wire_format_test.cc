#include "engine/wire_format.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

}  // namespace
}  // namespace jobgraph

#include "engine/wire_format.h"

#include <string>

#include "absl/status/status.h"
#include "engine/serialization_test_util.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using serialization_test::Pairs;
using serialization_test::SerializeOrDie;

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

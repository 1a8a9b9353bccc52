#include "checkpoint/util/checksummed.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

TEST(ChecksummedTest, RoundTripsAndIsChecked) {
  const std::string payload("\x08\x01\x12\x07leveldb", 11);
  const std::string framed = FrameChecksummed(payload);
  ASSERT_EQ(framed.size(), kChecksummedHeaderBytes + payload.size());
  EXPECT_EQ(framed.substr(0, 8), "JGCKSUM\n");
  absl::StatusOr<Unframed> back = UnframeChecksummed(framed, "f");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->payload, payload);
  EXPECT_TRUE(back->checked);
}

TEST(ChecksummedTest, FixedLayout) {
  // The frame is part of the on-disk format: these bytes must never change.
  const std::string framed = FrameChecksummed("123456789");
  EXPECT_EQ(framed.substr(8, 8), std::string("\x09\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(20), "123456789");
  EXPECT_EQ(framed.size(), 29u);
}

TEST(ChecksummedTest, EmptyPayload) {
  absl::StatusOr<Unframed> back = UnframeChecksummed(FrameChecksummed(""), "f");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->payload, "");
  EXPECT_TRUE(back->checked);
}

TEST(ChecksummedTest, BareRecordIsReturnedUnchecked) {
  const std::string bare("\x08\x01", 2);
  absl::StatusOr<Unframed> back = UnframeChecksummed(bare, "f");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->payload, bare);
  EXPECT_FALSE(back->checked);
}

TEST(ChecksummedTest, EveryFlippedBitIsDetected) {
  const std::string framed = FrameChecksummed("\x08\x01 some payload bytes");
  for (size_t byte = 0; byte < framed.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = framed;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      absl::StatusOr<Unframed> back = UnframeChecksummed(damaged, "log");
      ASSERT_FALSE(back.ok()) << "byte " << byte << " bit " << bit;
      EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
    }
  }
}

TEST(ChecksummedTest, EveryTruncationIsDetected) {
  const std::string framed = FrameChecksummed("\x08\x01 some payload bytes");
  for (size_t size = 0; size < framed.size(); ++size) {
    absl::StatusOr<Unframed> back =
        UnframeChecksummed(framed.substr(0, size), "log");
    ASSERT_FALSE(back.ok()) << size;
    EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(ChecksummedTest, MessagesNameTheThingAndTheDamage) {
  const std::string framed = FrameChecksummed("abc");
  EXPECT_EQ(UnframeChecksummed(framed.substr(0, 5), "/d/MANIFEST.jobgraph")
                .status()
                .message(),
            "/d/MANIFEST.jobgraph is damaged: 5 bytes, shorter than the "
            "20-byte header of a checksummed record");
  EXPECT_EQ(UnframeChecksummed(framed.substr(0, 22), "/d/MANIFEST.jobgraph")
                .status()
                .message(),
            "/d/MANIFEST.jobgraph is damaged: its header records 3 bytes of "
            "payload but 2 follow (truncated)");
  EXPECT_EQ(UnframeChecksummed(framed + "x", "k").status().message(),
            "k is damaged: its header records 3 bytes of payload but 4 "
            "follow (trailing bytes)");
  std::string flipped = framed;
  flipped[20] ^= 1;
  absl::Status status = UnframeChecksummed(flipped, "k").status();
  EXPECT_TRUE(absl::StartsWith(status.message(), "k is damaged: CRC-32C "))
      << status;
  EXPECT_EQ(
      UnframeChecksummed("JGCKSUMX" + framed.substr(8), "k").status().message(),
      "k is damaged: it does not start with a checksummed record's "
      "header");
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/util/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ExtendFunction = uint32_t (*)(uint32_t, const void*, size_t);

struct Implementation {
  const char* name;
  ExtendFunction extend;
};

std::vector<Implementation> Implementations() {
  std::vector<Implementation> result = {
      {"portable", &crc32c::ExtendPortable},
      {"dispatch", &crc32c::Extend},
  };
  if (crc32c::HardwareAvailable()) {
    result.push_back({"hardware", &crc32c::ExtendHardware});
  }
  return result;
}

// RFC 3720 (iSCSI) appendix B.4 and the usual check value.
TEST(Crc32cTest, KnownVectors) {
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  for (const Implementation& impl : Implementations()) {
    SCOPED_TRACE(impl.name);
    EXPECT_EQ(impl.extend(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(impl.extend(0, std::string(32, '\0').data(), 32), 0x8A9136AAu);
    EXPECT_EQ(impl.extend(0, std::string(32, '\xff').data(), 32), 0x62A8AB43u);
    EXPECT_EQ(impl.extend(0, ascending.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(impl.extend(0, descending.data(), 32), 0x113FDB5Cu);
    EXPECT_EQ(impl.extend(0, "", 0), 0u);
  }
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, ExtendEqualsWholeBuffer) {
  const std::string data = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = Crc32c(data);
  for (size_t split = 0; split <= data.size(); ++split) {
    const uint32_t first = Crc32c(data.data(), split);
    EXPECT_EQ(crc32c::Extend(first, data.data() + split, data.size() - split),
              whole)
        << "split at " << split;
  }
}

TEST(Crc32cTest, CombineEqualsTheChecksumOfTheConcatenation) {
  std::mt19937 rng(7);
  std::string bytes(70000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  const absl::string_view all(bytes);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096},
                       size_t{65536}, all.size()}) {
    for (size_t len_b :
         {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, all.size() - split}) {
      if (split + len_b > all.size()) continue;
      const absl::string_view a = all.substr(0, split);
      const absl::string_view b = all.substr(split, len_b);
      EXPECT_EQ(crc32c::Combine(Crc32c(a), Crc32c(b), b.size()),
                Crc32c(all.substr(0, split + len_b)))
          << "split " << split << ", len_b " << len_b;
    }
  }
  // The known vector, in two pieces.
  EXPECT_EQ(crc32c::Combine(Crc32c("1234", 4), Crc32c("56789", 5), 5),
            0xE3069283u);
}

TEST(Crc32cTest, HardwareMatchesPortableOnRandomBuffers) {
  if (!crc32c::HardwareAvailable()) {
    GTEST_SKIP() << "this CPU has no SSE4.2";
  }
  std::mt19937_64 rng(42);
  // Covers every path: the unaligned head, the short and long three-stream
  // loops (boundaries at 3*256 and 3*8192 bytes), 8-byte words and the tail.
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 1000; ++n) lengths.push_back(n);
  for (size_t base :
       {767, 768, 769, 1536, 24575, 24576, 24577, 49152, 100000, 1 << 20}) {
    for (size_t delta : {0, 1, 7, 8, 9, 255}) lengths.push_back(base + delta);
  }
  std::string buffer((1 << 20) + 512, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (size_t n : lengths) {
    for (size_t offset = 0; offset < 8; ++offset) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(crc32c::ExtendHardware(seed, buffer.data() + offset, n),
                crc32c::ExtendPortable(seed, buffer.data() + offset, n))
          << "length " << n << ", offset " << offset;
    }
  }
}

TEST(Crc32cTest, DispatchUsesHardwareWhenAvailable) {
  // The dispatcher must agree with both; on this project's machines the CPU
  // has SSE4.2 (every x86-64 server CPU since 2008), so also check that it is
  // detected there.
  const std::string data(100000, 'x');
  EXPECT_EQ(crc32c::Extend(0, data.data(), data.size()),
            crc32c::ExtendPortable(0, data.data(), data.size()));
#if defined(__x86_64__)
  EXPECT_EQ(crc32c::HardwareAvailable(), __builtin_cpu_supports("sse4.2") != 0);
#endif
}

}  // namespace
}  // namespace jobgraph

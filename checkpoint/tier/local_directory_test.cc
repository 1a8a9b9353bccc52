#include "checkpoint/tier/local_directory.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::HasSubstr;

TEST(ExpandLocalDirectoryTest, ReplacesHostAndPercent) {
  EXPECT_EQ(*ExpandLocalDirectory("/dev/shm/ckpt-%h", "node7"),
            "/dev/shm/ckpt-node7");
  EXPECT_EQ(*ExpandLocalDirectory("/l/%h/%h", "a"), "/l/a/a");
  EXPECT_EQ(*ExpandLocalDirectory("/l/100%%/x", "a"), "/l/100%/x");
  EXPECT_EQ(*ExpandLocalDirectory("/plain", "a"), "/plain");
}

TEST(ExpandLocalDirectoryTest, RefusesUnknownPlaceholders) {
  absl::StatusOr<std::string> r = ExpandLocalDirectory("/l/%r", "a");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'/l/%r' has '%r' at offset 3"));
  r = ExpandLocalDirectory("/l/%", "a");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("has '%' at offset 3"));
  EXPECT_EQ(ExpandLocalDirectory("", "a").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExpandLocalDirectoryTest, RefusesHostNamesThatAreNotNames) {
  for (const char* host : {"", ".", "..", "a/b"}) {
    absl::StatusOr<std::string> r = ExpandLocalDirectory("/l/%h", host);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << host;
  }
  // Without %h the host name does not matter.
  EXPECT_EQ(*ExpandLocalDirectory("/l", ""), "/l");
}

TEST(HostNameTest, IsNotEmpty) { EXPECT_FALSE(HostName().empty()); }

}  // namespace
}  // namespace jobgraph

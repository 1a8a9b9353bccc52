#include "checkpoint/resume_from.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

TEST(ResumeFromTest, ParsesTheThreeForms) {
  EXPECT_EQ(ResumeFrom::Parse("").value(), ResumeFrom::Scratch());
  EXPECT_EQ(ResumeFrom::Parse("latest").value(), ResumeFrom::Latest());
  EXPECT_EQ(ResumeFrom::Parse("0").value(), ResumeFrom::Epoch(0));
  EXPECT_EQ(ResumeFrom::Parse("17").value(), ResumeFrom::Epoch(17));
  EXPECT_TRUE(ResumeFrom::Parse("").value().from_scratch());
  EXPECT_FALSE(ResumeFrom::Parse("3").value().from_scratch());
}

TEST(ResumeFromTest, RejectsEverythingElseNamingTheForms) {
  for (const char* bad : {"soon", "-1", "+3", " 3", "3 ", "Latest", "1e3",
                          "99999999999999999999"}) {
    absl::StatusOr<ResumeFrom> parsed = ResumeFrom::Parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              std::string("resume_from_epoch '") + bad +
                  "' is not valid: give a non-negative epoch number or "
                  "'latest'");
  }
}

TEST(ResumeFromTest, ToStringIsTheInverseOfParse) {
  for (const char* text : {"", "latest", "0", "42"}) {
    EXPECT_EQ(ResumeFrom::Parse(text).value().ToString(), text);
  }
}

TEST(ResumeFromTest, WorksAsAnAbseilFlagType) {
  ResumeFrom value;
  std::string error;
  EXPECT_TRUE(AbslParseFlag("5", &value, &error));
  EXPECT_EQ(value, ResumeFrom::Epoch(5));
  EXPECT_EQ(AbslUnparseFlag(value), "5");
  EXPECT_FALSE(AbslParseFlag("x", &value, &error));
  EXPECT_EQ(error,
            "resume_from_epoch 'x' is not valid: give a non-negative epoch "
            "number or 'latest'");
  EXPECT_EQ(value, ResumeFrom::Epoch(5));  // unchanged on error
}

}  // namespace
}  // namespace jobgraph

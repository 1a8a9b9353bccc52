#include "tools/ckpt/output.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/util/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/crc32c_combine.h"

namespace jobgraph {
namespace ckpt {
namespace {

TEST(JsonQuoteTest, EscapesPerRfc8259) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(JsonQuote("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(JsonQuote(std::string("\0\x01\x1f\x7f", 4)),
            "\"\\u0000\\u0001\\u001f\\u007f\"");
}

TEST(JsonQuoteTest, KeepsUtf8AndEscapesOtherBytes) {
  // U+00E9, U+20AC and U+1F600 pass through unchanged.
  EXPECT_EQ(JsonQuote("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
  // A lone continuation byte, a truncated sequence, an overlong '/', a
  // surrogate and a byte that never starts UTF-8.
  EXPECT_EQ(JsonQuote("\x80"), "\"\\u0080\"");
  EXPECT_EQ(JsonQuote("a\xe2\x82"), "\"a\\u00e2\\u0082\"");
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"\\u00c0\\u00af\"");
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"\\u00ed\\u00a0\\u0080\"");
  EXPECT_EQ(JsonQuote("\xff"), "\"\\u00ff\"");
}

TEST(JsonWriterTest, WritesNestedValuesWithStableKeyOrder) {
  std::ostringstream out;
  JsonWriter json(out);
  json.BeginObject();
  json.Field("name", "w#%0");
  json.Field("count", int64_t{3});
  json.Field("ok", true);
  json.Field("missing", std::optional<int64_t>());
  json.IntArray("dims", {3, 5});
  json.StringArray("empty", {});
  json.Key("nested");
  json.BeginArray();
  json.BeginObject();
  json.Field("a", -1);
  json.EndObject();
  json.Null();
  json.EndArray();
  json.EndObject();
  EXPECT_TRUE(json.done());
  EXPECT_EQ(out.str(),
            "{\"name\":\"w#%0\",\"count\":3,\"ok\":true,\"missing\":null,"
            "\"dims\":[3,5],\"empty\":[],\"nested\":[{\"a\":-1},null]}");
}

TEST(TextTableTest, AlignsColumnsWithoutTrailingSpaces) {
  TextTable table({"NAME", "N", "NOTE"}, {false, true, false});
  table.AddRow({"a", "1", "x"});
  table.AddRow({"longer", "100", ""});
  std::ostringstream out;
  table.Print(out);
  EXPECT_EQ(out.str(),
            "NAME      N  NOTE\n"
            "a         1  x\n"
            "longer  100\n");
}

TEST(FormatTest, SizesTimesAndNames) {
  EXPECT_EQ(FormatMicros(850), "850 us");
  EXPECT_EQ(FormatMicros(12345), "12.3 ms");
  EXPECT_EQ(FormatMicros(4560000), "4.56 s");
  EXPECT_EQ(FormatUnixMicros(0), "-");
  EXPECT_EQ(FormatUnixMicros(int64_t{1700000000} * 1000000 + 999),
            "2023-11-14 22:13:20 UTC");
  EXPECT_EQ(CrcHex(0xe3069283), "e3069283");
  EXPECT_EQ(CrcHex(0x1), "00000001");
  EXPECT_EQ(Printable("a\nb\\c\x01\xff"), "a\\nb\\\\c\\x01\\xff");
}

TEST(Crc32cCombineTest, EqualsTheChecksumOfTheConcatenation) {
  const std::string a = "123456789";
  std::string b;
  for (int i = 0; i < 100000; ++i) b.push_back(static_cast<char>(i * 7));
  EXPECT_EQ(Crc32cCombine(Crc32c(a), Crc32c(b), b.size()), Crc32c(a + b));
  EXPECT_EQ(Crc32cCombine(Crc32c(b), Crc32c(a), a.size()), Crc32c(b + a));
  // Empty parts.
  EXPECT_EQ(Crc32cCombine(Crc32c(a), Crc32c(""), 0), Crc32c(a));
  EXPECT_EQ(Crc32cCombine(0, Crc32c(a), a.size()), Crc32c(a));
  EXPECT_EQ(Crc32cCombine(0, 0, 0), 0u);
  // Three parts, folded left as `ckpt show` does.
  const std::string c(1 << 20, 'x');
  uint32_t crc = 0;
  for (const std::string* part :
       {&a, &static_cast<const std::string&>(b), &c}) {
    crc = Crc32cCombine(crc, Crc32c(*part), part->size());
  }
  EXPECT_EQ(crc, Crc32c(a + b + c));
}

TEST(CheckpointDirNamesTest, DatabaseNames) {
  std::optional<CheckpointDbName> db = ParseCheckpointDbName("trainer_0.12");
  ASSERT_TRUE(db.has_value());
  EXPECT_EQ(db->node, "trainer_0");
  EXPECT_EQ(db->epoch, 12);
  // Node names may contain dots; the epoch follows the last one.
  db = ParseCheckpointDbName("a.b.0");
  ASSERT_TRUE(db.has_value());
  EXPECT_EQ(db->node, "a.b");
  EXPECT_EQ(db->epoch, 0);
  EXPECT_FALSE(ParseCheckpointDbName("trainer_0").has_value());
  EXPECT_FALSE(ParseCheckpointDbName("trainer_0.").has_value());
  EXPECT_FALSE(ParseCheckpointDbName("trainer_0.01").has_value());
  EXPECT_FALSE(ParseCheckpointDbName("trainer_0.-1").has_value());
  EXPECT_FALSE(ParseCheckpointDbName(".trainer_0.1").has_value());
  EXPECT_FALSE(ParseCheckpointDbName("MANIFEST.jobgraph").has_value());
  EXPECT_FALSE(ParseCheckpointDbName("a b.1").has_value());
}

TEST(CheckpointDirNamesTest, TemporaryNames) {
  SaveTempName temp = ParseSaveTempName(".trainer_0.3.tmp-123-4");
  ASSERT_TRUE(temp.db.has_value());
  EXPECT_EQ(temp.db->node, "trainer_0");
  EXPECT_EQ(temp.db->epoch, 3);
  EXPECT_EQ(temp.pid, 123);
  // A temporary for a path that is not "<node>.<epoch>".
  temp = ParseSaveTempName(".scratch.tmp-5-0");
  EXPECT_FALSE(temp.db.has_value());
  EXPECT_EQ(temp.pid, 5);
  temp = ParseSaveTempName("trainer_0.3");
  EXPECT_FALSE(temp.db.has_value());
  EXPECT_FALSE(temp.pid.has_value());

  EXPECT_EQ(ParseCommitLogTempName("MANIFEST.jobgraph.tmp-77"), 77);
  EXPECT_EQ(ParseCommitLogTempName("MANIFEST.jobgraph.tmp-77-3"), 77);
  EXPECT_FALSE(ParseCommitLogTempName("MANIFEST.jobgraph").has_value());
  EXPECT_FALSE(ParseCommitLogTempName("MANIFEST.jobgraph.tmp-").has_value());
  EXPECT_FALSE(ParseCommitLogTempName("MANIFEST.jobgraph.tmp-x").has_value());
  EXPECT_FALSE(ParseCommitLogTempName("MANIFEST.jobgraph.tmp-7-").has_value());
  EXPECT_FALSE(ParseCommitLogTempName("MANIFEST.other.tmp-7").has_value());
}

}  // namespace
}  // namespace ckpt
}  // namespace jobgraph

#include "checkpoint/ops/compact_blob_index.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/crc32c.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

// Decode accepts `bytes` exactly when protobuf parses them, and then reads
// the same fields. Returns whether it accepted.
bool ExpectSameAsProtobuf(const std::string& bytes) {
  BlobIndex parsed;
  const bool parses = parsed.ParseFromString(bytes);
  std::optional<CompactBlobIndex> decoded = CompactBlobIndex::Decode(bytes);
  EXPECT_EQ(decoded.has_value(), parses)
      << "bytes: " << absl::CHexEscape(bytes);
  if (!parses || !decoded.has_value()) return false;
  parsed.DiscardUnknownFields();
  EXPECT_EQ(decoded->ToProto().SerializeAsString(), parsed.SerializeAsString());
  EXPECT_EQ(decoded->format_version(), parsed.format_version());
  EXPECT_EQ(decoded->node(), parsed.node());
  EXPECT_EQ(decoded->epoch(), parsed.epoch());
  EXPECT_EQ(decoded->total_bytes(), parsed.total_bytes());
  EXPECT_EQ(decoded->created_unix_micros(), parsed.created_unix_micros());
  EXPECT_EQ(decoded->files_listed(), parsed.files_listed());
  EXPECT_EQ(decoded->blob_size(), parsed.blob_size());
  for (int b = 0; b < parsed.blob_size() && b < decoded->blob_size(); ++b) {
    const CheckpointBlobInfo& blob = parsed.blob(b);
    EXPECT_EQ(decoded->name(b), blob.name());
    EXPECT_EQ(decoded->Entry(b).SerializeAsString(), blob.SerializeAsString());
    EXPECT_EQ(decoded->key_size(b), blob.key_size());
    EXPECT_EQ(decoded->value_bytes_size(b), blob.value_bytes_size());
    EXPECT_EQ(decoded->value_crc32c_size(b), blob.value_crc32c_size());
    if (decoded->key_size(b) != blob.key_size() ||
        decoded->value_bytes_size(b) != blob.value_bytes_size() ||
        decoded->value_crc32c_size(b) != blob.value_crc32c_size()) {
      continue;
    }
    for (int k = 0; k < blob.key_size(); ++k) {
      EXPECT_EQ(decoded->key(b, k), blob.key(k));
    }
    for (int k = 0; k < blob.value_bytes_size(); ++k) {
      EXPECT_EQ(decoded->value_bytes(b, k), blob.value_bytes(k));
    }
    for (int k = 0; k < blob.value_crc32c_size(); ++k) {
      EXPECT_EQ(decoded->value_crc32c(b, k), blob.value_crc32c(k));
    }
  }
  return true;
}

// What Save writes for a tensor "a" in one value, a tensor "b" in two
// chunks, and a string "c".
std::string SavedIndex() {
  BlobIndexBuilder builder("trainer_0", 7);
  builder.SetFilesListed(true);
  CheckpointBlobInfo* a = builder.StartBlob();
  a->set_name("a");
  a->set_type("Tensor");
  a->add_dims(2);
  a->add_dims(3);
  a->set_data_type(DataType::FLOAT);
  builder.AddValue("a", "aaaa");
  CheckpointBlobInfo* b = builder.StartBlob();
  b->set_name("b");
  b->set_type("Tensor");
  builder.AddValue("b#%0", "bb");
  builder.AddValue("b#%1", "");
  builder.StartBlob()->set_name("c");
  builder.AddValue("c", "ccc");
  return builder.Finish().value();
}

TEST(CompactBlobIndexTest, ReadsWhatSaveWrites) {
  const std::string bytes = SavedIndex();
  std::optional<CompactBlobIndex> index = CompactBlobIndex::Decode(bytes);
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->format_version(), kBlobIndexFormatVersion);
  EXPECT_EQ(index->node(), "trainer_0");
  EXPECT_EQ(index->epoch(), 7);
  EXPECT_EQ(index->total_bytes(), 9);
  EXPECT_TRUE(index->files_listed());
  ASSERT_EQ(index->blob_size(), 3);
  EXPECT_EQ(index->name(0), "a");
  EXPECT_EQ(index->name(1), "b");
  EXPECT_EQ(index->name(2), "c");
  ASSERT_EQ(index->key_size(1), 2);
  EXPECT_EQ(index->key(1, 0), "b#%0");
  EXPECT_EQ(index->key(1, 1), "b#%1");
  EXPECT_EQ(index->value_bytes(1, 0), 2);
  EXPECT_EQ(index->value_bytes(1, 1), 0);
  EXPECT_EQ(index->value_crc32c(1, 0), Crc32c("bb"));
  EXPECT_EQ(index->value_crc32c(2, 0), Crc32c("ccc"));
  const CheckpointBlobInfo a = index->Entry(0);
  EXPECT_EQ(a.type(), "Tensor");
  EXPECT_EQ(a.dims_size(), 2);
  EXPECT_EQ(a.data_type(), DataType::FLOAT);
  EXPECT_EQ(index->ToProto().SerializeAsString(), bytes);
  EXPECT_TRUE(ExpectSameAsProtobuf(bytes));
  EXPECT_TRUE(ValidateBlobIndex(*index, "p").ok());
}

TEST(CompactBlobIndexTest, EmptyAndMovedIndexes) {
  const CompactBlobIndex empty;
  EXPECT_EQ(empty.blob_size(), 0);
  EXPECT_EQ(empty.node(), "");
  EXPECT_EQ(empty.ToProto().SerializeAsString(), "");
  std::optional<CompactBlobIndex> decoded = CompactBlobIndex::Decode("");
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->blob_size(), 0);

  // Short strings live inside a std::string; the views must survive moves.
  std::optional<CompactBlobIndex> index =
      CompactBlobIndex::Decode(SavedIndex());
  ASSERT_TRUE(index.has_value());
  CompactBlobIndex moved = *std::move(index);
  CompactBlobIndex again;
  again = std::move(moved);
  EXPECT_EQ(again.node(), "trainer_0");
  EXPECT_EQ(again.key(1, 1), "b#%1");
}

// Encodings protobuf reads that Save does not write: each decodes as
// protobuf parses it. Encodings protobuf refuses are refused.
TEST(CompactBlobIndexTest, OtherEncodingsReadAsProtobufReadsThem) {
  const std::string entry = std::string(
      "\x0a\x01"
      "x"  // name "x"
      "\x2a\x01"
      "x"                      // key "x"
      "\x30\x03"               // value_bytes 3, not packed
      "\x3d\x01\x02\x03\x04",  // value_crc32c, not packed
      13);
  auto index_of = [](const std::string& entry) {
    return absl::StrCat("\x08\x01", "\x22", std::string(1, entry.size()),
                        entry);
  };
  struct Case {
    std::string name;
    std::string bytes;
    bool parses;
  };
  const std::vector<Case> cases = {
      {"unpacked sizes and checksums", index_of(entry), true},
      {"a name given twice: the last wins",
       index_of(entry + std::string("\x0a\x01y", 3)), true},
      {"fields after the entries, node twice",
       index_of(entry) + std::string("\x12\x01n\x28\x03\x12\x01m", 8), true},
      {"an unknown varint field", index_of(entry) + std::string("\x48\x05", 2),
       true},
      {"an unknown field with a two-byte tag",
       index_of(entry) + std::string("\xa0\x01\x07", 3), true},
      {"an unknown field inside an entry",
       index_of(entry + std::string("\x40\x01", 2)), true},
      {"a known field with a two-byte tag",
       std::string("\x88\x00\x02", 3) + index_of(entry), true},
      {"packed dims and unpacked dims",
       index_of(entry + std::string("\x1a\x02\x01\x02\x18\x05", 6)), true},
      {"a negative format version in ten bytes",
       std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11), true},
      {"files_listed as 2", std::string("\x38\x02", 2), true},
      {"a packed checksum cut short",
       index_of(std::string("\x3a\x03\x01\x02\x03", 5)), false},
      {"a name that is not UTF-8", index_of(std::string("\x0a\x01\xff", 3)),
       false},
      {"a key that is not UTF-8", index_of(std::string("\x2a\x01\xc3", 3)),
       false},
      {"a node that is not UTF-8", std::string("\x12\x01\xff", 3), false},
      {"a cut-off entry", std::string("\x22\x05\x0a\x01", 4), false},
      {"a varint of eleven bytes",
       std::string("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
       false},
      {"an end-group tag alone", std::string("\x0c", 1), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BlobIndex parsed;
    ASSERT_EQ(parsed.ParseFromString(c.bytes), c.parses);
    EXPECT_EQ(ExpectSameAsProtobuf(c.bytes), c.parses);
  }
  // The last name wins, as in protobuf.
  EXPECT_EQ(
      CompactBlobIndex::Decode(index_of(entry + std::string("\x0a\x01y", 3)))
          ->name(0),
      "y");
}

// Random damage to a saved index: Decode agrees with protobuf every time.
TEST(CompactBlobIndexTest, DamagedIndexesReadAsProtobufReadsThem) {
  BlobIndexBuilder builder("trainer_0", 3);
  for (int i = 0; i < 20; ++i) {
    CheckpointBlobInfo* info = builder.StartBlob();
    info->set_name(absl::StrFormat("blob_%02d", i));
    info->set_type("Tensor");
    info->add_dims(i);
    for (int k = 0; k < i % 3 + 1; ++k) {
      builder.AddValue(absl::StrFormat("blob_%02d#%%%d", i, k),
                       std::string(i + k, 'v'));
    }
  }
  const std::string saved = builder.Finish().value();
  std::mt19937 random(20261125);
  int accepted = 0;
  int refused = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bytes = saved;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = random() % bytes.size();
      switch (random() % 4) {
        case 0:
          bytes[at] = static_cast<char>(random());
          break;
        case 1:
          bytes[at] ^= static_cast<char>(1 << (random() % 8));
          break;
        case 2:
          bytes.resize(at);
          break;
        default:
          bytes.insert(at, 1, static_cast<char>(random()));
          break;
      }
    }
    if (ExpectSameAsProtobuf(bytes)) {
      ++accepted;
    } else {
      ++refused;
    }
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial << ": " << absl::CHexEscape(bytes);
      return;
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/ops/blob_index.h"

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/db/memory_db.h"
#include "checkpoint/util/crc32c.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;

// A manifest for blob "w" in keys w#%0 and w#%1 holding "abc" and "de".
BlobIndex TwoKeyManifest() {
  BlobIndexBuilder builder("trainer_0", 7);
  CheckpointBlobInfo info;
  info.set_name("w");
  info.set_type("Tensor");
  builder.StartBlob(info);
  builder.AddValue("w#%0", "abc");
  builder.AddValue("w#%1", "de");
  BlobIndex index;
  CHECK(index.ParseFromString(builder.Finish().value()));
  return index;
}

TEST(BlobIndexTest, BuilderRecordsSizesAndChecksums) {
  const BlobIndex m = TwoKeyManifest();
  EXPECT_EQ(m.format_version(), kBlobIndexFormatVersion);
  EXPECT_EQ(m.node(), "trainer_0");
  EXPECT_EQ(m.epoch(), 7);
  EXPECT_GT(m.created_unix_micros(), 0);
  ASSERT_EQ(m.blob_size(), 1);
  EXPECT_THAT(m.blob(0).key(), ElementsAre("w#%0", "w#%1"));
  EXPECT_THAT(m.blob(0).value_bytes(), ElementsAre(3, 2));
  EXPECT_THAT(m.blob(0).value_crc32c(),
              ElementsAre(Crc32c("abc"), Crc32c("de")));
  EXPECT_EQ(m.total_bytes(), 5);
  EXPECT_TRUE(ValidateBlobIndex(m, "p").ok());
}

// The builder encodes each entry when the next one starts, re-using one
// message; its bytes must be the message's own serialization, and nothing of
// one entry may leak into the next (a tensor's dims into a non-tensor's).
TEST(BlobIndexTest, BuilderBytesAreTheIndexSerialized) {
  BlobIndexBuilder builder("ps_1", -3);
  builder.SetFilesListed(true);
  builder.ExpectBlobs(2);  // room reserved after the first entry
  CheckpointBlobInfo* a = builder.StartBlob();
  a->set_name("a");
  a->set_type("Tensor");
  a->add_dims(2);
  a->add_dims(3);
  a->set_data_type(DataType::FLOAT);
  builder.AddValue("a#%0", std::string(300, 'x'));
  builder.AddValue("a#%1", "y");
  CheckpointBlobInfo* b = builder.StartBlob();
  b->set_name("b");
  b->set_type("std::string");
  builder.AddValue("b", "");
  EXPECT_EQ(builder.total_bytes(), 301);
  const std::string bytes = builder.Finish().value();

  BlobIndex index;
  ASSERT_TRUE(index.ParseFromString(bytes));
  EXPECT_EQ(index.SerializeAsString(), bytes);
  EXPECT_EQ(index.node(), "ps_1");
  EXPECT_EQ(index.epoch(), -3);
  EXPECT_TRUE(index.files_listed());
  EXPECT_EQ(index.total_bytes(), 301);
  ASSERT_EQ(index.blob_size(), 2);
  EXPECT_THAT(index.blob(0).dims(), ElementsAre(2, 3));
  EXPECT_EQ(index.blob(0).data_type(), DataType::FLOAT);
  EXPECT_THAT(index.blob(0).key(), ElementsAre("a#%0", "a#%1"));
  EXPECT_THAT(index.blob(0).value_bytes(), ElementsAre(300, 1));
  EXPECT_EQ(index.blob(1).name(), "b");
  EXPECT_EQ(index.blob(1).type(), "std::string");
  EXPECT_THAT(index.blob(1).dims(), ElementsAre());
  EXPECT_EQ(index.blob(1).data_type(), DataType::UNDEFINED);
  EXPECT_THAT(index.blob(1).key(), ElementsAre("b"));
  EXPECT_THAT(index.blob(1).value_bytes(), ElementsAre(0));
  EXPECT_THAT(index.blob(1).value_crc32c(), ElementsAre(Crc32c("")));
  EXPECT_TRUE(ValidateBlobIndex(index, "p").ok());
}

// The room reserved after the first entry is capped: an expected count far
// beyond any real save (or a long first entry) must not ask for terabytes.
TEST(BlobIndexTest, ExpectingManyBlobsReservesABoundedRoom) {
  BlobIndexBuilder builder("n", 1);
  builder.ExpectBlobs(size_t{1} << 40);
  CheckpointBlobInfo* info = builder.StartBlob();
  info->set_name("a");
  for (int k = 0; k < 1000; ++k) {
    builder.AddValue(absl::StrCat("a#%", k), "x");
  }
  builder.StartBlob()->set_name("b");
  builder.AddValue("b", "y");
  BlobIndex index;
  ASSERT_TRUE(index.ParseFromString(builder.Finish().value()));
  EXPECT_EQ(index.blob_size(), 2);
  EXPECT_EQ(index.blob(0).key_size(), 1000);
  EXPECT_EQ(index.total_bytes(), 1001);
}

// A blob listed by reference: its entry as the holding database has it,
// with the epoch; the index says version 2 and adds up the referenced bytes
// and epochs, and the compact form reads them.
TEST(BlobIndexTest, BuilderListsReferencedBlobs) {
  BlobIndexBuilder builder("trainer_0", 7);
  builder.StartBlob()->set_name("a");
  builder.AddValue("a", "xyz");
  for (int64_t epoch : {5, 3, 5}) {
    CheckpointBlobInfo info;
    info.set_name(absl::StrCat("b", epoch, builder.total_bytes()));
    info.add_key(info.name());
    info.add_value_bytes(10);
    info.add_value_crc32c(99);
    info.set_stored_in_epoch(epoch);
    builder.AddReferenced(info);
  }
  const std::string bytes = builder.Finish().value();
  BlobIndex index;
  ASSERT_TRUE(index.ParseFromString(bytes));
  EXPECT_EQ(index.format_version(), kReferencingBlobIndexFormatVersion);
  EXPECT_EQ(index.total_bytes(), 33);
  EXPECT_EQ(index.referenced_bytes(), 30);
  EXPECT_THAT(index.referenced_epoch(), ElementsAre(3, 5));
  ASSERT_EQ(index.blob_size(), 4);
  EXPECT_FALSE(index.blob(0).has_stored_in_epoch());
  EXPECT_EQ(index.blob(1).stored_in_epoch(), 5);
  EXPECT_EQ(index.blob(2).stored_in_epoch(), 3);
  EXPECT_TRUE(ValidateBlobIndex(index, "db/x").ok());
  std::optional<CompactBlobIndex> compact = CompactBlobIndex::Decode(bytes);
  ASSERT_TRUE(compact.has_value());
  EXPECT_EQ(compact->referenced_bytes(), 30);
  EXPECT_THAT(compact->referenced_epochs(), ElementsAre(3, 5));
  EXPECT_FALSE(compact->referenced(0));
  EXPECT_TRUE(compact->referenced(1));
  EXPECT_EQ(compact->stored_in_epoch(1), 5);
  EXPECT_EQ(compact->stored_in_epoch(2), 3);
  EXPECT_EQ(compact->Entry(2).SerializeAsString(),
            index.blob(2).SerializeAsString());
}

TEST(BlobIndexTest, BuilderOfNoBlobsIsTheHeaderAndTotals) {
  BlobIndexBuilder builder("", 0);
  BlobIndex index;
  ASSERT_TRUE(index.ParseFromString(builder.Finish().value()));
  EXPECT_EQ(index.format_version(), kBlobIndexFormatVersion);
  EXPECT_EQ(index.blob_size(), 0);
  EXPECT_EQ(index.total_bytes(), 0);
  EXPECT_FALSE(index.files_listed());
}

TEST(BlobIndexTest, ValidationNamesWhatIsWrong) {
  struct Case {
    void (*damage)(BlobIndex*);
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](BlobIndex* m) { m->set_format_version(3); },
       absl::StatusCode::kFailedPrecondition,
       "checkpoint db/x has format version 3; this build reads versions 1 "
       "and 2. Use a newer jobgraph."},
      // References only in a version-2 index, only to earlier epochs, with
      // totals that add up.
      {[](BlobIndex* m) { m->mutable_blob(0)->set_stored_in_epoch(3); },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's entry of blob 'w' refers to epoch "
       "3, which cannot hold it; the database is damaged"},
      {[](BlobIndex* m) {
         m->set_format_version(2);
         m->mutable_blob(0)->set_stored_in_epoch(7);
       },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's entry of blob 'w' refers to epoch "
       "7, which cannot hold it; the database is damaged"},
      {[](BlobIndex* m) {
         m->set_format_version(2);
         m->mutable_blob(0)->set_stored_in_epoch(3);
         m->add_referenced_epoch(3);
       },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's referenced_bytes is 0 but its "
       "referenced values add up to 5; the database is damaged"},
      {[](BlobIndex* m) {
         m->set_format_version(2);
         m->mutable_blob(0)->set_stored_in_epoch(3);
         m->set_referenced_bytes(5);
         m->add_referenced_epoch(4);
       },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's list of referenced epochs does not "
       "match its blobs; the database is damaged"},
      {[](BlobIndex* m) { m->set_total_bytes(6); }, absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's total_bytes is 6 but its values add "
       "up to 5; the database is damaged"},
      {[](BlobIndex* m) { m->mutable_blob(0)->set_key(1, "v#%1"); },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's entry of blob 'w' lists key 'v#%1', "
       "which "
       "is not one of its keys; the database is damaged"},
      {[](BlobIndex* m) { m->mutable_blob(0)->set_key(1, "w#%0"); },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index lists key 'w#%0' twice; the database "
       "is damaged"},
      {[](BlobIndex* m) {
         m->mutable_blob(0)->mutable_value_crc32c()->RemoveLast();
       },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's entry of blob 'w' has 2 keys, 2 "
       "sizes and "
       "1 checksums; the database is damaged"},
      // Sizes whose sum wraps around to a matching total_bytes.
      {[](BlobIndex* m) {
         m->mutable_blob(0)->set_value_bytes(
             0, std::numeric_limits<int64_t>::max());
         m->mutable_blob(0)->set_value_bytes(1, 2);
         m->set_total_bytes(std::numeric_limits<int64_t>::min() + 1);
       },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index's entry of blob 'w' gives key 'w#%1' "
       "a size that makes the total overflow; the database is damaged"},
      {[](BlobIndex* m) { *m->add_blob() = m->blob(0); },
       absl::StatusCode::kDataLoss,
       "checkpoint db/x: the blob index lists blob 'w' twice; the database is "
       "damaged"},
  };
  for (const Case& c : cases) {
    BlobIndex m = TwoKeyManifest();
    c.damage(&m);
    absl::Status status = ValidateBlobIndex(m, "db/x");
    EXPECT_EQ(status.code(), c.code) << c.message;
    EXPECT_EQ(status.message(), c.message);
  }
}

class BlobIndexDbTest : public ::testing::Test {
 protected:
  void TearDown() override { memory_db::Clear(); }

  // Writes `pairs` as a memory database at `path` and opens it for reading.
  std::unique_ptr<DB> MakeDb(
      const std::string& path,
      const std::vector<std::pair<std::string, std::string>>& pairs) {
    {
      std::unique_ptr<DB> db =
          *DbRegistry::Global().Open("memory", path, DbMode::kNew);
      {
        std::unique_ptr<Writer> writer = *db->NewWriter();
        for (const auto& [key, value] : pairs) {
          CHECK(writer->Put(key, value).ok());
        }
      }
      CHECK(db->Close().ok());
    }
    return *DbRegistry::Global().Open("memory", path, DbMode::kRead);
  }
};

TEST_F(BlobIndexDbTest, ReadAndScan) {
  const std::string manifest = TwoKeyManifest().SerializeAsString();
  std::unique_ptr<DB> db = MakeDb("good", {{"w#%0", "abc"},
                                           {"w#%1", "de"},
                                           {"other", "x"},
                                           {kBlobIndexKey, manifest}});
  absl::StatusOr<BlobIndex> message = ReadBlobIndex(db.get());
  ASSERT_TRUE(message.ok()) << message.status();
  EXPECT_EQ(message->SerializeAsString(), manifest);
  absl::StatusOr<CompactBlobIndex> read = ReadCompactBlobIndex(db.get());
  ASSERT_TRUE(read.ok()) << read.status();

  std::vector<std::string> seen;
  ASSERT_TRUE(ScanDbValues(db.get(), *read, {0}, true,
                           [&](int b, int k, absl::string_view value) {
                             seen.push_back(
                                 absl::StrCat(b, ":", k, "=", value));
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_THAT(seen, ElementsAre("0:0=abc", "0:1=de"));
  // Nothing wanted: nothing read.
  ASSERT_TRUE(
      ScanDbValues(db.get(), *read, {}, true, [&](int, int, absl::string_view) {
        return absl::InternalError("called");
      }).ok());
  EXPECT_TRUE(VerifyDb(db.get(), VerifyDepth::kValuesAndFiles).ok());
  // VerifyDbAt opens the database itself, which `db` still holds open.
  EXPECT_EQ(VerifyDbAt("memory", "good", VerifyDepth::kValues).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(BlobIndexDbTest, DamageIsDataLossNamingTheKey) {
  const std::string manifest = TwoKeyManifest().SerializeAsString();
  std::unique_ptr<DB> db = MakeDb(
      "bad", {{"w#%0", "abd"}, {"w#%1", "d"}, {kBlobIndexKey, manifest}});
  absl::StatusOr<CompactBlobIndex> verified =
      VerifyDb(db.get(), VerifyDepth::kValuesAndFiles);
  EXPECT_EQ(verified.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(verified.status().message(),
            "checkpoint bad: value of key 'w#%0' (blob 'w') fails its CRC-32C "
            "check; the database is damaged");
  // Without CRC checks, sizes are still checked.
  absl::Status status = ScanDbValues(
      db.get(), *ReadCompactBlobIndex(db.get()), {0}, false,
      [](int, int, absl::string_view) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            "checkpoint bad: value of key 'w#%1' (blob 'w') has 1 bytes, but "
            "the blob index says 2; the database is damaged");
}

TEST_F(BlobIndexDbTest, MissingOrGarbledManifest) {
  std::unique_ptr<DB> db = MakeDb("none", {{"w#%0", "abc"}});
  absl::StatusOr<BlobIndex> read = ReadBlobIndex(db.get());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read.status().message(),
            "none has no blob index: it was not written completely by "
            "jobgraph's Save");

  db = MakeDb("garbled", {{kBlobIndexKey, "\xff\xff\xff"}});
  read = ReadBlobIndex(db.get());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(read.status().message(),
            "checkpoint garbled: its blob index does not parse; the "
            "database is damaged");
}

// An index of many blobs reads as protobuf parses it, and a damaged entry
// among them is damage.
TEST_F(BlobIndexDbTest, AnIndexOfManyBlobsReadsAsOneParse) {
  BlobIndexBuilder builder("trainer_0", 3);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < 10000; ++i) {
    const std::string name = absl::StrFormat("blob_%05d", i);
    CheckpointBlobInfo* info = builder.StartBlob();
    info->set_name(name);
    info->set_type("Tensor");
    info->add_dims(i % 7);
    builder.AddValue(name, absl::StrCat("v", i));
  }
  const std::string bytes = builder.Finish().value();
  std::unique_ptr<DB> db = MakeDb("many", {{kBlobIndexKey, bytes}});
  absl::StatusOr<BlobIndex> read = ReadBlobIndex(db.get());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->blob_size(), 10000);
  EXPECT_EQ(read->blob(9999).name(), "blob_09999");
  EXPECT_EQ(read->SerializeAsString(), bytes);
  absl::StatusOr<CompactBlobIndex> compact = ReadCompactBlobIndex(db.get());
  ASSERT_TRUE(compact.ok()) << compact.status();
  EXPECT_EQ(compact->blob_size(), 10000);
  EXPECT_EQ(compact->name(9999), "blob_09999");
  EXPECT_EQ(compact->key(9999, 0), "blob_09999");
  EXPECT_EQ(compact->value_bytes(9999, 0), 5);
  EXPECT_EQ(compact->value_crc32c(9999, 0), Crc32c("v9999"));
  EXPECT_EQ(compact->Entry(9998).dims(0), 9998 % 7);

  // One more entry whose payload is a cut-off tag does not parse.
  db = MakeDb("many_bad",
              {{kBlobIndexKey, bytes + std::string("\x22\x01\xff")}});
  // An empty entry whose tag is encoded in 6 bytes, longer than protobuf
  // allows, is refused as protobuf's parser refuses it ("does not parse"),
  // instead of read as an entry without a name.
  std::unique_ptr<DB> long_tag =
      MakeDb("many_long_tag",
             {{kBlobIndexKey,
               bytes + std::string("\xa2\x80\x80\x80\x80\x00\x00", 7)}});
  EXPECT_EQ(ReadCompactBlobIndex(long_tag.get()).status().message(),
            "checkpoint many_long_tag: its blob index does not parse; the "
            "database is damaged");
  for (DB* damaged : {db.get(), long_tag.get()}) {
    for (const absl::Status& status :
         {ReadBlobIndex(damaged).status(),
          ReadCompactBlobIndex(damaged).status()}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
      EXPECT_EQ(status.message(),
                absl::StrCat("checkpoint ", damaged->path(),
                             ": its blob index does not parse; the "
                             "database is damaged"));
    }
  }
}

}  // namespace
}  // namespace jobgraph

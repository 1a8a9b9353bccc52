// Reader positions through the serialization registry: every cursor type
// round-trips, and a job checkpointed between epochs, in the middle of a pass
// over its data, and restored into a fresh session reads exactly the records
// an uninterrupted job reads.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/data/data_test_util.h"
#include "engine/data/dataset.h"
#include "engine/data/file_cursor.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/data/shuffle.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/text_file.h"
#include "engine/data/tree_cursor.h"
#include "engine/serialization.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::CheckpointAndRestore;
using ::jobgraph::data_test::CollectedInts;
using ::jobgraph::data_test::CollectedStrings;
using ::jobgraph::data_test::FetchBool;
using ::jobgraph::data_test::FetchInt;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kNode[] = "trainer_0";

// Serializes `blob` as `name` through the registry; returns the one value.
BlobProto SerializeOne(const std::string& name, const Blob& blob,
                       std::string* value) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
      SerializeBlobToPairs(name, blob);
  EXPECT_TRUE(pairs.ok()) << pairs.status();
  BlobProto proto;
  if (!pairs.ok() || pairs->size() != 1) return proto;
  EXPECT_EQ((*pairs)[0].first, name);
  *value = (*pairs)[0].second;
  EXPECT_TRUE(proto.ParseFromString(*value));
  return proto;
}

TEST(CursorSerializationTest, TreeCursorMidData) {
  Blob blob;
  TreeCursor* cursor = blob.Reset(
      std::make_unique<TreeCursor>(std::vector<std::string>{"val", "w"}));
  ASSERT_TRUE(cursor->Advance(3, 10).ok());
  std::string value;
  BlobProto proto = SerializeOne("dataset:0_cursor", blob, &value);
  EXPECT_EQ(proto.type(), "std::unique_ptr<TreeCursor>");
  EXPECT_EQ(proto.content(), "val w ");
  EXPECT_THAT(proto.tensor().dims(), ElementsAre(1));
  EXPECT_EQ(proto.tensor().data_type(), INT64);
  EXPECT_EQ(FindBlobSerializer(std::type_index(typeid(TreeCursor))),
            FindBlobSerializer("std::unique_ptr<TreeCursor>"));
  EXPECT_EQ(blob.TypeName(), "std::unique_ptr<TreeCursor>");

  Blob restored;
  ASSERT_TRUE(DeserializeBlob("dataset:0_cursor", value, &restored).ok());
  ASSERT_TRUE(restored.IsType<TreeCursor>());
  TreeCursor& r = *restored.GetMutable<TreeCursor>();
  EXPECT_THAT(r.fields(), ElementsAre("val", "w"));
  EXPECT_EQ(r.offset(), 3);
  absl::StatusOr<std::pair<int64_t, int64_t>> next = r.Advance(3, 10);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, std::make_pair(int64_t{3}, int64_t{6}));
}

TEST(CursorSerializationTest, CaffeTwoCursorThatNeverReadLoadsAtZero) {
  BlobProto proto;
  proto.set_name("c");
  proto.set_type("std::unique_ptr<TreeCursor>");
  proto.set_content("val ");
  Blob restored;
  ASSERT_TRUE(DeserializeBlob("c", proto.SerializeAsString(), &restored).ok());
  EXPECT_EQ(restored.Get<TreeCursor>().offset(), 0);
  // Caffe2 wrote offsets in int64_data.
  proto.mutable_tensor()->add_dims(1);
  proto.mutable_tensor()->set_data_type(INT64);
  proto.mutable_tensor()->add_int64_data(7);
  ASSERT_TRUE(DeserializeBlob("c", proto.SerializeAsString(), &restored).ok());
  EXPECT_EQ(restored.Get<TreeCursor>().offset(), 7);
  // Nested records are not supported, and say so.
  proto.mutable_tensor()->set_dims(0, 2);
  proto.mutable_tensor()->add_int64_data(1);
  absl::Status s = DeserializeBlob("c", proto.SerializeAsString(), &restored);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("'c'"));
}

TEST(CursorSerializationTest, ShuffleCursorMidEpoch) {
  Blob blob;
  ShuffleCursor::State state;
  state.seed = ~uint64_t{0} - 5;  // the top bit set survives the int64 trip
  state.epoch = 3;
  ShuffleCursor* cursor = blob.Reset(
      std::make_unique<ShuffleCursor>(std::vector<std::string>{"val"}, state));
  std::vector<int64_t> rows;
  ASSERT_TRUE(cursor->NextBatch(4, 10, &rows).ok());
  std::string value;
  BlobProto proto = SerializeOne("s", blob, &value);
  EXPECT_EQ(proto.type(), "std::unique_ptr<ShuffleCursor>");
  EXPECT_THAT(proto.tensor().dims(), ElementsAre(5));

  Blob restored;
  ASSERT_TRUE(DeserializeBlob("s", value, &restored).ok());
  ShuffleCursor& r = *restored.GetMutable<ShuffleCursor>();
  ShuffleCursor::State s = r.state();
  EXPECT_EQ(s.seed, state.seed);
  EXPECT_EQ(s.epoch, 3);
  EXPECT_EQ(s.position, 4);
  EXPECT_EQ(s.num_rows, 10);
  EXPECT_FALSE(s.exhausted);
  // Both continue with the same rows: positions 4..9 of epoch 3's order.
  std::vector<int64_t> a, b;
  ASSERT_TRUE(cursor->NextBatch(100, 10, &a).ok());
  ASSERT_TRUE(r.NextBatch(100, 10, &b).ok());
  const std::vector<int64_t> order = ShufflePermutation(state.seed, 3, 10);
  EXPECT_EQ(a, std::vector<int64_t>(order.begin() + 4, order.end()));
  EXPECT_EQ(b, a);
}

TEST(CursorSerializationTest, CorruptShuffleCursorIsDataLoss) {
  BlobProto proto;
  proto.set_name("s");
  proto.set_type("std::unique_ptr<ShuffleCursor>");
  proto.mutable_tensor()->add_dims(5);
  proto.mutable_tensor()->set_data_type(INT64);
  for (int64_t v : {1, 0, 11, 10, 0}) proto.mutable_tensor()->add_int64_data(v);
  Blob restored;
  absl::Status s = DeserializeBlob("s", proto.SerializeAsString(), &restored);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("position 11"));
}

TEST(CursorSerializationTest, FileCursorMidFile) {
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/cursor.txt");
  std::ofstream(path) << "a\nbb\nccc\n";
  Blob blob;
  FileCursor* cursor = blob.Reset(std::make_unique<FileCursor>(path));
  std::vector<std::string> lines;
  ASSERT_TRUE(cursor->ReadLines(1, 64, &lines).ok());
  std::string value;
  BlobProto proto = SerializeOne("f", blob, &value);
  EXPECT_EQ(proto.type(), "std::unique_ptr<FileCursor>");
  EXPECT_EQ(proto.content(), path);

  Blob restored;
  ASSERT_TRUE(DeserializeBlob("f", value, &restored).ok());
  FileCursor& r = *restored.GetMutable<FileCursor>();
  EXPECT_EQ(r.path(), path);
  EXPECT_EQ(r.offset(), 2);
  ASSERT_TRUE(r.ReadLines(5, 64, &lines).ok());
  EXPECT_THAT(lines, ElementsAre("bb", "ccc"));
}

// ---------------------------------------------------------------------------
// Whole jobs: run `epochs` epochs uninterrupted, and again checkpointing after
// every possible epoch k and finishing in a fresh session from the restored
// root workspace. The records read must be the same, in the same order.

struct Job {
  TaskGroup init{"init", GLOBAL};
  TaskGroup epoch{"epoch", PRIVATE};
  BlobRef data_finished;
};

// Builds a job whose pipe records what it reads under `tag`.
using JobFactory = std::function<std::unique_ptr<Job>(const std::string& tag)>;

// Runs epochs until data_finished (at most `max_epochs`); returns the count.
int RunEpochs(LocalSession& session, const Job& job, int max_epochs) {
  for (int e = 1; e <= max_epochs; ++e) {
    absl::Status s = session.Run(job.epoch);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok() || *FetchBool(session, kNode, job.data_finished.name())) {
      return e;
    }
  }
  return max_epochs;
}

template <typename T>
std::vector<T> Collected(const std::string& tag);
template <>
std::vector<int64_t> Collected(const std::string& tag) {
  return CollectedInts(tag);
}
template <>
std::vector<std::string> Collected(const std::string& tag) {
  return CollectedStrings(tag);
}

template <typename T>
void ExpectResumesExactly(const JobFactory& make, int expected_epochs) {
  data_test::ClearCollected();
  auto reference = make("reference");
  LocalSession uninterrupted;
  ASSERT_TRUE(uninterrupted.Run(reference->init).ok());
  ASSERT_EQ(RunEpochs(uninterrupted, *reference, 100), expected_epochs);
  const std::vector<T> expected = Collected<T>("reference");

  for (int k = 1; k < expected_epochs; ++k) {
    SCOPED_TRACE(absl::StrCat("checkpoint after epoch ", k));
    const std::string tag = absl::StrCat("resumed_", k);
    auto job = make(tag);
    LocalSession before;
    ASSERT_TRUE(before.Run(job->init).ok());
    ASSERT_EQ(RunEpochs(before, *job, k), k);
    // The restored job skips the init group, as JobRunner does on resume.
    LocalSession after;
    absl::StatusOr<std::vector<std::string>> moved =
        CheckpointAndRestore(before, after, kNode);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_EQ(RunEpochs(after, *job, 100), expected_epochs - k);
    EXPECT_EQ(Collected<T>(tag), expected);
  }
}

TEST(ResumeTest, DatasetCursorTotals) {
  // The checkpoint_test walk-through: resuming from each epoch ends at 145,
  // and the checkpoint of epoch k holds EXPECTED_TOTALS[k - 1].
  const int64_t totals[] = {103, 115, 136, 145};
  for (int k = 1; k <= 4; ++k) {
    SCOPED_TRACE(k);
    TaskGroup init("init", GLOBAL);
    Task& t = init.NewTask(Node(kNode));
    Record rec = ConstRecord(t.net(), {{"val", Tensor::Iota<int64_t>(10)}});
    Reader reader = Dataset(rec, "dataset:0").NewReader(t.net());
    BlobRef total = t.net().Const<int64_t>("total", {100});
    ReaderWithLimit limited(reader, 3);
    TaskGroup epoch("epoch", PRIVATE);
    Pipe(epoch, Node(kNode), limited, [&](NetBuilder& net, const Record& row) {
      net.Add(total, row.Field("val"), total);
    });
    LocalSession before;
    ASSERT_TRUE(before.Run(init).ok());
    for (int e = 0; e < k; ++e) ASSERT_TRUE(before.Run(epoch).ok());
    LocalSession after;
    absl::StatusOr<std::vector<std::string>> moved =
        CheckpointAndRestore(before, after, kNode);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_THAT(*moved, ElementsAre("dataset:0/limit/data_finished",
                                    "dataset:0_cursor", "total", "val"));
    EXPECT_EQ(*FetchInt(after, kNode, "total"), totals[k - 1]);
    // JobRunner runs an epoch before it looks at the stop condition.
    int epochs = k;
    do {
      ASSERT_TRUE(after.Run(epoch).ok());
      ASSERT_LE(++epochs, 10);
    } while (!*FetchBool(after, kNode, limited.data_finished().name()));
    EXPECT_EQ(epochs, k == 4 ? 5 : 4);
    EXPECT_EQ(*FetchInt(after, kNode, "total"), 145);
  }
}

TEST(ResumeTest, DatasetCursorRecords) {
  ExpectResumesExactly<int64_t>(
      [](const std::string& tag) {
        auto job = std::make_unique<Job>();
        Task& t = job->init.NewTask(Node(kNode));
        Record rec = ConstRecord(t.net(), {{"val", Tensor::Iota<int64_t>(23)}});
        ReaderWithLimit limited(Dataset(rec, "dataset:0").NewReader(t.net(), 2),
                                3);
        Pipe(job->epoch, Node(kNode), limited,
             [&](NetBuilder& net, const Record& batch) {
               data_test::CollectRows(net, batch.Field("val"), tag);
             });
        job->data_finished = limited.data_finished();
        return job;
      },
      5);
}

TEST(ResumeTest, ShuffledReaderMidEpoch) {
  ExpectResumesExactly<int64_t>(
      [](const std::string& tag) {
        auto job = std::make_unique<Job>();
        Task& t = job->init.NewTask(Node(kNode));
        Record rec = ConstRecord(t.net(), {{"val", Tensor::Iota<int64_t>(50)}});
        ReaderWithLimit limited(
            Dataset(rec, "dataset:0").NewShuffledReader(t.net(), 2024, 3), 4);
        Pipe(job->epoch, Node(kNode), limited,
             [&](NetBuilder& net, const Record& batch) {
               data_test::CollectRows(net, batch.Field("val"), tag);
             });
        job->data_finished = limited.data_finished();
        return job;
      },
      5);
  // The order read is epoch 0's permutation, not the identity.
  EXPECT_EQ(CollectedInts("reference"), ShufflePermutation(2024, 0, 50));
}

TEST(ResumeTest, TextFileMidFile) {
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/resume_lines.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 40; ++i) out << "line " << i << "\n";
  }
  ExpectResumesExactly<std::string>(
      [&](const std::string& tag) {
        auto job = std::make_unique<Job>();
        Task& t = job->init.NewTask(Node(kNode));
        ReaderWithLimit limited(
            TextFile(path, "lines").NewReader(t.net(), 3, 16), 4);
        Pipe(job->epoch, Node(kNode), limited,
             [&](NetBuilder& net, const Record& batch) {
               data_test::CollectRows(net, batch.Field("line"), tag);
             });
        job->data_finished = limited.data_finished();
        return job;
      },
      4);
  EXPECT_EQ(CollectedStrings("reference").size(), 40u);
  EXPECT_EQ(CollectedStrings("reference")[39], "line 39");
}

}  // namespace
}  // namespace jobgraph

// Records, Dataset readers and their ops: batch shapes and contents, the
// end-of-data signal, enforce_batch_size, Reset, and the errors that name
// the offending blob.

#include "engine/data/dataset.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/data/data_test_util.h"
#include "engine/data/pipe.h"
#include "engine/data/reader.h"
#include "engine/data/record.h"
#include "engine/data/tree_cursor.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::jobgraph::data_test::CollectedInts;
using ::jobgraph::data_test::FetchInt;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kNode[] = "node";

std::vector<int64_t> Shape(const Tensor& t) { return t.shape(); }

TEST(RecordTest, ConstRecordNamesBlobsAfterFields) {
  TaskGroup group("g", GLOBAL);
  Task& task = group.NewTask(Node(kNode));
  Record rec = ConstRecord(
      task.net(), {{"val", Tensor::Iota<int64_t>(3)},
                   {"name", Tensor::FromVector<std::string>({"a", "b", "c"})}});
  EXPECT_THAT(rec.field_names(), ElementsAre("val", "name"));
  EXPECT_EQ(rec.Field("val").name(), "val");
  EXPECT_EQ(rec.Field("name").name(), "name");
  EXPECT_EQ(rec.Field("val").node(), kNode);
  EXPECT_TRUE(rec.HasField("name"));
  EXPECT_FALSE(rec.HasField("other"));
  LocalSession session;
  ASSERT_TRUE(session.Run(group).ok());
  absl::StatusOr<Tensor> name = session.FetchBlob(kNode, "name");
  ASSERT_TRUE(name.ok());
  EXPECT_THAT(name->values<std::string>(), ElementsAre("a", "b", "c"));
}

TEST(RecordDeathTest, MissingFieldNamesTheFieldsItHas) {
  Record rec;
  rec.AddField("val", BlobRef("val"));
  EXPECT_DEATH(rec.Field("value"), "no field 'value'.*val");
}

// A dataset in a GLOBAL init group and a GLOBAL "read" group whose task reads
// one batch per run, leaving it in the root workspace to fetch.
class DatasetReaderTest : public ::testing::Test {
 protected:
  void Build(std::vector<std::pair<std::string, Tensor>> fields,
             int64_t batch_size, bool enforce_batch_size = false) {
    Task& init = init_.NewTask(Node(kNode));
    Record rec = ConstRecord(init.net(), fields);
    reader_ = Dataset(rec, "ds").NewReader(init.net(), batch_size,
                                           enforce_batch_size);
    Task& read = read_.NewTask(Node(kNode));
    batch_ = reader_.ReadEx(read.instance_init_net(), read.instance_exit_net(),
                            read.net());
    reader_.Reset(rewind_.NewTask(Node(kNode)).net());
    ASSERT_TRUE(session_.Run(init_).ok());
  }

  // Reads one batch; returns field `field` of it.
  Tensor Read(const std::string& field = "val") {
    absl::Status s = session_.Run(read_);
    EXPECT_TRUE(s.ok()) << s;
    absl::StatusOr<Tensor> t =
        session_.FetchBlob(kNode, batch_.record.Field(field).name());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  }

  bool Empty() {
    absl::StatusOr<Tensor> t =
        session_.FetchBlob(kNode, batch_.should_stop.name());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() && t->scalar<bool>();
  }

  int64_t CursorOffset() {
    return session_.NodeWorkspace(kNode)
        ->GetBlob("ds_cursor")
        ->Get<TreeCursor>()
        .offset();
  }

  TaskGroup init_{"init", GLOBAL};
  TaskGroup read_{"read", GLOBAL};
  TaskGroup rewind_{"rewind", GLOBAL};
  Reader reader_;
  ReadResult batch_;
  LocalSession session_;
};

TEST_F(DatasetReaderTest, BatchesOfFourOverTenRows) {
  Build({{"val", Tensor::Iota<int64_t>(10)}}, 4);
  EXPECT_EQ(reader_.name(), "ds");
  EXPECT_EQ(batch_.record.Field("val").name(), "ds/read/val");
  EXPECT_EQ(batch_.should_stop.name(), "ds/read/empty");
  EXPECT_THAT(Read().values<int64_t>(), ElementsAre(0, 1, 2, 3));
  EXPECT_FALSE(Empty());
  EXPECT_THAT(Read().values<int64_t>(), ElementsAre(4, 5, 6, 7));
  EXPECT_FALSE(Empty());
  EXPECT_THAT(Read().values<int64_t>(), ElementsAre(8, 9));
  EXPECT_FALSE(Empty());
  EXPECT_EQ(CursorOffset(), 10);
  for (int i = 0; i < 2; ++i) {
    Tensor t = Read();
    EXPECT_THAT(Shape(t), ElementsAre(0));
    EXPECT_TRUE(Empty());
  }
  EXPECT_EQ(CursorOffset(), 10);
}

TEST_F(DatasetReaderTest, FieldsOfSeveralTypesAndDimensions) {
  Build({{"val", Tensor::Iota<int64_t>(3)},
         {"xy", Tensor::FromVector<float>({0, 1, 10, 11, 20, 21}, {3, 2})},
         {"name", Tensor::FromVector<std::string>({"a", "b", "c"})}},
        2);
  Tensor xy = Read("xy");
  EXPECT_THAT(Shape(xy), ElementsAre(2, 2));
  EXPECT_THAT(xy.values<float>(), ElementsAre(0, 1, 10, 11));
  absl::StatusOr<Tensor> name =
      session_.FetchBlob(kNode, batch_.record.Field("name").name());
  ASSERT_TRUE(name.ok());
  EXPECT_THAT(name->values<std::string>(), ElementsAre("a", "b"));
  xy = Read("xy");
  EXPECT_THAT(Shape(xy), ElementsAre(1, 2));
  EXPECT_THAT(xy.values<float>(), ElementsAre(20, 21));
  EXPECT_THAT(Read("name").values<std::string>(), ElementsAre());
  EXPECT_THAT(Shape(Read("xy")), ElementsAre(0, 2));
  EXPECT_TRUE(Empty());
}

TEST_F(DatasetReaderTest, EnforceBatchSizeTurnsAShortBatchIntoTheEnd) {
  Build({{"val", Tensor::Iota<int64_t>(10)}}, 4, /*enforce_batch_size=*/true);
  EXPECT_EQ(Read().numel(), 4);
  EXPECT_EQ(Read().numel(), 4);
  EXPECT_EQ(Read().numel(), 0);
  EXPECT_TRUE(Empty());
  EXPECT_EQ(CursorOffset(), 10);
}

TEST_F(DatasetReaderTest, ResetRewinds) {
  Build({{"val", Tensor::Iota<int64_t>(3)}}, 2);
  Read();
  Read();
  EXPECT_EQ(Read().numel(), 0);
  ASSERT_TRUE(session_.Run(rewind_).ok());
  EXPECT_EQ(CursorOffset(), 0);
  EXPECT_THAT(Read().values<int64_t>(), ElementsAre(0, 1));
}

TEST_F(DatasetReaderTest, UnequalFieldLengthsAreAnErrorNamingTheField) {
  Build({{"val", Tensor::Iota<int64_t>(3)}, {"w", Tensor::Iota<float>(4)}}, 1);
  absl::Status s = session_.Run(read_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'w' has 4 rows"));
  EXPECT_THAT(s.message(), HasSubstr("'val' has 3"));
}

TEST_F(DatasetReaderTest, AScalarFieldIsAnError) {
  Build({{"val", Tensor::Scalar<int64_t>(3)}}, 1);
  absl::Status s = session_.Run(read_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'val' is a scalar"));
}

TEST(DatasetOpsTest, ReadingWithoutACursorNamesTheBlob) {
  TaskGroup group("g", GLOBAL);
  NetBuilder& net = group.NewTask(Node(kNode)).net();
  net.Const<int64_t>("not_a_cursor", {1});
  net.Const<int64_t>("val", {1, 2});
  net.Op("ReadNextBatch", {"not_a_cursor", "val"}, {"out"});
  LocalSession session;
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("input 'not_a_cursor' holds Tensor"));
  EXPECT_THAT(s.message(), HasSubstr("CreateTreeCursor"));
}

TEST(DatasetOpsTest, BadBatchSizeFailsWhenTheNetIsBuilt) {
  TaskGroup group("g", GLOBAL);
  NetBuilder& net = group.NewTask(Node(kNode)).net();
  Record rec = ConstRecord(net, {{"val", Tensor::Iota<int64_t>(3)}});
  Reader reader = Dataset(rec, "ds").NewReader(net, 0);
  reader.ReadEx(net, net, net);
  LocalSession session;
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'batch_size' must be positive"));
}

TEST(DatasetOpsTest, ACursorForOtherFieldsIsAnError) {
  TaskGroup group("g", GLOBAL);
  NetBuilder& net = group.NewTask(Node(kNode)).net();
  Record rec = ConstRecord(
      net, {{"a", Tensor::Iota<int64_t>(3)}, {"b", Tensor::Iota<int64_t>(3)}});
  net.Op("CreateTreeCursor", {}, {"cursor"},
         {MakeArg("fields", std::vector<std::string>{"a"})});
  net.Op("ReadNextBatch", {"cursor", "a", "b"}, {"x", "y"});
  LocalSession session;
  absl::Status s = session.Run(group);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("cursor 'cursor' was created for 1 fields"));
}

// A Dataset reader without a limit, piped: reads to the end in one run.
TEST(DatasetPipeTest, PipeDrainsTheReader) {
  TaskGroup init("init", GLOBAL);
  Task& init_task = init.NewTask(Node(kNode));
  Record rec =
      ConstRecord(init_task.net(), {{"val", Tensor::Iota<int64_t>(10)}});
  Reader reader = Dataset(rec, "dataset:0").NewReader(init_task.net(), 3);
  BlobRef total = init_task.net().Const<int64_t>("total", {100});
  TaskGroup epoch("epoch", PRIVATE);
  Task& pipe = Pipe(epoch, Node(kNode), reader,
                    [&](NetBuilder& net, const Record& batch) {
                      data_test::CollectRows(net, batch.Field("val"), "rows");
                    });
  EXPECT_TRUE(pipe.outputs().empty());
  LocalSession session;
  ASSERT_TRUE(session.Run(init).ok());
  ASSERT_TRUE(session.Run(epoch).ok());
  EXPECT_THAT(CollectedInts("rows"), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  ASSERT_TRUE(session.Run(epoch).ok());
  EXPECT_EQ(CollectedInts("rows").size(), 10u);
  EXPECT_EQ(*FetchInt(session, kNode, total.name()), 100);
}

}  // namespace
}  // namespace jobgraph

#include "checkpoint/ops/save_load_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/db/memory_db.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/operator.h"
#include "engine/serialization.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::TempDir;

// --- Building and running operators.

Argument Arg(absl::string_view name, absl::string_view value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_s(std::string(value));
  return arg;
}
Argument Arg(absl::string_view name, int64_t value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_i(value);
  return arg;
}
Argument Arg(absl::string_view name, const std::vector<std::string>& values) {
  Argument arg;
  arg.set_name(std::string(name));
  for (const std::string& v : values) arg.add_strings(v);
  return arg;
}

OperatorDef MakeOp(absl::string_view type,
                   const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs,
                   const std::vector<Argument>& args) {
  OperatorDef def;
  def.set_type(std::string(type));
  for (const std::string& in : inputs) def.add_input(in);
  for (const std::string& out : outputs) def.add_output(out);
  for (const Argument& arg : args) *def.add_arg() = arg;
  return def;
}

absl::Status RunOp(const OperatorDef& def, Workspace* ws) {
  absl::StatusOr<std::unique_ptr<OperatorBase>> op =
      OperatorRegistry::Global().Create(def, ws);
  if (!op.ok()) return op.status();
  return (*op)->Run();
}

absl::Status Save(Workspace* ws, const std::vector<std::string>& inputs,
                  const std::string& db, std::vector<Argument> args = {},
                  absl::string_view db_type = "leveldb") {
  args.push_back(Arg("db", db));
  args.push_back(Arg("db_type", db_type));
  return RunOp(MakeOp("Save", inputs, {}, args), ws);
}

absl::Status Load(Workspace* ws, const std::vector<std::string>& outputs,
                  std::vector<Argument> args,
                  absl::string_view db_type = "leveldb") {
  args.push_back(Arg("db_type", db_type));
  return RunOp(MakeOp("Load", {}, outputs, args), ws);
}

absl::StatusOr<bool> DbExists(Workspace* ws, const std::string& db,
                              absl::string_view db_type = "leveldb") {
  absl::Status status =
      RunOp(MakeOp("DBExists", {}, {"exists"},
                   {Arg("db_name", db), Arg("db_type", db_type)}),
            ws);
  if (!status.ok()) return status;
  return ws->GetTensor("exists").value()->scalar<bool>();
}

// --- Blob contents.

// Blobs of every serializable kind; "i64" spans many chunks at chunk_bytes
// = 64.
void FillWorkspace(Workspace* ws, int64_t seed = 0) {
  Tensor f(FLOAT, {3, 5});
  for (int64_t i = 0; i < f.numel(); ++i) {
    f.mutable_data<float>()[i] = 0.25f * static_cast<float>(i + seed) - 1.5f;
  }
  ws->SetTensor("f32", std::move(f));
  Tensor i64 = Tensor::Iota<int64_t>(1000);
  for (int64_t i = 0; i < i64.numel(); ++i) {
    i64.mutable_data<int64_t>()[i] = i * 1000003 + seed;
  }
  ws->SetTensor("i64", std::move(i64));
  ws->SetTensor("i32", Tensor::FromVector<int32_t>(
                           {-7, 0, static_cast<int32_t>(7 + seed)}, {3}));
  ws->SetTensor("f64", Tensor::FromVector<double>({1e300, -0.0, 3.5 + seed}));
  ws->SetTensor("u8", Tensor::FromVector<uint8_t>({0, 255, 17}));
  ws->SetTensor("flag", Tensor::Scalar<bool>(seed % 2 == 0));
  ws->SetTensor("empty", Tensor(INT64, {0, 4}));
  std::vector<std::string> words = {"", "alpha", std::string(300, 'z'),
                                    absl::StrCat("seed", seed)};
  ws->SetTensor("words", Tensor::FromVector(words, {2, 2}));
  ws->CreateBlob("text")->Reset(std::make_unique<std::string>(
      absl::StrCat(std::string("hello\0world", 11), seed)));
  ws->CreateBlob("counter")->Reset(std::make_unique<Counter>(42 + seed));
}

const std::vector<std::string> kAllBlobs = {"counter", "empty", "f32", "f64",
                                            "flag",    "i32",   "i64", "text",
                                            "u8",      "words"};

void ExpectSameBlobs(const Workspace& expected, const Workspace& actual,
                     const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Blob* want = expected.GetBlob(name);
    const Blob* got = actual.GetBlob(name);
    ASSERT_NE(want, nullptr);
    ASSERT_NE(got, nullptr);
    if (want->IsType<Tensor>()) {
      ASSERT_TRUE(got->IsType<Tensor>()) << got->TypeName();
      EXPECT_TRUE(want->Get<Tensor>().BitwiseEquals(got->Get<Tensor>()))
          << want->Get<Tensor>().DebugString() << " vs "
          << got->Get<Tensor>().DebugString();
    } else if (want->IsType<std::string>()) {
      ASSERT_TRUE(got->IsType<std::string>());
      EXPECT_EQ(want->Get<std::string>(), got->Get<std::string>());
    } else {
      ASSERT_TRUE(want->IsType<Counter>());
      ASSERT_TRUE(got->IsType<Counter>());
      EXPECT_EQ(want->Get<Counter>().Retrieve(),
                got->Get<Counter>().Retrieve());
    }
  }
}

std::vector<std::string> List(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  CHECK(names.ok()) << names.status();
  return *names;
}

class SaveLoadTest : public ::testing::Test {
 protected:
  void TearDown() override {
    Failpoints::DisableAll();
    WaitForBackgroundDeletes();
    memory_db::Clear();
  }

  TempDir dir_;
};

// --- Save and Load round trips.

TEST_F(SaveLoadTest, RoundTripOfEveryBlobKindThroughLevelDb) {
  Workspace ws(nullptr, "trainer_0");
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.3");
  ASSERT_TRUE(
      Save(&ws, kAllBlobs, db,
           {Arg("chunk_bytes", 64), Arg("node", "trainer_0"), Arg("epoch", 3)})
          .ok());
  // The final database and nothing else: no temporary is left behind.
  EXPECT_THAT(List(dir_.path()), ElementsAre("trainer_0.3"));

  Workspace loaded;
  absl::Status status = Load(&loaded, kAllBlobs, {Arg("db", db)});
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameBlobs(ws, loaded, kAllBlobs);
}

TEST_F(SaveLoadTest, ManifestListsEveryKeyWithSizeAndChecksum) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.3");
  const int64_t before = absl::ToUnixMicros(absl::Now());
  // Inputs out of order: blobs are written sorted by name.
  ASSERT_TRUE(
      Save(&ws, {"i64", "f32", "text", "counter", "words"}, db,
           {Arg("chunk_bytes", 64), Arg("node", "trainer_0"), Arg("epoch", 3)})
          .ok());
  const int64_t after = absl::ToUnixMicros(absl::Now());

  absl::StatusOr<std::unique_ptr<DB>> opened =
      DbRegistry::Global().Open("leveldb", db, DbMode::kRead);
  ASSERT_TRUE(opened.ok()) << opened.status();
  DB* reader = opened->get();
  absl::StatusOr<BlobIndex> read = ReadBlobIndex(reader);
  ASSERT_TRUE(read.ok()) << read.status();
  const BlobIndex& manifest = *read;
  EXPECT_EQ(manifest.format_version(), 1);
  EXPECT_EQ(manifest.node(), "trainer_0");
  EXPECT_EQ(manifest.epoch(), 3);
  EXPECT_GE(manifest.created_unix_micros(), before);
  EXPECT_LE(manifest.created_unix_micros(), after);

  ASSERT_EQ(manifest.blob_size(), 5);
  std::vector<std::string> names;
  for (const CheckpointBlobInfo& blob : manifest.blob()) {
    names.push_back(blob.name());
  }
  EXPECT_THAT(names, ElementsAre("counter", "f32", "i64", "text", "words"));

  const CheckpointBlobInfo& counter = manifest.blob(0);
  EXPECT_EQ(counter.type(), "std::unique_ptr<Counter<int64_t>>");
  EXPECT_THAT(counter.key(), ElementsAre("counter"));
  EXPECT_THAT(counter.dims(), IsEmpty());

  const CheckpointBlobInfo& f32 = manifest.blob(1);
  EXPECT_EQ(f32.type(), "Tensor");
  EXPECT_THAT(f32.dims(), ElementsAre(3, 5));
  EXPECT_EQ(f32.data_type(), FLOAT);
  // 15 floats, 16 per 64-byte chunk.
  EXPECT_THAT(f32.key(), ElementsAre("f32#%0"));

  // 8000 bytes of int64 in chunks of 64 bytes: 125 chunks, in the order
  // they were written, which is the bytewise order of their keys
  // (i64#%0, i64#%1, i64#%10, i64#%100, ...).
  const CheckpointBlobInfo& i64 = manifest.blob(2);
  EXPECT_EQ(i64.data_type(), INT64);
  EXPECT_THAT(i64.dims(), ElementsAre(1000));
  std::vector<std::string> expected_keys;
  for (int k = 0; k < 125; ++k)
    expected_keys.push_back(absl::StrCat("i64#%", k));
  std::sort(expected_keys.begin(), expected_keys.end());
  EXPECT_EQ(std::vector<std::string>(i64.key().begin(), i64.key().end()),
            expected_keys);
  EXPECT_EQ(i64.key(3), "i64#%100");

  EXPECT_EQ(manifest.blob(3).type(), "std::string");
  EXPECT_THAT(manifest.blob(3).key(), ElementsAre("text"));
  EXPECT_EQ(manifest.blob(4).data_type(), STRING);
  EXPECT_THAT(manifest.blob(4).dims(), ElementsAre(2, 2));

  // Sizes and checksums are those of the stored values, and the database
  // holds exactly the listed keys plus the manifest.
  int64_t total = 0;
  std::vector<std::string> listed = {kBlobIndexKey};
  for (const CheckpointBlobInfo& blob : manifest.blob()) {
    ASSERT_EQ(blob.value_bytes_size(), blob.key_size());
    ASSERT_EQ(blob.value_crc32c_size(), blob.key_size());
    for (int k = 0; k < blob.key_size(); ++k) {
      absl::StatusOr<std::string> value = reader->Get(blob.key(k));
      ASSERT_TRUE(value.ok()) << value.status();
      EXPECT_EQ(blob.value_bytes(k), static_cast<int64_t>(value->size()))
          << blob.key(k);
      EXPECT_EQ(blob.value_crc32c(k), Crc32c(*value)) << blob.key(k);
      total += value->size();
      listed.push_back(blob.key(k));
    }
  }
  EXPECT_EQ(manifest.total_bytes(), total);
  std::sort(listed.begin(), listed.end());
  std::vector<std::string> stored;
  std::unique_ptr<Cursor> cursor = reader->NewCursor();
  for (; cursor->Valid(); cursor->Next()) {
    stored.emplace_back(cursor->key());
  }
  ASSERT_TRUE(cursor->status().ok());
  cursor.reset();
  EXPECT_EQ(stored, listed);

  // VerifyDb agrees.
  absl::StatusOr<CompactBlobIndex> verified =
      VerifyDb(reader, VerifyDepth::kValuesAndFiles);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->ToProto().SerializeAsString(),
            manifest.SerializeAsString());
}

TEST_F(SaveLoadTest, ResavingAnEpochReplacesTheDatabase) {
  const std::string db = dir_.Join("trainer_0.1");
  Workspace first;
  FillWorkspace(&first, /*seed=*/1);
  ASSERT_TRUE(Save(&first, kAllBlobs, db).ok());
  Workspace second;
  FillWorkspace(&second, /*seed=*/2);
  // Only some blobs: the old database's other blobs must be gone too.
  absl::Status status = Save(&second, {"i64", "words"}, db);
  ASSERT_TRUE(status.ok()) << status;
  WaitForBackgroundDeletes();
  EXPECT_THAT(List(dir_.path()), ElementsAre("trainer_0.1"));

  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {}, {Arg("db", db), Arg("load_all", 1)}).ok());
  EXPECT_THAT(loaded.BlobNames(), ElementsAre("i64", "words"));
  ExpectSameBlobs(second, loaded, {"i64", "words"});
}

TEST_F(SaveLoadTest, SavingOverAnEmptyDirectoryReplacesIt) {
  const std::string db = dir_.Join("db");
  ASSERT_TRUE(CreateDir(db).ok());
  Workspace ws;
  FillWorkspace(&ws);
  ASSERT_TRUE(Save(&ws, {"f32"}, db).ok());
  EXPECT_THAT(List(dir_.path()), ElementsAre("db"));
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {"f32"}, {Arg("db", db)}).ok());
  ExpectSameBlobs(ws, loaded, {"f32"});
}

TEST_F(SaveLoadTest, SaveRefusesToReplaceWhatIsNotADatabase) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string file = dir_.Join("file");
  ASSERT_TRUE(WriteFileAtomically(file, "precious").ok());
  absl::Status status = Save(&ws, {"f32"}, file);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      status.message(),
      absl::StrCat("op Save(f32 -> ): saving checkpoint ", file, ": ", file,
                   " exists and is not a directory, so it is not a "
                   "database that saving may replace; remove it or "
                   "choose another path"));

  const std::string folder = dir_.Join("folder");
  ASSERT_TRUE(CreateDir(folder).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(folder, "notes"), "mine").ok());
  status = Save(&ws, {"f32"}, folder);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("is a non-empty directory that is not a LevelDB "
                        "database"));
  // Untouched, and no temporary left.
  EXPECT_THAT(List(dir_.path()), ElementsAre("file", "folder"));
  EXPECT_THAT(List(folder), ElementsAre("notes"));
}

TEST_F(SaveLoadTest, SaveNeedsTheParentDirectory) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("missing/trainer_0.0");
  absl::Status status = Save(&ws, {"f32"}, db);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Save(f32 -> ): saving checkpoint ", db,
                         ": the directory ", dir_.Join("missing"),
                         " that should hold checkpoint database ", db,
                         " does not exist; create it first (the checkpoint "
                         "manager does)"));
  EXPECT_THAT(List(dir_.path()), IsEmpty());
}

TEST_F(SaveLoadTest, BlobsWithoutSerializerFailBeforeAnythingIsWritten) {
  Workspace ws;
  FillWorkspace(&ws);
  ws.CreateBlob("opaque")->Reset(std::make_unique<int>(3));
  ws.CreateBlob("unset");
  const std::string db = dir_.Join("db");
  absl::Status status = Save(&ws, {"f32", "opaque"}, db);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("op Save(f32, opaque -> ): saving "
                                     "checkpoint ",
                                     db, ": blob 'opaque' holds ")));
  EXPECT_THAT(status.message(),
              HasSubstr("which has no registered serializer"));

  status = Save(&ws, {"unset"}, db);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Save(unset -> ): saving checkpoint ", db,
                         ": blob 'unset' is uninitialized, so there is "
                         "nothing to serialize"));
  EXPECT_THAT(List(dir_.path()), IsEmpty());
}

// --- Save arguments.

TEST_F(SaveLoadTest, StripPrefixDropsUpToTheFirstOccurrence) {
  Workspace ws;
  ws.SetTensor("scope/a", Tensor::FromVector<int64_t>({1}));
  ws.SetTensor("x/scope/b/scope/c", Tensor::FromVector<int64_t>({2}));
  ws.SetTensor("plain", Tensor::FromVector<int64_t>({3}));
  const std::string db = dir_.Join("db");
  ASSERT_TRUE(Save(&ws, {"scope/a", "x/scope/b/scope/c", "plain"}, db,
                   {Arg("strip_prefix", "scope/")})
                  .ok());
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {}, {Arg("db", db), Arg("load_all", 1)}).ok());
  EXPECT_THAT(loaded.BlobNames(), ElementsAre("a", "b/scope/c", "plain"));
  EXPECT_EQ(loaded.GetTensor("b/scope/c").value()->scalar<int64_t>(), 2);
}

TEST_F(SaveLoadTest, BlobNameOverridesRenameEachInput) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({1}));
  ws.SetTensor("y", Tensor::FromVector<int64_t>({2}));
  const std::string db = dir_.Join("db");
  ASSERT_TRUE(
      Save(&ws, {"x", "y"}, db,
           {Arg("blob_name_overrides", std::vector<std::string>{"q", "p"})})
          .ok());
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {"p", "q"}, {Arg("db", db)}).ok());
  EXPECT_EQ(loaded.GetTensor("p").value()->scalar<int64_t>(), 2);
  EXPECT_EQ(loaded.GetTensor("q").value()->scalar<int64_t>(), 1);
}

TEST_F(SaveLoadTest, SaveArgumentErrors) {
  Workspace ws;
  ws.SetTensor("a/x", Tensor::FromVector<int64_t>({1}));
  ws.SetTensor("b/x", Tensor::FromVector<int64_t>({2}));
  const std::string db = dir_.Join("db");

  absl::Status status =
      Save(&ws, {"a/x", "b/x"}, db,
           {Arg("strip_prefix", "/"),
            Arg("blob_name_overrides", std::vector<std::string>{"p", "q"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x, b/x -> ): blob_name_overrides and strip_prefix "
            "cannot be used together");

  status = Save(&ws, {"a/x", "b/x"}, db, {Arg("strip_prefix", "/")});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x, b/x -> ): duplicated blob name 'x' (inputs 'a/x' "
            "and 'b/x')");

  status = Save(&ws, {"a/x", "b/x"}, db,
                {Arg("blob_name_overrides", std::vector<std::string>{"p"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x, b/x -> ): blob_name_overrides has 1 names for 2 "
            "inputs");

  status =
      Save(&ws, {"a/x", "b/x"}, db,
           {Arg("blob_name_overrides", std::vector<std::string>{"p", "p"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x, b/x -> ): duplicated blob name 'p' (inputs 'a/x' "
            "and 'b/x')");

  status = Save(&ws, {"a/x"}, db,
                {Arg("blob_name_overrides",
                     std::vector<std::string>{"__jobgraph_manifest__"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x -> ): input 'a/x' would be stored under the name "
            "reserved for the database's blob index ('__jobgraph_manifest__')");

  status = Save(&ws, {"a/x"}, db, {Arg("chunk_size", 10)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x -> ): argument 'chunk_size' (elements) is not "
            "supported; chunks are bounded by 'chunk_bytes'");

  status = Save(&ws, {"a/x"}, db, {Arg("chunk_bytes", 0)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x -> ): chunk_bytes must be in [1, 1073741824], got 0");

  status = RunOp(MakeOp("Save", {"a/x"}, {}, {Arg("db_type", "leveldb")}), &ws);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save(a/x -> ): argument 'db' (the database path) is "
            "required");

  status = Save(&ws, {"a/x"}, db, {}, "rocksdb");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "op Save(a/x -> ): unknown db_type 'rocksdb'; known types: "
            "LevelDB, leveldb, memory");

  status = RunOp(
      MakeOp("Save", {}, {}, {Arg("db", db), Arg("db_type", "leveldb")}), &ws);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Save( -> ): expects at least 1 input(s), got 0");
  EXPECT_THAT(List(dir_.path()), IsEmpty());
}

// --- Load arguments.

class LoadTest : public SaveLoadTest {
 protected:
  void SetUp() override {
    FillWorkspace(&saved_);
    db_ = dir_.Join("trainer_0.0");
    ASSERT_TRUE(Save(&saved_, kAllBlobs, db_, {Arg("chunk_bytes", 256)}).ok());
  }

  Workspace saved_;
  std::string db_;
};

TEST_F(LoadTest, LoadsOnlyTheOutputs) {
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {"i64", "text"}, {Arg("db", db_)}).ok());
  EXPECT_THAT(loaded.BlobNames(), ElementsAre("i64", "text"));
  ExpectSameBlobs(saved_, loaded, {"i64", "text"});
}

TEST_F(LoadTest, SourceBlobNamesMapStoredNamesToOutputs) {
  Workspace loaded;
  ASSERT_TRUE(
      Load(&loaded, {"first", "second"},
           {Arg("db", db_), Arg("source_blob_names",
                                std::vector<std::string>{"f64", "counter"})})
          .ok());
  EXPECT_TRUE(saved_.GetTensor("f64").value()->BitwiseEquals(
      *loaded.GetTensor("first").value()));
  EXPECT_EQ(loaded.GetBlob("second")->Get<Counter>().Retrieve(), 42);
}

TEST_F(LoadTest, StripPrefixThenAddPrefix) {
  Workspace ws;
  ws.SetTensor("old/w", Tensor::FromVector<int64_t>({5, 6}));
  ws.SetTensor("old/b", Tensor::FromVector<int64_t>({7}));
  const std::string db = dir_.Join("prefixed");
  ASSERT_TRUE(Save(&ws, {"old/w", "old/b"}, db).ok());
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, {"new/w"},
                   {Arg("db", db), Arg("strip_prefix", "old/"),
                    Arg("add_prefix", "new/")})
                  .ok());
  EXPECT_THAT(loaded.BlobNames(), ElementsAre("new/w"));
  EXPECT_EQ(loaded.GetTensor("new/w").value()->DebugString(),
            "int64[2] {5, 6}");

  Workspace all;
  ASSERT_TRUE(Load(&all, {},
                   {Arg("db", db), Arg("load_all", 1), Arg("add_prefix", "p:")})
                  .ok());
  EXPECT_THAT(all.BlobNames(), ElementsAre("p:old/b", "p:old/w"));
}

TEST_F(LoadTest, LoadAllCreatesEveryStoredBlob) {
  Workspace loaded;
  // Outputs are ignored with load_all.
  ASSERT_TRUE(
      Load(&loaded, {"ignored"}, {Arg("db", db_), Arg("load_all", 1)}).ok());
  std::vector<std::string> expected = kAllBlobs;
  expected.push_back("ignored");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(loaded.BlobNames(), expected);
  EXPECT_FALSE(loaded.GetBlob("ignored")->IsInitialized());
  ExpectSameBlobs(saved_, loaded, kAllBlobs);
}

// A load is a new write, even of the same bytes into the same blobs: each
// loaded tensor takes a generation (Tensor::generation) no tensor had
// before, so that an incremental checkpoint sees it as changed. "i64" comes
// in many pieces (chunk_bytes 256), the others in one.
TEST_F(LoadTest, LoadedTensorsTakeNewGenerations) {
  const std::vector<std::string> tensors = {"empty", "f32", "f64", "flag",
                                            "i32",   "i64", "u8",  "words"};
  std::set<uint64_t> seen;
  Workspace loaded;
  for (const std::string& name : tensors) {
    // Copies keep the generation: the blobs start out as the saved tensors.
    const Tensor& saved = *saved_.GetTensor(name).value();
    loaded.SetTensor(name, saved);
    seen.insert(saved.generation());
  }
  for (int threads : {1, 1, 2}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    std::map<std::string, uint64_t> before;
    for (const std::string& name : tensors) {
      before[name] = loaded.GetTensor(name).value()->generation();
    }
    ASSERT_TRUE(
        Load(&loaded, kAllBlobs, {Arg("db", db_), Arg("threads", threads)})
            .ok());
    for (const std::string& name : tensors) {
      SCOPED_TRACE(name);
      const Tensor& t = *loaded.GetTensor(name).value();
      EXPECT_NE(t.generation(), before[name]);
      EXPECT_TRUE(seen.insert(t.generation()).second)
          << "generation " << t.generation() << " was held before the load";
      EXPECT_NE(t.generation(), 0u);
    }
    ExpectSameBlobs(saved_, loaded, tensors);
  }
}

TEST_F(LoadTest, MissingOutputsAreAnErrorUnlessAllowIncomplete) {
  Workspace loaded;
  absl::Status status =
      Load(&loaded, {"missing", "f32", "other"}, {Arg("db", db_)});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> missing, f32, other): expected to load "
                         "3 blobs from ",
                         db_, ", got 1; missing: missing, other"));

  Workspace partial;
  ASSERT_TRUE(Load(&partial, {"missing", "f32"},
                   {Arg("db", db_), Arg("allow_incomplete", 1)})
                  .ok());
  ASSERT_NE(partial.GetBlob("missing"), nullptr);
  EXPECT_FALSE(partial.GetBlob("missing")->IsInitialized());
  ExpectSameBlobs(saved_, partial, {"f32"});
}

TEST_F(LoadTest, ABlobInTwoDatabasesIsAnError) {
  const std::string other = dir_.Join("trainer_1.0");
  ASSERT_TRUE(Save(&saved_, {"f32", "u8"}, other).ok());
  Workspace loaded;
  absl::Status status =
      Load(&loaded, {"u8"}, {Arg("dbs", std::vector<std::string>{db_, other})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> u8): duplicate blob 'u8' in ", db_,
                         " and ", other));

  // Blobs split across databases load from both.
  const std::string third = dir_.Join("trainer_2.0");
  Workspace ws;
  ws.SetTensor("only_here", Tensor::FromVector<int64_t>({9}));
  ASSERT_TRUE(Save(&ws, {"only_here"}, third).ok());
  ASSERT_TRUE(Load(&loaded, {"i32", "only_here"},
                   {Arg("dbs", std::vector<std::string>{db_, third})})
                  .ok());
  EXPECT_EQ(loaded.GetTensor("only_here").value()->scalar<int64_t>(), 9);
  ExpectSameBlobs(saved_, loaded, {"i32"});
}

TEST_F(LoadTest, TwoStoredBlobsLoadingAsOneNameIsAnError) {
  Workspace ws;
  ws.SetTensor("a/x", Tensor::FromVector<int64_t>({1}));
  ws.SetTensor("b/x", Tensor::FromVector<int64_t>({2}));
  const std::string db = dir_.Join("db");
  ASSERT_TRUE(Save(&ws, {"a/x", "b/x"}, db).ok());
  Workspace loaded;
  absl::Status status =
      Load(&loaded, {},
           {Arg("db", db), Arg("load_all", 1), Arg("strip_prefix", "/")});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> ): blobs 'a/x' and 'b/x' of ", db,
                         " would both be loaded as 'x'"));
}

TEST_F(LoadTest, LoadArgumentErrors) {
  Workspace ws;
  absl::Status status = Load(&ws, {"w"}, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Load( -> w): argument 'db' or 'dbs' (the database paths) is "
            "required");

  status = Load(&ws, {"w"}, {Arg("dbs", std::vector<std::string>{db_, ""})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Load( -> w): argument 'dbs' has an empty path");

  status = Load(&ws, {"w"},
                {Arg("db", db_), Arg("dbs", std::vector<std::string>{db_})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> w): database ", db_, " is listed twice"));

  status = Load(&ws, {"w"},
                {Arg("db", db_), Arg("strip_prefix", "x"),
                 Arg("source_blob_names", std::vector<std::string>{"v"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Load( -> w): source_blob_names cannot be used with "
            "strip_prefix or load_all");

  status = Load(&ws, {"w"},
                {Arg("db", db_),
                 Arg("source_blob_names", std::vector<std::string>{"v", "u"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Load( -> w): source_blob_names has 2 names for 1 outputs");

  status = Load(&ws, {"w"}, {Arg("db", db_)}, "rocksdb");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "op Load( -> w): unknown db_type 'rocksdb'; known types: LevelDB, "
            "leveldb, memory");
}

// Several threads read parts of one database (threads, or automatically
// for many blobs) into exactly the blobs one reader makes.
TEST_F(SaveLoadTest, ThreadsReadPartsOfOneDatabaseIntoTheSameBlobs) {
  Workspace ws;
  FillWorkspace(&ws);
  std::vector<std::string> names = kAllBlobs;
  // 9,000 blobs: two per thread at Load's automatic choice, on 2 cores.
  for (int i = 0; i < 9000; ++i) {
    const std::string name = absl::StrFormat("many/%05d", i);
    ws.SetTensor(name, Tensor::FromVector<int32_t>({i, -i, i * 7}));
    names.push_back(name);
  }
  const std::string db = dir_.Join("trainer_0.1");
  ASSERT_TRUE(Save(&ws, names, db, {Arg("chunk_bytes", 64)}).ok());
  for (int threads : {0, 1, 2, 3, 7}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    absl::Status status =
        Load(&loaded, {},
             {Arg("db", db), Arg("load_all", 1), Arg("threads", threads)});
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(loaded.LocalBlobNames().size(), names.size());
    ExpectSameBlobs(ws, loaded, names);
  }
  Workspace ws2;
  absl::Status status = Load(&ws2, {"w"}, {Arg("db", db), Arg("threads", -1)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op Load( -> w): argument 'threads' must be 0 (automatic) or "
            "more, not -1");
}

// A database that holds none of the wanted blobs reads nothing and the
// outputs are missing; two stored blobs cannot be loaded into one output.
TEST_F(SaveLoadTest, ADatabaseWithNoneOfTheOutputs) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.1");
  ASSERT_TRUE(Save(&ws, {"f32", "i64"}, db).ok());
  Workspace loaded;
  absl::Status status = Load(&loaded, {"nope"}, {Arg("db", db)});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> nope): expected to load 1 blobs from ",
                         db, ", got 0; missing: nope"));
  EXPECT_TRUE(
      Load(&loaded, {"nope"}, {Arg("db", db), Arg("allow_incomplete", 1)})
          .ok());
  status = Load(&loaded, {"w", "w"},
                {Arg("db", db), Arg("source_blob_names",
                                    std::vector<std::string>{"f32", "i64"})});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "op Load( -> w, w): output 'w' is listed twice");
}

// A restore's Load also checks that a database is the node's and epoch's
// it asks for.
TEST_F(SaveLoadTest, ExpectedNodeAndEpochAreChecked) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.3");
  ASSERT_TRUE(
      Save(&ws, {"f32"}, db, {Arg("node", "trainer_0"), Arg("epoch", 3)}).ok());
  Workspace loaded;
  EXPECT_TRUE(Load(&loaded, {"f32"},
                   {Arg("db", db), Arg("expected_node", "trainer_0"),
                    Arg("expected_epoch", 3)})
                  .ok());
  absl::Status status = Load(
      &loaded, {"f32"}, {Arg("db", db), Arg("expected_node", "trainer_1")});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> f32): checkpoint ", db,
                         " belongs to node 'trainer_0', not 'trainer_1'"));
  status = Load(&loaded, {"f32"}, {Arg("db", db), Arg("expected_epoch", 4)});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), absl::StrCat("op Load( -> f32): checkpoint ", db,
                                           " holds epoch 3, not 4"));
}

// --- What Load refuses to trust.

TEST_F(SaveLoadTest, MissingDatabaseIsNotFoundNamingThePath) {
  const std::string db = dir_.Join("trainer_0.9");
  Workspace ws;
  absl::Status status = Load(&ws, {"w"}, {Arg("db", db)});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), absl::StrCat("op Load( -> w): LevelDB database ",
                                           db, " does not exist"));
}

// Writes `pairs` into a new database with the DB layer, bypassing Save.
void WriteRawDb(absl::string_view type, const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& pairs) {
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open(type, path, DbMode::kNew);
  ASSERT_TRUE(db.ok()) << db.status();
  {
    absl::StatusOr<std::unique_ptr<Writer>> writer = (*db)->NewWriter();
    ASSERT_TRUE(writer.ok());
    for (const auto& [key, value] : pairs) {
      ASSERT_TRUE((*writer)->Put(key, value).ok());
    }
  }
  ASSERT_TRUE((*db)->Close().ok());
}

TEST_F(SaveLoadTest, ADatabaseWithoutManifestIsNeverTrusted) {
  Workspace ws;
  ws.SetTensor("w", Tensor::FromVector<int64_t>({1, 2, 3}));
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pairs =
      SerializeBlobToPairs("w", *ws.GetBlob("w"));
  ASSERT_TRUE(pairs.ok());
  const std::string db = dir_.Join("caffe2_style");
  WriteRawDb("leveldb", db, *pairs);

  Workspace loaded;
  absl::Status status = Load(&loaded, {"w"}, {Arg("db", db)});
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> w): ", db,
                         " has no blob index: it was not written "
                         "completely by jobgraph's Save"));
  EXPECT_FALSE(loaded.GetBlob("w")->IsInitialized());
  EXPECT_EQ(DbExists(&loaded, db).value(), false);
}

TEST_F(SaveLoadTest, AKeyListedInTheManifestButMissingIsDataLoss) {
  Workspace ws;
  ws.SetTensor("w", Tensor::Iota<int64_t>(10));
  ASSERT_TRUE(
      Save(&ws, {"w"}, "mem/full", {Arg("chunk_bytes", 16)}, "memory").ok());
  // Copy everything but one chunk.
  std::vector<std::pair<std::string, std::string>> pairs;
  {
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open("memory", "mem/full", DbMode::kRead);
    ASSERT_TRUE(db.ok());
    std::unique_ptr<Cursor> cursor = (*db)->NewCursor();
    for (; cursor->Valid(); cursor->Next()) {
      if (cursor->key() != "w#%3") {
        pairs.emplace_back(cursor->key(), cursor->value());
      }
    }
  }
  ASSERT_EQ(pairs.size(), 5u);  // 5 chunks + manifest - 1
  WriteRawDb("memory", "mem/holey", pairs);
  Workspace loaded;
  absl::Status status =
      Load(&loaded, {"w"}, {Arg("db", "mem/holey")}, "memory");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            "op Load( -> w): checkpoint mem/holey: key 'w#%3' of blob 'w' is "
            "listed in the blob index but missing; the database is damaged");
}

// The path of the file under `db` that contains `pattern`, or "".
std::string FileContaining(const std::string& db, const std::string& pattern) {
  for (const std::string& name : List(db)) {
    absl::StatusOr<std::string> contents = ReadFileToString(JoinPath(db, name));
    if (contents.ok() && contents->find(pattern) != std::string::npos) {
      return JoinPath(db, name);
    }
  }
  return "";
}

class DamageTest : public SaveLoadTest {
 protected:
  void SetUp() override {
    // A distinctive byte pattern to find on disk.
    Tensor w(INT64, {4096});
    for (int64_t i = 0; i < w.numel(); ++i) {
      w.mutable_data<int64_t>()[i] = 0x5AC3A55AC3A55AC3;
    }
    saved_.SetTensor("w", std::move(w));
    saved_.SetTensor("other", Tensor::FromVector<int64_t>({1, 2}));
    db_ = dir_.Join("trainer_0.2");
    ASSERT_TRUE(Save(&saved_, {"w", "other"}, db_).ok());
    std::string pattern;
    for (int i = 0; i < 8; ++i) {
      pattern.append("\xC3\x5A\xA5\xC3\x5A\xA5\xC3\x5A", 8);
    }
    file_ = FileContaining(db_, pattern);
    ASSERT_FALSE(file_.empty());
    absl::StatusOr<std::string> contents = ReadFileToString(file_);
    ASSERT_TRUE(contents.ok());
    offset_ = contents->find(pattern) + 1000;
    size_ = contents->size();
  }

  Workspace saved_;
  std::string db_;
  std::string file_;   // the table file holding w's values
  size_t offset_ = 0;  // a byte inside w's value
  size_t size_ = 0;
};

TEST_F(DamageTest, AFlippedByteInAValueIsDataLossNamingPathAndKey) {
  {
    std::fstream f(file_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset_);
    char c = 0;
    f.get(c);
    f.seekp(offset_);
    f.put(static_cast<char>(c ^ 0x01));
    ASSERT_TRUE(f.good());
  }
  Workspace loaded;
  absl::Status status = Load(&loaded, {"w"}, {Arg("db", db_)});
  // Load turns off LevelDB's block checksums and checks the manifest's
  // per-value CRC-32C, which names the key.
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> w): checkpoint ", db_,
                         ": value of key 'w#%0' (blob 'w') fails its CRC-32C "
                         "check; the database is damaged"));
  // Another blob of the same database is intact and still loads.
  ASSERT_TRUE(Load(&loaded, {"other"}, {Arg("db", db_)}).ok());

  absl::StatusOr<CompactBlobIndex> verified =
      VerifyDbAt("leveldb", db_, VerifyDepth::kValuesAndFiles);
  EXPECT_EQ(verified.status().code(), absl::StatusCode::kDataLoss);
  // DBExists does not read values: the database still "exists".
  EXPECT_EQ(DbExists(&loaded, db_).value(), true);

  // verify_checksums=0 trusts the disk and loads the damaged value.
  ASSERT_TRUE(
      Load(&loaded, {"w"}, {Arg("db", db_), Arg("verify_checksums", 0)}).ok());
  EXPECT_FALSE(saved_.GetTensor("w").value()->BitwiseEquals(
      *loaded.GetTensor("w").value()));
}

TEST_F(DamageTest, ATruncatedTableFileIsAnErrorNamingTheFile) {
  ASSERT_EQ(::truncate(file_.c_str(), static_cast<off_t>(size_ / 2)), 0);
  Workspace loaded;
  absl::Status status = Load(&loaded, {"w"}, {Arg("db", db_)});
  // The read-only reader compares every live table's size with the one
  // LevelDB's MANIFEST-* file records before reading anything.
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Load( -> w): LevelDB database ", db_,
                         " is damaged: table ", file_, " has ", size_ / 2,
                         " bytes, its descriptor records ", size_));
  // DBExists cannot read the manifest either: the database does not exist
  // as far as it can tell.
  EXPECT_EQ(DbExists(&loaded, db_).value(), false);
}

// Damage in a part read by another thread is the same error, naming the
// same key, as with one reader.
TEST_F(SaveLoadTest, DamageSeenByAnyThreadIsTheErrorOfOneReader) {
  Workspace ws;
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) {
    Tensor t(INT64, {512});
    for (int64_t j = 0; j < t.numel(); ++j) {
      t.mutable_data<int64_t>()[j] = i == 6 ? 0x5AC3A55AC3A55AC3 : i * j;
    }
    names.push_back(absl::StrCat("b", i));
    ws.SetTensor(names.back(), std::move(t));
  }
  const std::string db = dir_.Join("trainer_0.1");
  ASSERT_TRUE(Save(&ws, names, db).ok());
  std::string pattern;
  for (int i = 0; i < 8; ++i) {
    pattern.append("\xC3\x5A\xA5\xC3\x5A\xA5\xC3\x5A", 8);
  }
  const std::string file = FileContaining(db, pattern);
  ASSERT_FALSE(file.empty());
  const size_t offset = ReadFileToString(file).value().find(pattern) + 100;
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x10));
    ASSERT_TRUE(f.good());
  }
  for (int threads : {1, 4}) {
    SCOPED_TRACE(absl::StrCat("threads=", threads));
    Workspace loaded;
    absl::Status status =
        Load(&loaded, names, {Arg("db", db), Arg("threads", threads)});
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(status.message(),
              absl::StrCat("op Load( -> b0, b1, b2, b3, b4, b5, b6, b7): "
                           "checkpoint ",
                           db,
                           ": value of key 'b6#%0' (blob 'b6') fails its "
                           "CRC-32C check; the database is damaged"));
  }
}

// --- DBExists.

TEST_F(SaveLoadTest, DbExistsOnlyForCompleteDatabases) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.4");
  EXPECT_EQ(DbExists(&ws, db).value(), false);
  ASSERT_TRUE(Save(&ws, {"f32"}, db).ok());
  EXPECT_EQ(DbExists(&ws, db).value(), true);
  EXPECT_EQ(ws.GetTensor("exists").value()->DebugString(), "bool[] {true}");

  // A crash leaves a complete database under a temporary name, which is not
  // the final one.
  const std::string leftover = dir_.Join(".trainer_0.5.tmp-99999-0");
  ASSERT_TRUE(Save(&ws, {"f32"}, leftover).ok());
  EXPECT_TRUE(IsSaveTempName(".trainer_0.5.tmp-99999-0"));
  EXPECT_EQ(DbExists(&ws, dir_.Join("trainer_0.5")).value(), false);

  // An empty directory, and a database without a manifest.
  ASSERT_TRUE(CreateDir(dir_.Join("empty")).ok());
  EXPECT_EQ(DbExists(&ws, dir_.Join("empty")).value(), false);
  WriteRawDb("leveldb", dir_.Join("foreign"), {{"w#%0", "x"}});
  EXPECT_EQ(DbExists(&ws, dir_.Join("foreign")).value(), false);

  absl::Status status = DbExists(&ws, db, "rocksdb").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "op DBExists( -> exists): unknown db_type 'rocksdb'; known types: "
            "LevelDB, leveldb, memory");

  // `db` is accepted for `db_name`.
  ASSERT_TRUE(RunOp(MakeOp("DBExists", {}, {"e"},
                           {Arg("db", db), Arg("db_type", "leveldb")}),
                    &ws)
                  .ok());
  EXPECT_EQ(ws.GetTensor("e").value()->scalar<bool>(), true);
}

TEST(SaveTempNameTest, RecognisesOnlyTemporaryNames) {
  EXPECT_TRUE(IsSaveTempName(".trainer_0.3.tmp-123-0"));
  EXPECT_TRUE(IsSaveTempName(".a.tmp-b.tmp-1-22"));
  EXPECT_FALSE(IsSaveTempName("trainer_0.3"));
  EXPECT_FALSE(IsSaveTempName("trainer_0.3.tmp-1-2"));
  EXPECT_FALSE(IsSaveTempName(".trainer_0.3.tmp-1"));
  EXPECT_FALSE(IsSaveTempName(".trainer_0.3.tmp-1-"));
  EXPECT_FALSE(IsSaveTempName(".trainer_0.3.tmp-x-2"));
  EXPECT_FALSE(IsSaveTempName("..tmp-1-2"));
  EXPECT_FALSE(IsSaveTempName("MANIFEST.jobgraph.tmp-1-2"));
}

// --- GetAllBlobNames.

TEST(GetAllBlobNamesTest, ListsSortedNamesIncludingItsOwnOutput) {
  Workspace root;
  root.SetTensor("b", Tensor::Scalar<int64_t>(1));
  root.SetTensor("a", Tensor::Scalar<int64_t>(2));
  Workspace child(&root);
  child.SetTensor("c", Tensor::Scalar<int64_t>(3));

  ASSERT_TRUE(RunOp(MakeOp("GetAllBlobNames", {}, {"names"}, {}), &child).ok());
  const Tensor& all = *child.GetTensor("names").value();
  EXPECT_EQ(all.shape(), std::vector<int64_t>{4});
  EXPECT_THAT(all.values<std::string>(), ElementsAre("a", "b", "c", "names"));

  ASSERT_TRUE(RunOp(MakeOp("GetAllBlobNames", {}, {"local"},
                           {Arg("include_shared", 0)}),
                    &child)
                  .ok());
  EXPECT_THAT(child.GetTensor("local").value()->values<std::string>(),
              ElementsAre("c", "local", "names"));

  absl::Status status =
      RunOp(MakeOp("GetAllBlobNames", {"a"}, {"x"}, {}), &root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "op GetAllBlobNames(a -> x): expects 0 input(s), got 1");
}

// --- The in-memory DB type.

TEST_F(SaveLoadTest, MemoryDatabasesFollowTheSameProtocol) {
  Workspace ws;
  FillWorkspace(&ws, 1);
  ASSERT_TRUE(Save(&ws, kAllBlobs, "ckpt/trainer_0.0", {}, "memory").ok());
  EXPECT_THAT(memory_db::Paths(), ElementsAre("ckpt/trainer_0.0"));
  Workspace resaved;
  FillWorkspace(&resaved, 2);
  ASSERT_TRUE(Save(&resaved, kAllBlobs, "ckpt/trainer_0.0", {}, "memory").ok());
  EXPECT_THAT(memory_db::Paths(), ElementsAre("ckpt/trainer_0.0"));
  Workspace loaded;
  ASSERT_TRUE(
      Load(&loaded, kAllBlobs, {Arg("db", "ckpt/trainer_0.0")}, "memory").ok());
  ExpectSameBlobs(resaved, loaded, kAllBlobs);
  EXPECT_EQ(DbExists(&loaded, "ckpt/trainer_0.0", "memory").value(), true);

  ASSERT_TRUE(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError).ok());
  absl::Status status = Save(&ws, {"f32"}, "ckpt/trainer_0.1", {}, "memory");
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(memory_db::Paths(), ElementsAre("ckpt/trainer_0.0"));
}

// --- Failpoints in Save.

TEST_F(SaveLoadTest, ErrorAfterDbWriteLeavesNoDatabaseAndNoTemporary) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.7");
  ASSERT_TRUE(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError).ok());
  absl::Status status = Save(&ws, {"f32", "i64"}, db);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Save(f32, i64 -> ): saving checkpoint ", db,
                         ": failpoint save.after_db_write"));
  EXPECT_THAT(List(dir_.path()), IsEmpty());
  EXPECT_EQ(DbExists(&ws, db).value(), false);
}

TEST_F(SaveLoadTest, ErrorAfterDbWriteKeepsTheOldDatabaseOfAResave) {
  const std::string db = dir_.Join("trainer_0.7");
  Workspace old_ws;
  FillWorkspace(&old_ws, 1);
  ASSERT_TRUE(Save(&old_ws, kAllBlobs, db).ok());
  ASSERT_TRUE(
      Failpoints::Enable("save.after_db_write", FailpointAction::kError).ok());
  Workspace new_ws;
  FillWorkspace(&new_ws, 2);
  EXPECT_EQ(Save(&new_ws, kAllBlobs, db).code(), absl::StatusCode::kAborted);
  Failpoints::DisableAll();
  EXPECT_THAT(List(dir_.path()), ElementsAre("trainer_0.7"));
  Workspace loaded;
  ASSERT_TRUE(Load(&loaded, kAllBlobs, {Arg("db", db)}).ok());
  ExpectSameBlobs(old_ws, loaded, kAllBlobs);
}

TEST_F(SaveLoadTest, ErrorAfterRenameLeavesTheNewDatabaseInPlace) {
  Workspace ws;
  FillWorkspace(&ws);
  const std::string db = dir_.Join("trainer_0.8");
  ASSERT_TRUE(
      Failpoints::Enable("save.after_rename", FailpointAction::kError).ok());
  absl::Status status = Save(&ws, {"f32"}, db);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(),
            absl::StrCat("op Save(f32 -> ): saving checkpoint ", db,
                         ": failpoint save.after_rename"));
  Failpoints::DisableAll();
  EXPECT_THAT(List(dir_.path()), ElementsAre("trainer_0.8"));
  EXPECT_EQ(DbExists(&ws, db).value(), true);
}

// A real crash: the child process is killed between writing the database
// and renaming it.
TEST_F(SaveLoadTest, CrashAfterDbWriteLeavesOnlyATemporary) {
  // "threadsafe" re-executes the binary, so LevelDB's background thread
  // exists in the child (a forked child would have lost it). The child
  // re-runs this test from the start, so it learns the parent's directory
  // from the environment.
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  const char* inherited = ::getenv("JG_SAVE_CRASH_DIR");
  const std::string dir = inherited != nullptr ? inherited : dir_.path();
  ASSERT_EQ(::setenv("JG_SAVE_CRASH_DIR", dir.c_str(), 1), 0);
  const std::string db = JoinPath(dir, "trainer_0.6");
  Workspace ws;
  FillWorkspace(&ws);
  auto save_and_crash = [&] {
    CHECK(Failpoints::EnableFromSpec("save.after_db_write:crash").ok());
    Save(&ws, kAllBlobs, db).IgnoreError();
    ::exit(0);  // not reached
  };
  EXPECT_EXIT(save_and_crash(), ::testing::KilledBySignal(SIGKILL), "");
  ::testing::FLAGS_gtest_death_test_style = "fast";
  ASSERT_EQ(::unsetenv("JG_SAVE_CRASH_DIR"), 0);

  std::vector<std::string> names = List(dir);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(IsSaveTempName(names[0])) << names[0];
  EXPECT_EQ(names[0].rfind(".trainer_0.6.tmp-", 0), 0u) << names[0];
  EXPECT_EQ(DbExists(&ws, db).value(), false);
  // The leftover is a complete database: only the rename was missing.
  absl::StatusOr<CompactBlobIndex> manifest = VerifyDbAt(
      "leveldb", JoinPath(dir, names[0]), VerifyDepth::kValuesAndFiles);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->blob_size(), static_cast<int>(kAllBlobs.size()));

  // Saving again works, beside the leftover.
  ASSERT_TRUE(Save(&ws, kAllBlobs, db).ok());
  EXPECT_EQ(List(dir).size(), 2u);
  EXPECT_EQ(DbExists(&ws, db).value(), true);
}

}  // namespace
}  // namespace jobgraph

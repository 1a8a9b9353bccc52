// `ckpt` on real LevelDB checkpoints written by the Save op (and, at the
// end, by a JobRunner): the exact output and exit code of every command.

#include "tools/ckpt/ckpt.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/background_delete.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "checkpoint/util/test_util.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/data/dataset.h"
#include "engine/data/file_cursor.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/tree_cursor.h"
#include "engine/net.h"
#include "engine/session.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"
#include "tests/caffe2_pipeline.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/output.h"

namespace jobgraph {
namespace ckpt {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using testing_util::TempDir;

// 2023-11-14 22:13:20 UTC.
constexpr int64_t kCommitTime = int64_t{1700000000} * 1000000;
constexpr float kMarker = 1234.5f;

// --- Running the tool.

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result RunTool(const std::vector<std::string>& args,
               const std::string& working_dir = "") {
  std::ostringstream out;
  std::ostringstream err;
  Result result;
  result.code = RunCkpt(args, working_dir, out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

// The lines of `text` with runs of spaces collapsed to one and no leading
// or trailing spaces, so table rows compare exactly without depending on
// column widths (TextTable's alignment is tested in output_test.cc).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string collapsed;
    for (absl::string_view word :
         absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      if (!collapsed.empty()) collapsed += ' ';
      collapsed.append(word.data(), word.size());
    }
    lines.push_back(collapsed);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// A strict check of JSON syntax (RFC 8259), enough to tell that the output
// parses.
class JsonChecker {
 public:
  static bool Valid(absl::string_view text) {
    JsonChecker checker(text);
    checker.SkipSpace();
    if (!checker.Value()) return false;
    checker.SkipSpace();
    return checker.pos_ == text.size();
  }

 private:
  explicit JsonChecker(absl::string_view text) : s_(text) {}

  bool Value() {
    if (pos_ >= s_.size()) return false;
    switch (s_[pos_]) {
      case '{':
        return Object();
      case '[':
        return Array();
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }
  bool Object() {
    ++pos_;
    SkipSpace();
    if (Peek('}')) return ++pos_, true;
    while (true) {
      SkipSpace();
      if (!String()) return false;
      SkipSpace();
      if (!Peek(':')) return false;
      ++pos_;
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek('}')) return ++pos_, true;
      if (!Peek(',')) return false;
      ++pos_;
    }
  }
  bool Array() {
    ++pos_;
    SkipSpace();
    if (Peek(']')) return ++pos_, true;
    while (true) {
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek(']')) return ++pos_, true;
      if (!Peek(',')) return false;
      ++pos_;
    }
  }
  bool String() {
    if (!Peek('"')) return false;
    for (++pos_; pos_ < s_.size(); ++pos_) {
      const unsigned char c = s_[pos_];
      if (c == '"') return ++pos_, true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (++pos_ >= s_.size()) return false;
      if (s_[pos_] == 'u') {
        for (int i = 0; i < 4; ++i) {
          if (++pos_ >= s_.size() || !absl::ascii_isxdigit(s_[pos_])) {
            return false;
          }
        }
      } else if (!absl::StrContains("\"\\/bfnrt", s_[pos_])) {
        return false;
      }
    }
    return false;
  }
  bool Number() {
    const size_t start = pos_;
    if (Peek('-')) ++pos_;
    if (pos_ >= s_.size() || !absl::ascii_isdigit(s_[pos_])) return false;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() &&
        absl::ascii_isdigit(s_[pos_ + 1])) {
      return false;
    }
    while (pos_ < s_.size() && absl::ascii_isdigit(s_[pos_])) ++pos_;
    return pos_ > start;
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void SkipSpace() {
    while (pos_ < s_.size() && absl::ascii_isspace(s_[pos_])) ++pos_;
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

TEST(JsonCheckerTest, TellsValidFromInvalid) {
  EXPECT_TRUE(JsonChecker::Valid("{\"a\":[1,-2,null,true,\"x\\u00e9\"]}"));
  EXPECT_FALSE(JsonChecker::Valid("{\"a\":1,}"));
  EXPECT_FALSE(JsonChecker::Valid("{\"a\":01}"));
  EXPECT_FALSE(JsonChecker::Valid("{\"a\":\"\n\"}"));
  EXPECT_FALSE(JsonChecker::Valid("{} {}"));
}

// --- Building checkpoints.

Argument StringArg(const std::string& name, const std::string& value) {
  Argument arg;
  arg.set_name(name);
  arg.set_s(value);
  return arg;
}

Argument IntArg(const std::string& name, int64_t value) {
  Argument arg;
  arg.set_name(name);
  arg.set_i(value);
  return arg;
}

// Runs a net with one Save op that writes `blobs` of `ws` into the LevelDB
// database `db` as `node`'s checkpoint of `epoch`. chunk_bytes = 64 splits
// "ids" (100 int64) into 13 values.
void SaveDb(Workspace* ws, const std::vector<std::string>& blobs,
            const std::string& db, const std::string& node, int64_t epoch) {
  NetDef net;
  net.set_name("save");
  OperatorDef* op = net.add_op();
  op->set_type("Save");
  for (const std::string& blob : blobs) op->add_input(blob);
  *op->add_arg() = StringArg("db", db);
  *op->add_arg() = StringArg("db_type", "leveldb");
  *op->add_arg() = StringArg("node", node);
  *op->add_arg() = IntArg("epoch", epoch);
  *op->add_arg() = IntArg("chunk_bytes", 64);
  absl::StatusOr<std::unique_ptr<Net>> created = Net::Create(net, ws);
  ASSERT_TRUE(created.ok()) << created.status();
  absl::Status status = (*created)->Run();
  ASSERT_TRUE(status.ok()) << status;
}

const std::vector<std::string> kBlobs = {"cursor",  "file", "ids", "note",
                                         "shuffle", "step", "w",   "words"};

// One blob of every kind that a checkpoint holds.
void FillWorkspace(Workspace* ws, float w_value = kMarker) {
  Tensor w(FLOAT, {3, 5});
  for (int64_t i = 0; i < w.numel(); ++i) w.mutable_data<float>()[i] = w_value;
  ws->SetTensor("w", std::move(w));
  ws->SetTensor("ids", Tensor::Iota<int64_t>(100));
  ws->SetTensor("words", Tensor::FromVector<std::string>({"alpha", "beta"}));
  ws->CreateBlob("step")->Reset(std::make_unique<Counter>(7));
  ws->CreateBlob("note")->Reset(std::make_unique<std::string>("hello"));
  ws->CreateBlob("cursor")->Reset(
      std::make_unique<TreeCursor>(std::vector<std::string>{"val"}, 3));
  ShuffleCursor::State state;
  state.seed = 42;
  state.epoch = 1;
  state.position = 2;
  state.num_rows = 10;
  ws->CreateBlob("shuffle")->Reset(std::make_unique<ShuffleCursor>(
      std::vector<std::string>{"a", "b"}, state));
  ws->CreateBlob("file")->Reset(
      std::make_unique<FileCursor>("/data/x.txt", 12));
}

BlobIndex IndexOf(const std::string& path) {
  absl::StatusOr<BlobIndex> manifest = ReadBlobIndexAt("leveldb", path);
  CHECK(manifest.ok()) << manifest.status();
  return *manifest;
}

const CheckpointBlobInfo& BlobInfo(const BlobIndex& manifest,
                                   const std::string& name) {
  auto it = std::find_if(
      manifest.blob().begin(), manifest.blob().end(),
      [&](const CheckpointBlobInfo& blob) { return blob.name() == name; });
  CHECK(it != manifest.blob().end()) << "no blob " << name;
  return *it;
}

// The stored values of `path`, by key.
std::map<std::string, std::string> ReadValues(const std::string& path) {
  absl::StatusOr<std::unique_ptr<DB>> db =
      DbRegistry::Global().Open("leveldb", path, DbMode::kRead);
  CHECK(db.ok()) << db.status();
  std::map<std::string, std::string> values;
  std::unique_ptr<Cursor> cursor = (*db)->NewCursor();
  for (; cursor->Valid(); cursor->Next()) {
    values[std::string(cursor->key())] = std::string(cursor->value());
  }
  CHECK(cursor->status().ok()) << cursor->status();
  return values;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary);
  file << contents;
  CHECK(file.good()) << path;
}

void MakeDir(const std::string& path) {
  CHECK_EQ(::mkdir(path.c_str(), 0755), 0) << path << ": " << strerror(errno);
}

// A pid that belonged to a process that has exited.
int64_t DeadPid() {
  const pid_t child = ::fork();
  CHECK_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  CHECK_EQ(::waitpid(child, &status, 0), child);
  return child;
}

std::vector<std::string> List(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  CHECK(names.ok()) << names.status();
  return *names;
}

class CkptTest : public ::testing::Test {
 protected:
  void TearDown() override { WaitForBackgroundDeletes(); }

  std::string Path(const std::string& name) const { return dir_.Join(name); }

  // Saves the standard workspace as trainer_0's database of each epoch.
  void SaveEpochs(const std::vector<int64_t>& epochs) {
    Workspace ws;
    FillWorkspace(&ws);
    for (int64_t epoch : epochs) {
      SaveDb(&ws, kBlobs, CheckpointDbPath(dir_.path(), "trainer_0", epoch),
             "trainer_0", epoch);
    }
  }

  // Writes a commit log that commits trainer_0's `epochs`, committed at
  // kCommitTime + epoch seconds after a save of 1500 + epoch us.
  void Commit(const std::vector<int64_t>& epochs) {
    CommitLog commit_log;
    commit_log.set_format_version(1);
    commit_log.set_db_type("leveldb");
    for (int64_t epoch : epochs) {
      CommittedEpoch* e = commit_log.add_epoch();
      e->set_epoch(epoch);
      e->add_node("trainer_0");
      e->set_committed_unix_micros(kCommitTime + epoch * 1000000);
      e->set_save_micros(1500 + epoch);
    }
    absl::Status status =
        WriteCommitLog(dir_.path(), commit_log, /*is_commit=*/true);
    ASSERT_TRUE(status.ok()) << status;
  }

  TempDir dir_;
};

// --- The format itself, as checkpoint/FORMAT.md describes it.

TEST_F(CkptTest, ValuesAreTheBlobProtosThatFormatMdDescribes) {
  SaveEpochs({0});
  const std::string db = Path("trainer_0.0");
  std::map<std::string, std::string> values = ReadValues(db);
  std::vector<std::string> keys;
  for (const auto& [key, value] : values) keys.push_back(key);
  EXPECT_THAT(
      keys,
      ElementsAre("__jobgraph_manifest__", "cursor", "file", "ids#%0", "ids#%1",
                  "ids#%10", "ids#%11", "ids#%12", "ids#%2", "ids#%3", "ids#%4",
                  "ids#%5", "ids#%6", "ids#%7", "ids#%8", "ids#%9", "note",
                  "shuffle", "step", "w#%0", "words#%0"));

  // A float tensor chunk: header fields, then a second `tensor` occurrence
  // with only raw_data, which a standard parser merges. 87 bytes: a 23-byte
  // header and 64 bytes of field 3 { field 12: 60 bytes }.
  const std::string& w_value = values["w#%0"];
  EXPECT_EQ(w_value.size(), 87u);
  EXPECT_EQ(w_value.substr(0, 27),
            std::string("\x0a\x01w"          // name
                        "\x12\x06Tensor"     // type
                        "\x1a\x0a"           // tensor {
                        "\x0a\x02\x03\x05"   //   dims
                        "\x10\x01"           //   FLOAT
                        "\x5a\x02\x10\x0f"   //   segment
                        "\x1a\x3e\x62\x3c",  // tensor {raw
                        27));
  BlobProto w;
  ASSERT_TRUE(w.ParseFromString(w_value));
  EXPECT_EQ(w.name(), "w");
  EXPECT_EQ(w.type(), "Tensor");
  EXPECT_THAT(w.tensor().dims(), ElementsAre(3, 5));
  EXPECT_EQ(w.tensor().data_type(), FLOAT);
  EXPECT_TRUE(w.tensor().has_segment());
  EXPECT_EQ(w.tensor().segment().begin(), 0);
  EXPECT_EQ(w.tensor().segment().end(), 15);
  EXPECT_THAT(w.tensor().float_data(), IsEmpty());
  ASSERT_EQ(w.tensor().raw_data().size(), 60u);
  float first;
  std::memcpy(&first, w.tensor().raw_data().data(), 4);
  EXPECT_EQ(first, kMarker);
  EXPECT_EQ(w.tensor().raw_data().substr(0, 4),
            std::string("\x00\x50\x9a\x44", 4));  // 1234.5f, little-endian

  // Chunk 12 of "ids" holds elements [96, 100).
  BlobProto ids;
  ASSERT_TRUE(ids.ParseFromString(values["ids#%12"]));
  EXPECT_THAT(ids.tensor().dims(), ElementsAre(100));
  EXPECT_EQ(ids.tensor().data_type(), INT64);
  EXPECT_EQ(ids.tensor().segment().begin(), 96);
  EXPECT_EQ(ids.tensor().segment().end(), 100);
  EXPECT_EQ(ids.tensor().raw_data().size(), 32u);

  BlobProto words;
  ASSERT_TRUE(words.ParseFromString(values["words#%0"]));
  EXPECT_EQ(words.tensor().data_type(), STRING);
  EXPECT_THAT(words.tensor().string_data(), ElementsAre("alpha", "beta"));
  EXPECT_EQ(words.tensor().segment().end(), 2);

  BlobProto step;
  ASSERT_TRUE(step.ParseFromString(values["step"]));
  EXPECT_EQ(step.type(), "std::unique_ptr<Counter<int64_t>>");
  EXPECT_THAT(step.tensor().dims(), ElementsAre(1));
  EXPECT_EQ(step.tensor().data_type(), INT64);
  EXPECT_EQ(step.tensor().raw_data(), std::string("\x07\0\0\0\0\0\0\0", 8));
  EXPECT_FALSE(step.tensor().has_segment());

  BlobProto note;
  ASSERT_TRUE(note.ParseFromString(values["note"]));
  EXPECT_EQ(note.type(), "std::string");
  EXPECT_EQ(note.content(), "hello");
  EXPECT_FALSE(note.has_tensor());

  BlobProto cursor;
  ASSERT_TRUE(cursor.ParseFromString(values["cursor"]));
  EXPECT_EQ(cursor.type(), "std::unique_ptr<TreeCursor>");
  EXPECT_THAT(cursor.tensor().dims(), ElementsAre(1));
  EXPECT_EQ(cursor.tensor().raw_data(), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(cursor.content(), "val ");

  BlobProto shuffle;
  ASSERT_TRUE(shuffle.ParseFromString(values["shuffle"]));
  EXPECT_EQ(shuffle.type(), "std::unique_ptr<ShuffleCursor>");
  EXPECT_THAT(shuffle.tensor().dims(), ElementsAre(5));
  std::vector<int64_t> state(5);
  ASSERT_EQ(shuffle.tensor().raw_data().size(), 40u);
  std::memcpy(state.data(), shuffle.tensor().raw_data().data(), 40);
  EXPECT_THAT(state, ElementsAre(42, 1, 2, 10, 0));
  EXPECT_EQ(shuffle.content(), "a b ");

  BlobProto file;
  ASSERT_TRUE(file.ParseFromString(values["file"]));
  EXPECT_EQ(file.type(), "std::unique_ptr<FileCursor>");
  EXPECT_EQ(file.tensor().raw_data(), std::string("\x0c\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(file.content(), "/data/x.txt");

  // The manifest lists every key with its size and CRC-32C.
  BlobIndex manifest;
  ASSERT_TRUE(manifest.ParseFromString(values["__jobgraph_manifest__"]));
  EXPECT_EQ(manifest.format_version(), 1);
  EXPECT_EQ(manifest.node(), "trainer_0");
  EXPECT_EQ(manifest.epoch(), 0);
  int64_t total = 0;
  for (const CheckpointBlobInfo& blob : manifest.blob()) {
    for (int i = 0; i < blob.key_size(); ++i) {
      const std::string& value = values[blob.key(i)];
      EXPECT_EQ(blob.value_bytes(i), static_cast<int64_t>(value.size()));
      EXPECT_EQ(blob.value_crc32c(i), Crc32c(value));
      total += value.size();
    }
  }
  EXPECT_EQ(manifest.total_bytes(), total);
  const CheckpointBlobInfo& ids_info = BlobInfo(manifest, "ids");
  EXPECT_EQ(ids_info.key(2), "ids#%10");  // keys in bytewise order
}

// --- list

TEST_F(CkptTest, ListShowsCommittedUncommittedAndIncompleteEpochs) {
  SaveEpochs({0, 1, 2});
  Commit({0, 1});
  const int64_t dead = DeadPid();
  const std::string temp = absl::StrCat(".trainer_0.3.tmp-", dead, "-0");
  MakeDir(Path(temp));
  WriteFile(Path(temp + "/000005.ldb"), "0123456789");
  const std::string commit_log_temp =
      absl::StrCat("MANIFEST.jobgraph.tmp-", dead);
  WriteFile(Path(commit_log_temp), "junk");
  WriteFile(Path("notes.txt"), "not ours");

  const int64_t bytes = IndexOf(Path("trainer_0.0")).total_bytes();
  const std::string created =
      FormatUnixMicros(IndexOf(Path("trainer_0.2")).created_unix_micros());
  Result r = RunTool({"list", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("checkpoint ", dir_.path(),
                       " (leveldb, format version 1)"),
          "EPOCH STATE NODES BLOBS BYTES SAVE TIME",
          absl::StrCat("0 committed trainer_0 8 ", bytes,
                       " 1.5 ms 2023-11-14 22:13:20 UTC"),
          absl::StrCat("1 committed trainer_0 8 ", bytes,
                       " 1.5 ms 2023-11-14 22:13:21 UTC"),
          absl::StrCat("2 uncommitted trainer_0 8 ", bytes, " - ", created),
          "3 incomplete trainer_0 - - - -",
          "2 committed epochs (newest 1), 1 uncommitted, 1 incomplete",
          "leftover temporaries (`ckpt gc` removes them):", temp,
          commit_log_temp));

  r = RunTool({"list", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, StartsWith(absl::StrCat(
                         "{\"dir\":", JsonQuote(dir_.path()),
                         ",\"commit_log\":\"ok\",\"format_version\":"
                         "1,\"db_type\":\"leveldb\",\"epochs\":[")));
  EXPECT_THAT(
      r.out,
      HasSubstr(absl::StrCat(
          "{\"epoch\":0,\"state\":\"committed\",\"nodes\":["
          "\"trainer_0\"],\"paths\":[",
          JsonQuote(Path("trainer_0.0")), "],\"blobs\":8,\"bytes\":", bytes,
          ",\"save_micros\":1500,\"time_unix_micros\":", kCommitTime,
          ",\"problems\":[]}")));
  EXPECT_THAT(r.out, HasSubstr("{\"epoch\":2,\"state\":\"uncommitted\","));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "{\"epoch\":3,\"state\":\"incomplete\",\"nodes\":["
                         "\"trainer_0\"],\"paths\":[",
                         JsonQuote(Path(temp)),
                         "],\"blobs\":null,\"bytes\":null,\"save_micros\":null,"
                         "\"time_unix_micros\":null,\"problems\":[]}")));
  EXPECT_THAT(r.out,
              HasSubstr(absl::StrCat("\"leftover_temporaries\":[\"", temp,
                                     "\",\"", commit_log_temp, "\"]}\n")));
}

TEST_F(CkptTest, ListReportsMissingAndForeignDatabases) {
  SaveEpochs({0});
  Commit({0, 5});
  // A database whose manifest belongs to another epoch.
  Workspace ws;
  FillWorkspace(&ws);
  SaveDb(&ws, {"w"}, Path("trainer_0.7"), "trainer_0", 6);
  Result r = RunTool({"list", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  EXPECT_THAT(lines,
              Contains("5 committed trainer_0 ? ? 1.5 ms 2023-11-14 22:13:25 "
                       "UTC"));
  EXPECT_THAT(lines, Contains("problems:"));
  EXPECT_THAT(lines,
              Contains(absl::StrCat("epoch 5 (committed): database ",
                                    Path("trainer_0.5"), " is missing")));
  EXPECT_THAT(lines, Contains(absl::StrCat(
                         "epoch 7 (uncommitted): ", Path("trainer_0.7"),
                         " holds node 'trainer_0' epoch 6 according to its "
                         "blob index")));
}

TEST_F(CkptTest, ListWithoutCommitLogShowsUncommittedDatabases) {
  SaveEpochs({4});
  Result r = RunTool({"list", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], absl::StrCat("checkpoint ", dir_.path(),
                                   " (no MANIFEST.jobgraph: nothing is "
                                   "committed)"));
  EXPECT_THAT(lines[2], StartsWith("4 uncommitted trainer_0 8 "));
  EXPECT_EQ(lines[3], "0 committed epochs, 1 uncommitted, 0 incomplete");
}

TEST_F(CkptTest, RelativePathsResolveAgainstTheWorkingDirectory) {
  const std::string sub = Path("ck");
  MakeDir(sub);
  Workspace ws;
  FillWorkspace(&ws);
  SaveDb(&ws, {"w"}, JoinPath(sub, "trainer_0.0"), "trainer_0", 0);
  Result r = RunTool({"list", "ck"}, dir_.path());
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, StartsWith(absl::StrCat("checkpoint ", sub, " (")));
  r = RunTool({"show", "ck/trainer_0.0"}, dir_.path());
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out,
              StartsWith(absl::StrCat("database ", sub, "/trainer_0.0\n")));
}

// --- show

TEST_F(CkptTest, ShowListsEveryBlobWithSizesAndChecksums) {
  SaveEpochs({0});
  const std::string db = Path("trainer_0.0");
  const BlobIndex manifest = IndexOf(db);
  std::map<std::string, std::string> values = ReadValues(db);
  // A blob's row: its one value's CRC-32C, or that of all its values
  // concatenated in manifest order.
  auto row = [&](const std::string& name, const std::string& columns) {
    const CheckpointBlobInfo& blob = BlobInfo(manifest, name);
    std::string all;
    for (const std::string& key : blob.key()) all += values[key];
    return absl::StrCat(name, " ", columns, " ", blob.key_size(), " ",
                        all.size(), " ", CrcHex(Crc32c(all)));
  };
  Result r = RunTool({"show", db});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("database ", db),
          absl::StrCat("node trainer_0, epoch 0, format version 1, saved ",
                       FormatUnixMicros(manifest.created_unix_micros())),
          absl::StrCat("8 blobs, 20 values, ", manifest.total_bytes(),
                       " bytes"),
          "NAME TYPE DTYPE SHAPE VALUES BYTES CRC32C",
          row("cursor", "std::unique_ptr<TreeCursor> - -"),
          row("file", "std::unique_ptr<FileCursor> - -"),
          row("ids", "Tensor int64 [100]"), row("note", "std::string - -"),
          row("shuffle", "std::unique_ptr<ShuffleCursor> - -"),
          row("step", "std::unique_ptr<Counter<int64_t>> - -"),
          row("w", "Tensor float [3,5]"), row("words", "Tensor string [2]")));
  EXPECT_EQ(row("w", "Tensor float [3,5]"),
            absl::StrCat("w Tensor float [3,5] 1 87 ",
                         CrcHex(Crc32c(values["w#%0"]))));

  // --keys adds a row per value under its blob.
  r = RunTool({"show", "--keys", db});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  auto ids =
      std::find(lines.begin(), lines.end(), row("ids", "Tensor int64 [100]"));
  ASSERT_NE(ids, lines.end());
  for (const std::string key : {"ids#%0", "ids#%1", "ids#%10"}) {
    ++ids;
    ASSERT_NE(ids, lines.end());
    EXPECT_EQ(*ids, absl::StrCat(key, " ", values[key].size(), " ",
                                 CrcHex(Crc32c(values[key]))));
  }

  r = RunTool({"show", db, "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, StartsWith(absl::StrCat(
                         "{\"path\":", JsonQuote(db),
                         ",\"format_version\":1,\"node\":\"trainer_0\","
                         "\"epoch\":0,\"created_unix_micros\":",
                         manifest.created_unix_micros(), ",\"total_bytes\":",
                         manifest.total_bytes(), ",\"blobs\":[")));
  const std::string w_crc = CrcHex(Crc32c(values["w#%0"]));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "{\"name\":\"w\",\"type\":\"Tensor\",\"dtype\":"
                         "\"float\",\"shape\":[3,5],\"values\":1,\"bytes\":87,"
                         "\"crc32c\":\"",
                         w_crc, "\",\"keys\":[{\"key\":\"w#%0\",\"bytes\":87,",
                         "\"crc32c\":\"", w_crc, "\"}]}")));
  EXPECT_THAT(r.out, HasSubstr("{\"name\":\"step\",\"type\":\"std::unique_ptr<"
                               "Counter<int64_t>>\",\"dtype\":null,\"shape\":"
                               "null,\"values\":1,"));
}

TEST_F(CkptTest, ShowRefusesWhatIsNotADatabase) {
  Result r = RunTool({"show", Path("nothing.0")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr(Path("nothing.0")));
  EXPECT_EQ(r.out, "");

  // A LevelDB database that jobgraph's Save did not finish.
  {
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open("leveldb", Path("foreign"), DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    std::unique_ptr<Writer> writer = (*db)->NewWriter().value();
    ASSERT_TRUE(writer->Put("k", "v").ok());
    writer.reset();
    ASSERT_TRUE((*db)->Close().ok());
  }
  r = RunTool({"show", Path("foreign")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", Path("foreign"),
                                " has no blob index: it was not written "
                                "completely by jobgraph's Save\n"));
}

// --- dump

TEST_F(CkptTest, DumpPrintsEveryKindOfBlob) {
  SaveEpochs({0});
  const std::string db = Path("trainer_0.0");
  const BlobIndex manifest = IndexOf(db);
  auto dump = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"dump", db};
    args.insert(args.end(), extra.begin(), extra.end());
    Result r = RunTool(args);
    EXPECT_EQ(r.code, kExitOk) << r.err;
    EXPECT_EQ(r.err, "");
    return Lines(r.out);
  };
  auto header = [&](const std::string& name) {
    const CheckpointBlobInfo& blob = BlobInfo(manifest, name);
    int64_t bytes = 0;
    for (int64_t b : blob.value_bytes()) bytes += b;
    return std::vector<std::string>{
        absl::StrCat("blob: ", name), absl::StrCat("type: ", blob.type()),
        absl::StrCat("stored: ", blob.key_size(),
                     blob.key_size() == 1 ? " value, " : " values, ", bytes,
                     " bytes")};
  };
  auto expect = [&](const std::string& name, const std::string& value) {
    std::vector<std::string> lines = header(name);
    lines.push_back(value);
    return lines;
  };

  EXPECT_THAT(dump({"w"}),
              ElementsAreArray(expect(
                  "w",
                  "value: float[3,5] {1234.5, 1234.5, 1234.5, 1234.5, 1234.5, "
                  "1234.5, 1234.5, 1234.5, 1234.5, 1234.5, 1234.5, 1234.5, "
                  "1234.5, 1234.5, 1234.5}")));
  EXPECT_THAT(dump({"w", "--max_elements=2"}),
              ElementsAreArray(expect(
                  "w", "value: float[3,5] {1234.5, 1234.5, ... (15 in all)}")));
  EXPECT_THAT(
      dump({"ids"}),
      ElementsAreArray(
          expect("ids",
                 "value: int64[100] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
                 "13, 14, 15, 16, 17, 18, 19, ... (100 in all)}")));
  EXPECT_THAT(dump({"words"}),
              ElementsAreArray(
                  expect("words", "value: string[2] {\"alpha\", \"beta\"}")));
  EXPECT_THAT(dump({"step"}),
              ElementsAreArray(expect("step", "value: counter 7")));
  EXPECT_THAT(dump({"note"}),
              ElementsAreArray(expect("note", "value: \"hello\"")));
  EXPECT_THAT(dump({"note", "--max_elements=0"}),
              ElementsAreArray(expect("note", "value: \"...\" (5 bytes)")));
  EXPECT_THAT(dump({"cursor"}),
              ElementsAreArray(expect(
                  "cursor", "value: TreeCursor offset 3, fields [val]")));
  EXPECT_THAT(dump({"shuffle"}),
              ElementsAreArray(expect(
                  "shuffle",
                  "value: ShuffleCursor seed 42, epoch 1, position 2, num_rows "
                  "10, exhausted false, fields [a, b]")));
  EXPECT_THAT(
      dump({"file"}),
      ElementsAreArray(
          expect("file", "value: FileCursor path \"/data/x.txt\", offset 12")));

  Result r = RunTool({"dump", db, "nope"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: database ", db,
                                " has no blob 'nope'; it has: cursor, file, "
                                "ids, note, shuffle, step, w, words\n"));
}

TEST_F(CkptTest, DumpNamesTheTypeOfABlobItCannotShow) {
  const std::string path = Path("odd.0");
  {
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open("leveldb", path, DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    std::unique_ptr<Writer> writer = (*db)->NewWriter().value();
    BlobProto proto;
    proto.set_name("mystery");
    proto.set_type("Mystery");
    proto.set_content("xyz");
    const std::string value = proto.SerializeAsString();
    ASSERT_TRUE(writer->Put("mystery", value).ok());
    BlobIndexBuilder manifest("odd", 0);
    CheckpointBlobInfo info;
    info.set_name("mystery");
    info.set_type("Mystery");
    manifest.StartBlob(info);
    manifest.AddValue("mystery", value);
    ASSERT_TRUE(writer->Put(kBlobIndexKey, manifest.Finish().value()).ok());
    writer.reset();
    ASSERT_TRUE((*db)->Close().ok());
  }
  Result r = RunTool({"dump", path, "mystery"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre("blob: mystery", "type: Mystery", "stored: 1 value, 23 bytes",
                  "value: (cannot be shown: no deserializer for type "
                  "'Mystery' is linked into ckpt)"));
}

// --- verify

// Flips the byte at `offset` of the first occurrence of `pattern` in
// whichever file of database `db` holds it; returns that file's name.
std::string DamagePattern(const std::string& db, const std::string& pattern,
                          size_t offset) {
  for (const std::string& name : List(db)) {
    const std::string path = JoinPath(db, name);
    absl::StatusOr<std::string> contents = ReadFileToString(path);
    if (!contents.ok()) continue;
    const size_t at = contents->find(pattern);
    if (at == std::string::npos) continue;
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(at + offset);
    const char flipped = (*contents)[at + offset] ^ 0x01;
    file.write(&flipped, 1);
    CHECK(file.good()) << path;
    return name;
  }
  ADD_FAILURE() << "no file of " << db << " holds the pattern";
  return "";
}

// Flips one byte in the middle of the run of kMarker floats in whichever
// file of database `db` holds it; returns that file's name.
std::string DamageMarker(const std::string& db) {
  std::string pattern;
  for (int i = 0; i < 8; ++i) {
    pattern.append(reinterpret_cast<const char*>(&kMarker), sizeof(kMarker));
  }
  return DamagePattern(db, pattern, 17);
}

TEST_F(CkptTest, VerifyPassesCleanCheckpointsAndNamesDamage) {
  SaveEpochs({0, 1});
  Commit({0, 1});
  const int64_t bytes = IndexOf(Path("trainer_0.0")).total_bytes();
  const std::string ok0 =
      absl::StrCat("epoch 0 trainer_0: ok (8 blobs, ", bytes, " bytes)");
  Result r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          ok0,
          absl::StrCat("epoch 1 trainer_0: ok (8 blobs, ", bytes, " bytes)"),
          absl::StrCat("OK: verified 2 databases of 2 committed epochs "
                       "in ",
                       dir_.path())));

  const std::string file = DamageMarker(Path("trainer_0.1"));
  EXPECT_THAT(file, ::testing::EndsWith(".ldb"));
  const std::string damage = absl::StrCat(
      "checkpoint ", Path("trainer_0.1"),
      ": value of key 'w#%0' (blob 'w') fails its CRC-32C check; the database "
      "is damaged");
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(ok0, absl::StrCat("epoch 1 trainer_0: DAMAGED: ", damage),
                  absl::StrCat("FAILED: 1 of 2 databases of 2 committed "
                               "epochs in ",
                               dir_.path(),
                               " failed (1 damaged, 0 missing, 0 "
                               "unreadable)")));

  r = RunTool({"verify", dir_.path(), "--epoch=0"});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  r = RunTool({"verify", dir_.path(), "--epoch=1"});
  EXPECT_EQ(r.code, kExitProblem);
  r = RunTool({"verify", dir_.path(), "--epoch=9"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: epoch 9 is not committed in ",
                                dir_.path(), " (committed epochs: 0, 1)\n"));

  r = RunTool({"verify", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, StartsWith(absl::StrCat(
                         "{\"dir\":", JsonQuote(dir_.path()),
                         ",\"ok\":false,\"commit_log\":\"ok\",\"commit_log_"
                         "error\":null,\"epochs\":[{\"epoch\":0,\"nodes\":[{"
                         "\"node\":\"trainer_0\",\"path\":",
                         JsonQuote(Path("trainer_0.0")),
                         ",\"status\":\"ok\",\"blobs\":8,\"bytes\":", bytes,
                         ",\"error\":null}]}")));
  EXPECT_THAT(
      r.out,
      HasSubstr(absl::StrCat(
          "{\"node\":\"trainer_0\",\"path\":", JsonQuote(Path("trainer_0.1")),
          ",\"status\":\"damaged\",\"blobs\":null,\"bytes\":null,"
          "\"error\":",
          JsonQuote(damage), "}")));
  EXPECT_THAT(r.out, ::testing::EndsWith("\"databases\":2,\"damaged\":1,"
                                         "\"missing\":0,\"unreadable\":0}\n"));

  // dump checks the value it shows.
  r = RunTool({"dump", Path("trainer_0.1"), "w"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", damage, "\n"));
  r = RunTool({"dump", Path("trainer_0.1"), "ids"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
}

TEST_F(CkptTest, VerifyReportsMissingDatabasesAndADamagedCommitLog) {
  SaveEpochs({0, 1});
  Commit({0, 1});
  ASSERT_TRUE(RemoveRecursively(Path("trainer_0.0")).ok());
  Result r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], absl::StrCat("epoch 0 trainer_0: MISSING: committed "
                                   "database ",
                                   Path("trainer_0.0"), " does not exist"));
  EXPECT_THAT(lines[1], StartsWith("epoch 1 trainer_0: ok ("));
  EXPECT_THAT(lines[2], ::testing::EndsWith(
                            "failed (0 damaged, 1 missing, 0 unreadable)"));

  WriteFile(Path("MANIFEST.jobgraph"), "garbage");
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(absl::StrCat("DAMAGED commit log: commit log ",
                               Path("MANIFEST.jobgraph"),
                               " is damaged: 7 bytes, shorter than the "
                               "20-byte header of a checksummed record"),
                  absl::StrCat("FAILED: the committed epochs of ", dir_.path(),
                               " cannot be known")));
  r = RunTool({"verify", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"ok\":false,\"commit_log\":\"damaged\","));
  // list cannot say what is committed either.
  r = RunTool({"list", dir_.path()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("shorter than the 20-byte header"));
}

// jobgraph writes a commit log before its first database, so databases
// without one mean the log was deleted: damage, not "nothing committed".
TEST_F(CkptTest, VerifyOfDatabasesWithoutACommitLogIsDamage) {
  Result r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitUsage) << r.out;  // nothing of a checkpoint at all
  ASSERT_TRUE(CreateCommitLogIfMissing(dir_.path(), "leveldb").ok());
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_EQ(r.out, absl::StrCat("OK: verified 0 databases of 0 committed "
                                "epochs in ",
                                dir_.path(), "\n"));
  ASSERT_TRUE(RemoveRecursively(Path("MANIFEST.jobgraph")).ok());

  SaveEpochs({0});
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.out,
            absl::StrCat("DAMAGED: ", dir_.path(),
                         " holds 1 database(s) but no commit log "
                         "(MANIFEST.jobgraph), so what is committed cannot be "
                         "known; `ckpt recover ",
                         dir_.path(),
                         "` rebuilds it from the databases that verify\n"));
  r = RunTool({"verify", dir_.path(), "--epoch=0"});
  EXPECT_EQ(r.code, kExitUsage);

  // gc still removes leftovers, and never an uncommitted database.
  const std::string temp = absl::StrCat(".trainer_0.1.tmp-", DeadPid(), "-0");
  MakeDir(Path(temp));
  r = RunTool({"gc", dir_.path(), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          "no MANIFEST.jobgraph: nothing is committed, so retention removes "
          "nothing",
          absl::StrCat("removed temporary database ", Path(temp), " (0 bytes)"),
          absl::StrCat("removed 1 item, 0 bytes, in ", dir_.path()),
          "left alone: 1 uncommitted database (not listed in the commit log; "
          "see `ckpt list`)"));
  EXPECT_THAT(List(dir_.path()), ElementsAre("trainer_0.0"));
}

// --- diff

TEST_F(CkptTest, DiffReportsAddedRemovedAndChangedBlobs) {
  Workspace ws;
  FillWorkspace(&ws);
  SaveDb(&ws, kBlobs, Path("a.0"), "trainer_0", 0);
  SaveDb(&ws, kBlobs, Path("b.1"), "trainer_0", 1);
  Result r = RunTool({"diff", Path("a.0"), Path("b.1")});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("--- ", Path("a.0"), " (node trainer_0, epoch 0)"),
          absl::StrCat("+++ ", Path("b.1"), " (node trainer_0, epoch 1)"),
          "identical: 8 blobs"));

  Workspace changed;
  FillWorkspace(&changed, /*w_value=*/1.0f);
  changed.SetTensor("ids", Tensor::Iota<int64_t>(50));
  changed.SetTensor("extra", Tensor::FromVector<int32_t>({1, 2}));
  SaveDb(&changed,
         {"cursor", "extra", "file", "ids", "shuffle", "step", "w", "words"},
         Path("c.2"), "trainer_0", 2);
  const CheckpointBlobInfo w_old = BlobInfo(IndexOf(Path("a.0")), "w");
  const CheckpointBlobInfo w_new = BlobInfo(IndexOf(Path("c.2")), "w");
  r = RunTool({"diff", Path("a.0"), Path("c.2")});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("--- ", Path("a.0"), " (node trainer_0, epoch 0)"),
          absl::StrCat("+++ ", Path("c.2"), " (node trainer_0, epoch 2)"),
          "+ extra (Tensor int32[2])",
          "~ ids: shape [100] -> [50]; stored as 13 -> 7 values",
          "- note (std::string)",
          absl::StrCat("~ w: 1 of 1 values differ (CRC-32C ",
                       CrcHex(w_old.value_crc32c(0)), " -> ",
                       CrcHex(w_new.value_crc32c(0)), ")"),
          "1 added, 1 removed, 2 changed, 5 unchanged"));

  r = RunTool({"diff", Path("a.0"), Path("missing.0")});
  EXPECT_EQ(r.code, kExitUsage);
}

// --- gc

TEST_F(CkptTest, GcAppliesRetentionAndRemovesOnlyJobgraphsLeftovers) {
  SaveEpochs({0, 1, 2, 3, 4});
  Commit({0, 1, 2, 3, 4});
  const int64_t dead = DeadPid();
  const std::string dead_temp = absl::StrCat(".trainer_0.5.tmp-", dead, "-0");
  MakeDir(Path(dead_temp));
  WriteFile(Path(dead_temp + "/000005.ldb"), "0123456789");
  const std::string live_temp =
      absl::StrCat(".trainer_0.6.tmp-", ::getpid(), "-0");
  MakeDir(Path(live_temp));
  const std::string commit_log_temp =
      absl::StrCat("MANIFEST.jobgraph.tmp-", dead);
  WriteFile(Path(commit_log_temp), "junk");
  // Not jobgraph's garbage: never touched.
  WriteFile(Path("notes.txt"), "mine");
  MakeDir(Path("other"));
  MakeDir(Path("trainer_0.9"));
  WriteFile(Path(".hidden.tmp-1"), "not a save's name");
  const std::vector<std::string> before = List(dir_.path());

  Result r = RunTool({"gc", dir_.path(), "--keep_last=2", "--dry_run"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 10u) << r.out;
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(lines[e], absl::StrCat("would remove committed epoch ", e, ": ",
                                     Path(absl::StrCat("trainer_0.", e))));
  }
  EXPECT_EQ(lines[3], "would keep committed epochs: 3, 4");
  EXPECT_EQ(lines[4], absl::StrCat("would remove temporary database ",
                                   Path(dead_temp), " (10 bytes)"));
  EXPECT_EQ(lines[5], absl::StrCat("kept temporary database ", live_temp,
                                   ": process ", ::getpid(),
                                   " that made it is running (--force removes "
                                   "it anyway)"));
  EXPECT_EQ(lines[6], absl::StrCat("would remove temporary commit log ",
                                   Path(commit_log_temp), " (4 bytes)"));
  EXPECT_THAT(lines[7], StartsWith("would remove 5 items, "));
  EXPECT_EQ(lines[8], "kept 1 temporary that may be in use");
  EXPECT_EQ(lines[9],
            "left alone: 1 uncommitted database (not listed in the commit log; "
            "see `ckpt list`)");
  EXPECT_THAT(List(dir_.path()), ElementsAreArray(before));

  // Keep the newest 2 and every epoch divisible by 3.
  r = RunTool({"gc", dir_.path(), "--keep_last=2", "--keep_every=3"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  lines = Lines(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0],
            absl::StrCat("removed committed epoch 1: ", Path("trainer_0.1")));
  EXPECT_EQ(lines[1],
            absl::StrCat("removed committed epoch 2: ", Path("trainer_0.2")));
  EXPECT_EQ(lines[2], "kept committed epochs: 0, 3, 4");
  EXPECT_THAT(lines, Contains(absl::StrCat("removed temporary database ",
                                           Path(dead_temp), " (10 bytes)")));
  EXPECT_THAT(
      List(dir_.path()),
      ElementsAre(".hidden.tmp-1", live_temp, "MANIFEST.jobgraph",
                  "MANIFEST.jobgraph.prev", "notes.txt", "other", "trainer_0.0",
                  "trainer_0.3", "trainer_0.4", "trainer_0.9"));
  absl::StatusOr<CommitLog> commit_log = ReadCommitLog(dir_.path());
  ASSERT_TRUE(commit_log.ok());
  ASSERT_EQ(commit_log->epoch_size(), 3);
  EXPECT_EQ(commit_log->epoch(2).epoch(), 4);

  // --keep_last=1 still never removes the newest; --force takes the
  // temporary whose process is alive.
  r = RunTool({"gc", dir_.path(), "--keep_last=1", "--force"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(List(dir_.path()),
              ElementsAre(".hidden.tmp-1", "MANIFEST.jobgraph",
                          "MANIFEST.jobgraph.prev", "notes.txt", "other",
                          "trainer_0.4", "trainer_0.9"));
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;

  r = RunTool({"gc", dir_.path(), "--keep_last=0"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out),
              ElementsAre(absl::StrCat("nothing to remove in ", dir_.path()),
                          "left alone: 1 uncommitted database (not listed in "
                          "the commit log; see `ckpt list`)"));
}

// A temporary commit log exists only while its writer holds the
// directory's lock; gc takes the lock, so one it finds there is a leftover
// even when its pid names a live process (a pid from another host, or
// reused). A dry run takes no lock and goes by the pid.
TEST_F(CkptTest, GcRemovesATemporaryCommitLogUnderTheLockWhateverItsPid) {
  SaveEpochs({0});
  Commit({0});
  const std::string temp =
      absl::StrCat("MANIFEST.jobgraph.tmp-", ::getpid(), "-7");
  WriteFile(Path(temp), "junk");
  Result r = RunTool({"gc", dir_.path(), "--keep_last=0", "--dry_run"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out),
              Contains(absl::StrCat("kept temporary commit log ", temp,
                                    ": process ", ::getpid(),
                                    " that made it is running (--force "
                                    "removes it anyway)")));
  r = RunTool({"gc", dir_.path(), "--keep_last=0"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");  // the lock was free: no wait
  EXPECT_THAT(Lines(r.out),
              Contains(absl::StrCat("removed temporary commit log ", Path(temp),
                                    " (4 bytes)")));
  EXPECT_THAT(List(dir_.path()),
              ElementsAre("MANIFEST.jobgraph", "trainer_0.0"));
}

TEST_F(CkptTest, GcKeepsATemporaryDatabaseThatIsOpen) {
  SaveEpochs({0});
  Commit({0});
  const int64_t dead = DeadPid();
  const std::string temp = absl::StrCat(".trainer_0.1.tmp-", dead, "-0");
  MakeDir(Path(temp));
  // Another process holds the lock that LevelDB takes on an open database: a
  // POSIX write lock on the whole LOCK file (LevelDB's LockFile). The child
  // only makes system calls, which is all that is safe after fork() in a
  // process with threads.
  int to_child[2];
  int from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const std::string lock = Path(temp + "/LOCK");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock f = {};
    f.l_type = F_WRLCK;
    f.l_whence = SEEK_SET;
    const char ready = fd >= 0 && ::fcntl(fd, F_SETLK, &f) == 0 ? 'y' : 'n';
    (void)!::write(from_child[1], &ready, 1);
    char done;
    (void)!::read(to_child[0], &done, 1);
    ::_exit(0);
  }
  char ready = 0;
  ASSERT_EQ(::read(from_child[0], &ready, 1), 1);
  ASSERT_EQ(ready, 'y');
  Result r = RunTool({"gc", dir_.path(), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out),
              Contains(absl::StrCat("kept temporary database ", temp,
                                    ": process ", child,
                                    " has the database open (--force removes "
                                    "it anyway)")));
  ASSERT_EQ(::write(to_child[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  r = RunTool({"gc", dir_.path(), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(List(dir_.path()),
              ElementsAre("MANIFEST.jobgraph", "trainer_0.0"));
}

// --- usage

TEST_F(CkptTest, BadUsageExitsWithTwoAndTheUsage) {
  Result r = RunTool({});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, Usage());

  r = RunTool({"help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out, Usage());
  for (const std::string command :
       {"list DIR", "show DB", "dump DB BLOB", "verify DIR", "diff DB1 DB2",
        "gc DIR --keep_last=N"}) {
    EXPECT_THAT(Usage(), HasSubstr(absl::StrCat("  ", command)));
  }

  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"list"}, "`list` takes 1 argument (DIR), got 0"},
      {{"dump", "db"}, "`dump` takes 2 arguments (DB BLOB), got 1"},
      {{"list", "d", "--bogus"},
       "unknown flag --bogus for `list` (it takes --db_type, --format)"},
      {{"list", "d", "--format=xml"}, "flag --format=xml must be text or json"},
      {{"verify", "d", "--epoch=-1"},
       "flag --epoch=-1 must be an integer in [0, 9223372036854775807]"},
      {{"gc", "d"}, "`gc` needs --keep_last=N"},
      {{"gc", "d", "--keep_last"}, "flag --keep_last needs a value"},
      {{"gc", "d", "--keep_last=1", "--dry_run=maybe"},
       "flag --dry_run=maybe must be true or false"},
  };
  for (const auto& [args, message] : cases) {
    r = RunTool(args);
    EXPECT_EQ(r.code, kExitUsage) << args[0];
    EXPECT_THAT(r.err, StartsWith(absl::StrCat("ckpt: ", message)));
    EXPECT_THAT(r.err, HasSubstr(Usage()));
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CkptTest, UnreadableInputExitsWithTwo) {
  Result r = RunTool({"list", Path("absent")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", Path("absent"), " does not exist\n"));

  MakeDir(Path("empty"));
  r = RunTool({"verify", Path("empty")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: ", Path("empty"),
                                " is not a jobgraph checkpoint directory: it "
                                "has no MANIFEST.jobgraph and no "
                                "<node>.<epoch> databases\n"));

  WriteFile(Path("file"), "x");
  r = RunTool({"gc", Path("file"), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            absl::StrCat("ckpt: ", Path("file"), " is not a directory\n"));

  // One database given where a directory is expected.
  SaveEpochs({0});
  r = RunTool({"list", Path("trainer_0.0")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("(it looks like one database: use `ckpt show` "
                               "on it)"));
}

// --- A checkpoint written by a real job.

// Caffe2's checkpoint_test pipeline on two nodes: values 0..9 read three at
// a time into a total that starts at 100.

TEST_F(CkptTest, InspectsTheCheckpointsOfAJob) {
  Job job;
  testing::BuildCaffe2Pipeline(job, 0);
  testing::BuildCaffe2Pipeline(job, 1);
  {
    LocalSession session;
    MultiNodeCheckpointManager manager({.directory = dir_.path()});
    JobRunner runner(job, &manager);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    ASSERT_EQ(*epochs, 4);
  }
  Result list = RunTool({"list", dir_.path()});
  EXPECT_EQ(list.code, kExitOk) << list.err;
  // Epoch 0 is saved after init, then one per epoch run.
  absl::StatusOr<CommitLog> commit_log = ReadCommitLog(dir_.path());
  ASSERT_TRUE(commit_log.ok()) << commit_log.status();
  const int epochs = commit_log->epoch_size();
  ASSERT_EQ(epochs, 5);  // 0 (after init) through 4, no retention
  std::vector<std::string> lines = Lines(list.out);
  ASSERT_EQ(lines.size(), epochs + 3u) << list.out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    EXPECT_THAT(
        lines[2 + epoch],
        StartsWith(absl::StrCat(epoch, " committed trainer_0,trainer_1 8 ")));
  }
  EXPECT_EQ(lines[2 + epochs],
            absl::StrCat(epochs, " committed epochs (newest ", epochs - 1,
                         "), 0 uncommitted, 0 incomplete"));

  Result verify = RunTool({"verify", dir_.path()});
  EXPECT_EQ(verify.code, kExitOk) << verify.out;
  EXPECT_THAT(verify.out, HasSubstr(absl::StrCat(
                              "OK: verified ", 2 * epochs, " databases of ",
                              epochs, " committed epochs in ", dir_.path())));

  Result show = RunTool({"show", Path("trainer_1.2")});
  EXPECT_EQ(show.code, kExitOk) << show.err;
  lines = Lines(show.out);
  ASSERT_EQ(lines.size(), 8u) << show.out;
  EXPECT_THAT(lines[1],
              StartsWith("node trainer_1, epoch 2, format version 1, saved "));
  EXPECT_THAT(lines[4], StartsWith("blob_names Tensor string [4] 1 "));
  EXPECT_THAT(
      lines[5],
      StartsWith("dataset:1_cursor std::unique_ptr<TreeCursor> - - 1 "));
  EXPECT_THAT(lines[6], StartsWith("total Tensor int64 [1] 1 "));
  EXPECT_THAT(lines[7], StartsWith("val Tensor int64 [10] 1 "));

  Result dump = RunTool({"dump", Path("trainer_1.2"), "total"});
  EXPECT_EQ(dump.code, kExitOk) << dump.err;
  EXPECT_THAT(Lines(dump.out), Contains("value: int64[1] {115}"));
  dump = RunTool({"dump", Path("trainer_1.2"), "dataset:1_cursor"});
  EXPECT_EQ(dump.code, kExitOk) << dump.err;
  EXPECT_THAT(Lines(dump.out),
              Contains("value: TreeCursor offset 6, fields [val]"));
  dump = RunTool({"dump", Path("trainer_0.2"), "blob_names"});
  EXPECT_EQ(dump.code, kExitOk) << dump.err;
  EXPECT_THAT(
      Lines(dump.out),
      Contains("value: string[4] {\"blob_names\", \"dataset:0_cursor\", "
               "\"total\", \"val\"}"));

  // Shown in the test log, as a sample of real output.
  std::cout << "$ ckpt list " << dir_.path() << "\n"
            << list.out << "$ ckpt show " << Path("trainer_1.2") << "\n"
            << show.out;
}

// --- Incremental checkpoints: databases that hold blobs by reference.

// The bytes of all of a blob's values.
int64_t BytesOf(const CheckpointBlobInfo& blob) {
  int64_t bytes = 0;
  for (int64_t b : blob.value_bytes()) bytes += b;
  return bytes;
}

// The blobs that `index` lists by reference, in its order.
std::vector<std::string> ReferencedNames(const BlobIndex& index) {
  std::vector<std::string> names;
  for (const CheckpointBlobInfo& blob : index.blob()) {
    if (blob.has_stored_in_epoch()) names.push_back(blob.name());
  }
  return names;
}

// The values 0..9 of the pipeline's 'val' as they are stored: int64,
// little-endian.
std::string ValBytes() {
  std::string bytes;
  for (int64_t i = 0; i < 10; ++i) {
    bytes.append(reinterpret_cast<const char*>(&i), sizeof(i));
  }
  return bytes;
}

// Caffe2's pipeline (as in InspectsTheCheckpointsOfAJob) saved
// incrementally: 'blob_names' and 'val' never change after init, so the
// databases of epochs 1 to 4 hold them by reference to epoch 0's and write
// only the cursor and 'total'.
class IncrementalCkptTest : public CkptTest {
 protected:
  // Runs the pipeline on trainer_0 .. trainer_<nodes - 1>; epochs 0 (after
  // init) to 4 are committed.
  void Train(int nodes) {
    Job job;
    for (int id = 0; id < nodes; ++id) testing::BuildCaffe2Pipeline(job, id);
    LocalSession session;
    Checkpointer checkpointer({.directory = dir_.path(), .incremental = true});
    JobRunner runner(job, &checkpointer);
    absl::StatusOr<int64_t> epochs = runner.Train(session);
    ASSERT_TRUE(epochs.ok()) << epochs.status();
    ASSERT_EQ(*epochs, 4);
    for (int id = 0; id < nodes; ++id) {
      ASSERT_THAT(ReferencedNames(IndexOf(Db(id, 0))), IsEmpty());
      for (int64_t epoch = 1; epoch <= 4; ++epoch) {
        const BlobIndex index = IndexOf(Db(id, epoch));
        ASSERT_THAT(ReferencedNames(index), ElementsAre("blob_names", "val"));
        ASSERT_THAT(index.referenced_epoch(), ElementsAre(0));
      }
    }
  }

  std::string Db(int id, int64_t epoch) const {
    return Path(absl::StrCat("trainer_", id, ".", epoch));
  }

  // The bytes trainer_<id>'s database of `epoch` holds by reference.
  int64_t ReferencedBytes(int id, int64_t epoch) const {
    const BlobIndex index = IndexOf(Db(id, epoch));
    return BytesOf(BlobInfo(index, "blob_names")) +
           BytesOf(BlobInfo(index, "val"));
  }

  CommitLog ReadLog() const {
    absl::StatusOr<CommitLog> log = ReadCommitLog(dir_.path());
    CHECK(log.ok()) << log.status();
    return *log;
  }

  void RemoveCommitLogs() {
    for (const std::string name :
         {"MANIFEST.jobgraph", "MANIFEST.jobgraph.prev"}) {
      absl::Status removed = RemoveRecursively(Path(name));
      ASSERT_TRUE(removed.ok() || absl::IsNotFound(removed)) << removed;
    }
  }
};

TEST_F(IncrementalCkptTest, ShowMarksTheBlobsHeldByReference) {
  Train(1);
  const std::string db = Db(0, 3);
  const BlobIndex index = IndexOf(db);
  const int64_t referenced = ReferencedBytes(0, 3);
  EXPECT_EQ(index.referenced_bytes(), referenced);
  // Every blob of the pipeline is one value.
  auto row = [&](const std::string& name, const std::string& columns,
                 const std::string& held_in) {
    const CheckpointBlobInfo& blob = BlobInfo(index, name);
    CHECK_EQ(blob.key_size(), 1) << name;
    return absl::StrCat(name, " ", columns, " 1 ", blob.value_bytes(0), " ",
                        CrcHex(blob.value_crc32c(0)), " ", held_in);
  };
  Result r = RunTool({"show", db});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("database ", db),
          absl::StrCat("node trainer_0, epoch 3, format version 2, saved ",
                       FormatUnixMicros(index.created_unix_micros())),
          absl::StrCat("4 blobs, 4 values, ", index.total_bytes(), " bytes (",
                       referenced, " held by reference in epoch 0)"),
          "NAME TYPE DTYPE SHAPE VALUES BYTES CRC32C HELD IN",
          row("blob_names", "Tensor string [4]", "epoch 0"),
          row("dataset:0_cursor", "std::unique_ptr<TreeCursor> - -", "-"),
          row("total", "Tensor int64 [1]", "-"),
          row("val", "Tensor int64 [10]", "epoch 0")));

  // --keys: a value's row leaves HELD IN empty.
  r = RunTool({"show", "--keys", db});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  auto val = std::find(lines.begin(), lines.end(),
                       row("val", "Tensor int64 [10]", "epoch 0"));
  ASSERT_NE(val, lines.end());
  ASSERT_NE(val + 1, lines.end());
  const CheckpointBlobInfo& val_info = BlobInfo(index, "val");
  EXPECT_EQ(*(val + 1), absl::StrCat("val#%0 ", val_info.value_bytes(0), " ",
                                     CrcHex(val_info.value_crc32c(0))));

  r = RunTool({"show", db, "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out,
              StartsWith(absl::StrCat(
                  "{\"path\":", JsonQuote(db),
                  ",\"format_version\":2,\"node\":\"trainer_0\",\"epoch\":3,"
                  "\"created_unix_micros\":",
                  index.created_unix_micros(), ",\"total_bytes\":",
                  index.total_bytes(), ",\"referenced_bytes\":", referenced,
                  ",\"referenced_epochs\":[0],\"blobs\":[")));
  const std::string val_crc = CrcHex(val_info.value_crc32c(0));
  EXPECT_THAT(
      r.out, HasSubstr(absl::StrCat(
                 "{\"name\":\"val\",\"type\":\"Tensor\",\"dtype\":"
                 "\"int64\",\"shape\":[10],\"values\":1,\"bytes\":",
                 val_info.value_bytes(0), ",\"crc32c\":\"", val_crc,
                 "\",\"stored_in_epoch\":0,\"keys\":[{\"key\":"
                 "\"val#%0\",\"bytes\":",
                 val_info.value_bytes(0), ",\"crc32c\":\"", val_crc, "\"}]}")));
  const CheckpointBlobInfo& total = BlobInfo(index, "total");
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "{\"name\":\"total\",\"type\":\"Tensor\",\"dtype\":"
                         "\"int64\",\"shape\":[1],\"values\":1,\"bytes\":",
                         total.value_bytes(0), ",\"crc32c\":\"",
                         CrcHex(total.value_crc32c(0)), "\",\"keys\":[")));

  // The full database of epoch 0 shows as before references existed.
  const BlobIndex full = IndexOf(Db(0, 0));
  r = RunTool({"show", Db(0, 0)});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 8u) << r.out;
  EXPECT_THAT(lines[1], StartsWith("node trainer_0, epoch 0, format version "
                                   "1, saved "));
  EXPECT_EQ(lines[2],
            absl::StrCat("4 blobs, 4 values, ", full.total_bytes(), " bytes"));
  EXPECT_EQ(lines[3], "NAME TYPE DTYPE SHAPE VALUES BYTES CRC32C");
  r = RunTool({"show", Db(0, 0), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("referenced")));
  EXPECT_THAT(r.out, Not(HasSubstr("stored_in_epoch")));
}

TEST_F(IncrementalCkptTest, ListShowsWhatEachEpochHoldsByReference) {
  Train(2);
  const CommitLog log = ReadLog();
  ASSERT_EQ(log.format_version(), 2);
  ASSERT_EQ(log.epoch_size(), 5);
  std::vector<std::string> expected = {
      absl::StrCat("checkpoint ", dir_.path(), " (leveldb, format version 2)"),
      "EPOCH STATE NODES BLOBS BYTES WRITTEN REFERENCED SAVE TIME"};
  for (int64_t epoch = 0; epoch <= 4; ++epoch) {
    const CommittedEpoch& e = log.epoch(epoch);
    const int64_t bytes = IndexOf(Db(0, epoch)).total_bytes() +
                          IndexOf(Db(1, epoch)).total_bytes();
    const int64_t referenced =
        epoch == 0 ? 0 : ReferencedBytes(0, epoch) + ReferencedBytes(1, epoch);
    // What the commit recorded, which `list` reads from the blob indexes.
    EXPECT_EQ(e.referenced_bytes(), referenced);
    EXPECT_EQ(e.referenced_epoch_size(), epoch == 0 ? 0 : 1);
    expected.push_back(
        absl::StrCat(epoch, " committed trainer_0,trainer_1 8 ", bytes, " ",
                     bytes - referenced, " ",
                     epoch == 0 ? "-" : absl::StrCat(referenced, " (epoch 0)"),
                     " ", FormatMicros(e.save_micros()), " ",
                     FormatUnixMicros(e.committed_unix_micros())));
  }
  expected.push_back(
      "5 committed epochs (newest 4), 0 uncommitted, 0 incomplete");
  Result r = RunTool({"list", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));

  r = RunTool({"list", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "\"blobs\":8,\"bytes\":", log.epoch(0).total_bytes(),
                         ",\"referenced_bytes\":0,\"referenced_epochs\":[],"
                         "\"save_micros\":",
                         log.epoch(0).save_micros(), ",")));
  EXPECT_THAT(r.out,
              HasSubstr(absl::StrCat(
                  "{\"epoch\":3,\"state\":\"committed\",\"nodes\":["
                  "\"trainer_0\",\"trainer_1\"],\"paths\":[",
                  JsonQuote(Db(0, 3)), ",", JsonQuote(Db(1, 3)),
                  "],\"blobs\":8,\"bytes\":", log.epoch(3).total_bytes(),
                  ",\"referenced_bytes\":", log.epoch(3).referenced_bytes(),
                  ",\"referenced_epochs\":[0],\"save_micros\":",
                  log.epoch(3).save_micros(), ",\"time_unix_micros\":",
                  log.epoch(3).committed_unix_micros(), ",\"problems\":[]}")));
}

TEST_F(IncrementalCkptTest, ListReportsReferencesToMissingOrUncommittedDbs) {
  Train(1);
  // A log that lists epochs 3 and 4 only, and leaves out what 4
  // references.
  const CommitLog original = ReadLog();
  CommitLog edited;
  edited.set_format_version(2);
  edited.set_db_type("leveldb");
  *edited.add_epoch() = original.epoch(3);
  CommittedEpoch* four = edited.add_epoch();
  *four = original.epoch(4);
  four->clear_referenced_epoch();
  ASSERT_TRUE(WriteCommitLog(dir_.path(), edited, /*is_commit=*/false).ok());
  auto problems = [&]() {
    Result r = RunTool({"list", dir_.path()});
    EXPECT_EQ(r.code, kExitOk) << r.err;
    std::vector<std::string> lines = Lines(r.out);
    auto at = std::find(lines.begin(), lines.end(), "problems:");
    return at == lines.end() ? std::vector<std::string>()
                             : std::vector<std::string>(at + 1, lines.end());
  };
  const std::string held = "blobs 'blob_names', 'val' in ";
  const std::string unlisted =
      "epoch 4 (committed): its databases refer to blobs in epoch 0, which "
      "its commit log entry does not list among the epochs it references: "
      "retention may delete epoch 0 while it is needed";
  EXPECT_THAT(problems(),
              ElementsAre(absl::StrCat("epoch 3 (committed): database ",
                                       Db(0, 3), " refers to ", held, Db(0, 0),
                                       " (epoch 0), which is not committed"),
                          absl::StrCat("epoch 4 (committed): database ",
                                       Db(0, 4), " refers to ", held, Db(0, 0),
                                       " (epoch 0), which is not committed"),
                          unlisted));

  ASSERT_TRUE(RemoveRecursively(Db(0, 0)).ok());
  std::vector<std::string> expected;
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    expected.push_back(absl::StrCat(
        "epoch ", epoch, epoch < 3 ? " (uncommitted)" : " (committed)",
        ": database ", Db(0, epoch), " refers to ", held, Db(0, 0),
        " (epoch 0), which is missing"));
  }
  expected.push_back(unlisted);
  EXPECT_THAT(problems(), ElementsAreArray(expected));
}

TEST_F(IncrementalCkptTest, VerifyReportsDamageForEveryEpochThatReferencesIt) {
  Train(1);
  auto ok_line = [&](int64_t epoch) {
    const BlobIndex index = IndexOf(Db(0, epoch));
    return absl::StrCat("epoch ", epoch, " trainer_0: ok (4 blobs, ",
                        index.total_bytes(), " bytes",
                        epoch == 0
                            ? ""
                            : absl::StrCat(", ", ReferencedBytes(0, epoch),
                                           " held by reference in epoch 0"),
                        ")");
  };
  Result r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(ok_line(0), ok_line(1), ok_line(2), ok_line(3), ok_line(4),
                  absl::StrCat("OK: verified 5 databases of 5 "
                               "committed epochs in ",
                               dir_.path())));

  r = RunTool({"verify", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out,
              HasSubstr(absl::StrCat(
                  "{\"node\":\"trainer_0\",\"path\":", JsonQuote(Db(0, 3)),
                  ",\"status\":\"ok\",\"blobs\":4,\"bytes\":",
                  IndexOf(Db(0, 3)).total_bytes(),
                  ",\"referenced_bytes\":", ReferencedBytes(0, 3),
                  ",\"referenced_epochs\":[0],\"error\":null}")));
  EXPECT_THAT(r.out,
              HasSubstr(absl::StrCat(
                  "{\"node\":\"trainer_0\",\"path\":", JsonQuote(Db(0, 0)),
                  ",\"status\":\"ok\",\"blobs\":4,\"bytes\":",
                  IndexOf(Db(0, 0)).total_bytes(), ",\"error\":null}")));

  // One byte of 'val' in epoch 0's database, which every later epoch
  // reads it from.
  EXPECT_THAT(DamagePattern(Db(0, 0), ValBytes(), 17),
              ::testing::EndsWith(".ldb"));
  const std::string damage = absl::StrCat(
      "checkpoint ", Db(0, 0),
      ": value of key 'val#%0' (blob 'val') fails its CRC-32C check; the "
      "database is damaged");
  auto referencing = [&](int64_t epoch) {
    return absl::StrCat("checkpoint ", Db(0, epoch),
                        " refers to blobs 'blob_names', 'val' in ", Db(0, 0),
                        " (epoch 0): ", damage);
  };
  std::vector<std::string> expected = {
      absl::StrCat("epoch 0 trainer_0: DAMAGED: ", damage)};
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    expected.push_back(absl::StrCat(
        "epoch ", epoch, " trainer_0: DAMAGED: ", referencing(epoch)));
  }
  expected.push_back(absl::StrCat(
      "FAILED: 5 of 5 databases of 5 committed epochs in ", dir_.path(),
      " failed (5 damaged, 0 missing, 0 unreadable)"));
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));

  // One epoch: it and the database it reads from.
  r = RunTool({"verify", dir_.path(), "--epoch=3"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(absl::StrCat("epoch 3 trainer_0: DAMAGED: ", referencing(3)),
                  absl::StrCat("FAILED: 1 of 1 database of 1 committed "
                               "epoch in ",
                               dir_.path(),
                               " failed (1 damaged, 0 missing, 0 "
                               "unreadable)")));

  r = RunTool({"verify", dir_.path(), "--format=json"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_TRUE(JsonChecker::Valid(r.out)) << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "{\"epoch\":3,\"nodes\":[{\"node\":\"trainer_0\","
                         "\"path\":",
                         JsonQuote(Db(0, 3)),
                         ",\"status\":\"damaged\",\"blobs\":null,\"bytes\":"
                         "null,\"error\":",
                         JsonQuote(referencing(3)), "}]}")));
  EXPECT_THAT(r.out, ::testing::EndsWith("\"databases\":5,\"damaged\":5,"
                                         "\"missing\":0,\"unreadable\":0}\n"));

  // The database they read from is gone.
  ASSERT_TRUE(RemoveRecursively(Db(0, 0)).ok());
  expected = {absl::StrCat("epoch 0 trainer_0: MISSING: committed database ",
                           Db(0, 0), " does not exist")};
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    expected.push_back(absl::StrCat(
        "epoch ", epoch, " trainer_0: DAMAGED: checkpoint ", Db(0, epoch),
        " refers to blobs in ", Db(0, 0),
        " (epoch 0), which is missing; the checkpoint of epoch ", epoch,
        " cannot be read (blobs 'blob_names', 'val' are held there)"));
  }
  expected.push_back(absl::StrCat(
      "FAILED: 5 of 5 databases of 5 committed epochs in ", dir_.path(),
      " failed (4 damaged, 1 missing, 0 unreadable)"));
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));
}

TEST_F(IncrementalCkptTest, DumpAndDiffReadBlobsThroughTheirReferences) {
  Train(1);
  const BlobIndex index = IndexOf(Db(0, 3));
  const int64_t val_bytes = BytesOf(BlobInfo(index, "val"));
  Result r = RunTool({"dump", Db(0, 3), "val"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre("blob: val", "type: Tensor",
                  absl::StrCat("stored: 1 value, ", val_bytes, " bytes"),
                  absl::StrCat("held in: epoch 0 (", Db(0, 0), ")"),
                  "value: int64[10] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}"));
  // A blob the database holds itself: as before.
  r = RunTool({"dump", Db(0, 3), "total"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre("blob: total", "type: Tensor",
                  absl::StrCat("stored: 1 value, ",
                               BytesOf(BlobInfo(index, "total")), " bytes"),
                  "value: int64[1] {136}"));

  // 'val' and 'blob_names', held by epoch 0 and referenced by epoch 1, are
  // the same values.
  const BlobIndex before = IndexOf(Db(0, 0));
  const BlobIndex after = IndexOf(Db(0, 1));
  auto changed = [&](const std::string& name) {
    return absl::StrCat("~ ", name, ": 1 of 1 values differ (CRC-32C ",
                        CrcHex(BlobInfo(before, name).value_crc32c(0)), " -> ",
                        CrcHex(BlobInfo(after, name).value_crc32c(0)), ")");
  };
  r = RunTool({"diff", Db(0, 0), Db(0, 1)});
  EXPECT_EQ(r.code, kExitProblem) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(
      Lines(r.out),
      ElementsAre(
          absl::StrCat("--- ", Db(0, 0), " (node trainer_0, epoch 0)"),
          absl::StrCat("+++ ", Db(0, 1), " (node trainer_0, epoch 1, ",
                       ReferencedBytes(0, 1), " held by reference in epoch 0)"),
          changed("dataset:0_cursor"), changed("total"),
          "0 added, 0 removed, 2 changed, 2 unchanged"));

  // Damage in the database that holds them is damage of what is compared.
  DamagePattern(Db(0, 0), ValBytes(), 17);
  const std::string damage = absl::StrCat(
      "checkpoint ", Db(0, 0),
      ": value of key 'val#%0' (blob 'val') fails its CRC-32C check; the "
      "database is damaged");
  r = RunTool({"dump", Db(0, 3), "val"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: checkpoint ", Db(0, 3),
                                " refers to blob 'val' in ", Db(0, 0),
                                " (epoch 0): ", damage, "\n"));
  r = RunTool({"diff", Db(0, 2), Db(0, 3)});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, absl::StrCat("ckpt: checkpoint ", Db(0, 2),
                                " refers to blobs 'blob_names', 'val' in ",
                                Db(0, 0), " (epoch 0): ", damage, "\n"));

  ASSERT_TRUE(RemoveRecursively(Db(0, 0)).ok());
  r = RunTool({"dump", Db(0, 3), "val"});
  EXPECT_EQ(r.code, kExitProblem);
  EXPECT_EQ(r.err, absl::StrCat("ckpt: checkpoint ", Db(0, 3),
                                " refers to blobs in ", Db(0, 0),
                                " (epoch 0), which is missing; the checkpoint "
                                "of epoch 3 cannot be read (blob 'val' is "
                                "held there)\n"));
}

TEST_F(IncrementalCkptTest, RecoverRebuildsTheReferencesOfEachEpoch) {
  Train(2);
  const CommitLog original = ReadLog();
  RemoveCommitLogs();
  Result r = RunTool({"recover", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> expected;
  for (const CommittedEpoch& e : original.epoch()) {
    expected.push_back(absl::StrCat(
        "recovered epoch ", e.epoch(), ": trainer_0, trainer_1 (",
        e.total_bytes(), " bytes",
        e.epoch() == 0 ? ""
                       : absl::StrCat(", ", e.referenced_bytes(),
                                      " held by reference in epoch 0"),
        ")"));
  }
  expected.push_back(absl::StrCat("wrote ", Path("MANIFEST.jobgraph"),
                                  " listing epochs 0, 1, 2, 3, 4"));
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));

  const CommitLog recovered = ReadLog();
  EXPECT_EQ(recovered.format_version(), 2);
  EXPECT_EQ(recovered.db_type(), "leveldb");
  ASSERT_EQ(recovered.epoch_size(), 5);
  for (int i = 0; i < 5; ++i) {
    CommittedEpoch want = original.epoch(i);
    CommittedEpoch got = recovered.epoch(i);
    EXPECT_THAT(got.referenced_epoch(),
                ElementsAreArray(i == 0 ? std::vector<int64_t>{}
                                        : std::vector<int64_t>{0}));
    EXPECT_EQ(got.referenced_bytes(),
              i == 0 ? 0 : ReferencedBytes(0, i) + ReferencedBytes(1, i));
    // The times are not in the databases.
    for (CommittedEpoch* e : {&want, &got}) {
      e->clear_committed_unix_micros();
      e->clear_save_micros();
    }
    EXPECT_EQ(got.DebugString(), want.DebugString()) << "epoch " << i;
  }
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;
}

TEST_F(IncrementalCkptTest, RecoverSkipsEpochsWhoseReferencesAreDamaged) {
  Train(1);
  RemoveCommitLogs();
  // Damage in the database that every epoch reads 'val' from: none can be
  // restored, so none is listed.
  DamagePattern(Db(0, 0), ValBytes(), 17);
  const std::string damage = absl::StrCat(
      "checkpoint ", Db(0, 0),
      ": value of key 'val#%0' (blob 'val') fails its CRC-32C check; the "
      "database is damaged");
  std::vector<std::string> expected = {absl::StrCat(
      "skipped epoch 0: no database that verifies for trainer_0; ", damage)};
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    expected.push_back(
        absl::StrCat("skipped epoch ", epoch,
                     ": no database that verifies for trainer_0; checkpoint ",
                     Db(0, epoch), " refers to blobs 'blob_names', 'val' in ",
                     Db(0, 0), " (epoch 0): ", damage));
  }
  expected.push_back(absl::StrCat(
      "FAILED: no epoch of ", dir_.path(),
      " has a database that verifies for every node; nothing written"));
  Result r = RunTool({"recover", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem) << r.err;
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));
}

// Databases that verify, of epochs that read from one that is not
// recovered: a node with full databases of epochs 1 to 4 only leaves epoch
// 0 out, and with it every epoch that reads blobs from it.
TEST_F(IncrementalCkptTest, RecoverSkipsEpochsThatReferenceOnesNotRecovered) {
  Train(1);
  RemoveCommitLogs();
  Workspace ws;
  FillWorkspace(&ws);
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    SaveDb(&ws, {"w"}, Path(absl::StrCat("extra.", epoch)), "extra", epoch);
  }
  std::vector<std::string> expected = {
      "skipped epoch 0: no database that verifies for extra"};
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    expected.push_back(absl::StrCat("skipped epoch ", epoch,
                                    ": its databases refer to blobs in epoch "
                                    "0, which is not recovered"));
  }
  expected.push_back(absl::StrCat(
      "FAILED: no epoch of ", dir_.path(),
      " has a database that verifies for every node; nothing written"));
  Result r = RunTool({"recover", dir_.path()});
  EXPECT_EQ(r.code, kExitProblem) << r.err;
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected));
  EXPECT_THAT(List(dir_.path()), Not(Contains("MANIFEST.jobgraph")));
}

TEST_F(IncrementalCkptTest, GcKeepsWhatTheKeptEpochsReference) {
  Train(1);
  int64_t bytes = 0;
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    absl::StatusOr<int64_t> disk = DiskBytes(Db(0, epoch));
    ASSERT_TRUE(disk.ok()) << disk.status();
    bytes += *disk;
  }
  auto expected = [&](const std::string& removed, const std::string& kept) {
    std::vector<std::string> lines;
    for (int64_t epoch = 1; epoch <= 3; ++epoch) {
      lines.push_back(absl::StrCat(removed, " committed epoch ", epoch, ": ",
                                   Db(0, epoch)));
    }
    lines.push_back(absl::StrCat(kept,
                                 " committed epoch 0: epoch 4 refers "
                                 "to blobs in it"));
    lines.push_back(absl::StrCat(kept, " committed epochs: 0, 4"));
    lines.push_back(
        absl::StrCat(removed, " 3 items, ", bytes, " bytes, in ", dir_.path()));
    return lines;
  };
  Result r = RunTool({"gc", dir_.path(), "--keep_last=1", "--dry_run"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out),
              ElementsAreArray(expected("would remove", "would keep")));
  r = RunTool({"gc", dir_.path(), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(Lines(r.out), ElementsAreArray(expected("removed", "kept")));
  EXPECT_THAT(List(dir_.path()),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                          "trainer_0.0", "trainer_0.4"));
  const CommitLog log = ReadLog();
  ASSERT_EQ(log.epoch_size(), 2);
  EXPECT_EQ(log.epoch(0).epoch(), 0);
  EXPECT_EQ(log.epoch(1).epoch(), 4);
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;
  EXPECT_THAT(Lines(r.out),
              ElementsAre(StartsWith("epoch 0 trainer_0: ok ("),
                          StartsWith("epoch 4 trainer_0: ok ("),
                          absl::StrCat("OK: verified 2 databases of 2 "
                                       "committed epochs in ",
                                       dir_.path())));
}

// A commit log that does not list an epoch's references (say, edited by
// hand): gc goes by the blob indexes too and still keeps what they read.
TEST_F(IncrementalCkptTest, GcKeepsWhatTheDatabasesReferenceBeyondTheLog) {
  Train(1);
  CommitLog log = ReadLog();
  for (CommittedEpoch& e : *log.mutable_epoch()) {
    e.clear_referenced_epoch();
    e.clear_referenced_bytes();
  }
  log.set_format_version(1);
  ASSERT_TRUE(WriteCommitLog(dir_.path(), log, /*is_commit=*/false).ok());
  Result r = RunTool({"gc", dir_.path(), "--keep_last=1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[3], "kept committed epoch 0: epoch 4 refers to blobs in it");
  EXPECT_EQ(lines[4], "kept committed epochs: 0, 4");
  EXPECT_THAT(List(dir_.path()),
              ElementsAre("MANIFEST.jobgraph", "MANIFEST.jobgraph.prev",
                          "trainer_0.0", "trainer_0.4"));
  r = RunTool({"verify", dir_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.out;
}

}  // namespace
}  // namespace ckpt
}  // namespace jobgraph

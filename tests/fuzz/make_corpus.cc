// Writes the seed corpus of every fuzzer (tests/fuzz/corpus/<fuzzer>/) from
// real values: tensors, strings, counters and cursors serialized by the
// registry, their blob index, a commit log and a LevelDB database written by
// the checkpoint code, plan positions of real stopped runs, and an image of
// a whole checkpoint directory; and, for each fuzzer, inputs that the code
// under test refuses (a flipped bit, a truncation), so that the replay tests
// see both outcomes.
//
//   bazel run //tests/fuzz:make_corpus -- $PWD/tests/fuzz/corpus
//
// Existing files of the same names are replaced; others are left alone (so
// regression inputs stay).

#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/checksummed.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/data/file_cursor.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/tree_cursor.h"
#include "engine/plan_executor.h"
#include "engine/serialization.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/db_files_fixture.h"
#include "tests/fuzz/fuzz_plan.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

using fuzz::ArchiveEntry;
using fuzz::kDbFileList;
using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string g_out;

void Check(const absl::Status& status) {
  FUZZ_CHECK(status.ok(), status.ToString());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FUZZ_CHECK(in.good(), path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void Seed(const std::string& fuzzer, const std::string& name,
          const std::string& bytes) {
  const std::string dir = absl::StrCat(g_out, "/", fuzzer);
  ::mkdir(g_out.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  std::ofstream out(absl::StrCat(dir, "/", name), std::ios::binary);
  out << bytes;
  FUZZ_CHECK(out.good(), name);
}

std::string Len16(size_t n) {
  FUZZ_CHECK(n <= 0xffff, "too long");
  return std::string{static_cast<char>(n & 0xff), static_cast<char>(n >> 8)};
}

// Named blobs of every serialized kind.
struct NamedBlob {
  std::string name;
  std::unique_ptr<Blob> blob;
};

std::vector<NamedBlob> SampleBlobs() {
  std::vector<NamedBlob> blobs;
  auto add = [&](std::string name) -> Blob* {
    blobs.push_back({std::move(name), std::make_unique<Blob>()});
    return blobs.back().blob.get();
  };
  add("blob_names")
      ->Reset(std::make_unique<Tensor>(Tensor::FromVector<std::string>(
          {"budget", "cursor", "file", "shuffle", "total", "w"})));
  add("budget")->Reset(std::make_unique<Counter>(7));
  add("cursor")->Reset(
      std::make_unique<TreeCursor>(std::vector<std::string>{"val"}, 3));
  add("file")->Reset(std::make_unique<FileCursor>("/data/input.txt", 120));
  ShuffleCursor::State state;
  state.seed = 42;
  state.epoch = 1;
  state.position = 2;
  state.num_rows = 10;
  add("shuffle")->Reset(std::make_unique<ShuffleCursor>(
      std::vector<std::string>{"a", "b"}, state));
  add("text")->Reset(std::make_unique<std::string>("hello"));
  add("total")->Reset(
      std::make_unique<Tensor>(Tensor::FromVector<int64_t>({145})));
  add("w")->Reset(std::make_unique<Tensor>(
      Tensor::FromVector<float>(std::vector<float>(15, 1234.5f), {3, 5})));
  add("d")->Reset(
      std::make_unique<Tensor>(Tensor::FromVector<double>({0.5, -1, 1e300})));
  add("flags")->Reset(
      std::make_unique<Tensor>(Tensor::FromVector<bool>({true, false, true})));
  add("bytes")->Reset(
      std::make_unique<Tensor>(Tensor::FromVector<uint8_t>({1, 2, 255})));
  add("i32")->Reset(
      std::make_unique<Tensor>(Tensor::FromVector<int32_t>({-1, 0, 7})));
  add("empty")->Reset(
      std::make_unique<Tensor>(FLOAT, std::vector<int64_t>{0, 4}));
  return blobs;
}

Pairs Serialize(const NamedBlob& blob, int64_t chunk_bytes) {
  absl::StatusOr<Pairs> pairs =
      SerializeBlobToPairs(blob.name, *blob.blob, {.chunk_bytes = chunk_bytes});
  Check(pairs.status());
  return *std::move(pairs);
}

// `bytes` with one bit of its last byte flipped.
std::string FlipLastBit(std::string bytes) {
  FUZZ_CHECK(!bytes.empty(), "nothing to flip");
  bytes.back() ^= 1;
  return bytes;
}

void BlobAndCursorSeeds() {
  const std::vector<NamedBlob> blobs = SampleBlobs();
  std::vector<ArchiveEntry> all_small_chunks;
  for (const NamedBlob& blob : blobs) {
    for (int64_t chunk_bytes : {int64_t{64} << 20, int64_t{8}}) {
      std::vector<ArchiveEntry> entries;
      for (auto& [key, value] : Serialize(blob, chunk_bytes)) {
        entries.push_back({key, value});
      }
      const bool whole = chunk_bytes > 8;
      if (!whole) {
        all_small_chunks.insert(all_small_chunks.end(), entries.begin(),
                                entries.end());
      }
      Seed("blob_fuzzer", absl::StrCat(blob.name, whole ? "" : "_chunks"),
           std::string(1, whole ? '\x80' : '\x08') +
               fuzz::WriteArchive(entries));
    }
  }
  // Chunks of several blobs, interleaved in reverse order.
  std::vector<ArchiveEntry> reversed(all_small_chunks.rbegin(),
                                     all_small_chunks.rend());
  if (reversed.size() > 16) reversed.resize(16);
  Seed("blob_fuzzer", "interleaved",
       std::string(1, '\x05') + fuzz::WriteArchive(reversed));

  const std::vector<std::pair<std::string, char>> cursors = {
      {"cursor", 0}, {"shuffle", 1}, {"file", 2}, {"text", 3}, {"budget", 4}};
  for (const auto& [name, selector] : cursors) {
    for (const NamedBlob& blob : blobs) {
      if (blob.name != name) continue;
      Seed("cursor_fuzzer", name,
           std::string(1, selector) + Serialize(blob, 64 << 20)[0].second);
    }
  }
  // A string read as a counter: the counter's serializer refuses it.
  for (const NamedBlob& blob : blobs) {
    if (blob.name != "text") continue;
    Seed("cursor_fuzzer", "text_as_counter",
         std::string(1, '\x04') + Serialize(blob, 64 << 20)[0].second);
  }
  // A Caffe2 TreeCursor that never read: no tensor.
  BlobProto never_read;
  never_read.set_name("cursor");
  never_read.set_content("val ");
  Seed("cursor_fuzzer", "tree_cursor_never_read",
       std::string(1, '\0') + never_read.SerializeAsString());
}

// One database's entries and its blob index, as Save writes them.
std::vector<ArchiveEntry> DatabaseEntries(int64_t chunk_bytes,
                                          BlobIndex* index) {
  BlobIndexBuilder builder("trainer_0", 1);
  std::vector<ArchiveEntry> entries;
  std::vector<NamedBlob> blobs = SampleBlobs();
  std::sort(
      blobs.begin(), blobs.end(),
      [](const NamedBlob& a, const NamedBlob& b) { return a.name < b.name; });
  for (const NamedBlob& blob : blobs) {
    CheckpointBlobInfo info;
    info.set_name(blob.name);
    info.set_type(blob.blob->TypeName());
    if (blob.blob->IsType<Tensor>()) {
      const Tensor& t = blob.blob->Get<Tensor>();
      for (int64_t d : t.shape()) info.add_dims(d);
      info.set_data_type(t.dtype());
    }
    builder.StartBlob(info);
    for (auto& [key, value] : Serialize(blob, chunk_bytes)) {
      builder.AddValue(key, value);
      entries.push_back({key, value});
    }
  }
  FUZZ_CHECK(index->ParseFromString(builder.Finish().value()), "blob index");
  return entries;
}

void BlobIndexSeeds() {
  for (int64_t chunk_bytes : {int64_t{64} << 20, int64_t{16}}) {
    BlobIndex index;
    std::vector<ArchiveEntry> entries = DatabaseEntries(chunk_bytes, &index);
    entries.insert(entries.begin(), {kBlobIndexKey, index.SerializeAsString()});
    while (entries.size() > 32) entries.pop_back();  // the harness's limit
    const std::string name = chunk_bytes > 16 ? "database" : "database_chunks";
    Seed("blob_index_fuzzer", name,
         std::string(1, '\x00') + fuzz::WriteArchive(entries));
    Seed("blob_index_fuzzer", name + "_fixed_up",
         std::string(1, '\x01') + fuzz::WriteArchive(entries));
    if (chunk_bytes > 16) {
      // The last value damaged: its CRC-32C no longer matches the index.
      Seed("blob_index_fuzzer", "database_value_bit_flipped",
           std::string(1, '\x00') + FlipLastBit(fuzz::WriteArchive(entries)));
    }
  }
}

// A real checkpoint directory: epochs 0 and 1 of node trainer_0 committed,
// written through the LevelDB adapter and the commit log code.
void WriteCheckpoint(const std::string& dir) {
  Check(CreateCommitLogIfMissing(dir, kDefaultDbType));
  for (int64_t epoch : {0, 1}) {
    const std::string path = absl::StrCat(dir, "/trainer_0.", epoch);
    DbOptions options;
    options.durable_close = false;
    absl::StatusOr<std::unique_ptr<DB>> db =
        DbRegistry::Global().Open(kDefaultDbType, path, DbMode::kNew, options);
    Check(db.status());
    BlobIndex index;
    std::vector<ArchiveEntry> entries = DatabaseEntries(64 << 20, &index);
    index.set_epoch(epoch);
    {
      absl::StatusOr<std::unique_ptr<Writer>> writer = (*db)->NewWriter();
      Check(writer.status());
      for (const ArchiveEntry& e : entries)
        Check((*writer)->Put(e.name, e.bytes));
      Check((*writer)->Put(kBlobIndexKey, index.SerializeAsString()));
      Check((*writer)->Flush());
    }
    Check((*db)->Close());
    EpochCommit commit;
    commit.epoch = epoch;
    commit.nodes = {"trainer_0"};
    commit.total_bytes = index.total_bytes();
    commit.save_micros = 1000;
    if (epoch == 1) {
      Preemption preemption;
      preemption.set_group(JOB_GROUP_EPOCH);
      preemption.set_signal("SIGTERM");
      commit.preemption = preemption;
    }
    Check(CommitEpoch(dir, kDefaultDbType, commit));
  }
}

// The files of `dir` (one level of subdirectories), as archive entries.
void CollectFiles(const std::string& dir, const std::string& prefix,
                  std::vector<ArchiveEntry>* entries) {
  DIR* d = ::opendir(dir.c_str());
  FUZZ_CHECK(d != nullptr, dir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    FUZZ_CHECK(::stat(path.c_str(), &st) == 0, path);
    if (S_ISDIR(st.st_mode)) {
      CollectFiles(path, absl::StrCat(prefix, name, "/"), entries);
    } else if (name != "LOG" && name != "LOG.old") {
      // LevelDB's info log is not part of the data (ckpt reads neither it
      // nor its old copy); leaving it out keeps the seeds small. The lock
      // file is listed in JOBGRAPH_FILES, so `ckpt verify` needs it.
      entries->push_back({absl::StrCat(prefix, name), ReadFile(path)});
    }
  }
}

// An input of commit_log_append_fuzzer (its file comment has the layout).
void AppendSeed(const std::string& name, uint8_t log_mode, uint8_t commit_mode,
                uint8_t epoch, const std::string& log,
                const std::string& previous = "") {
  Seed("commit_log_append_fuzzer", name,
       std::string{static_cast<char>(log_mode), static_cast<char>(commit_mode),
                   static_cast<char>(epoch)} +
           Len16(log.size()) + log + previous);
}

// Commits over `log` (a real framed commit log listing epochs 0 and 1 of
// trainer_0, epoch 1 a preemption checkpoint), over its previous copy `prev`
// and over `payload` (the log unframed), whole, damaged or missing.
void CommitLogAppendSeeds(const std::string& log, const std::string& prev,
                          const std::string& payload) {
  // Log mode bits.
  constexpr uint8_t kFrameLog = 1, kWritePrev = 2, kNoLog = 8;
  // Commit mode bits.
  constexpr uint8_t kPrepared = 1, kPreempted = 2, kIncremental = 4, kTwice = 8,
                    kTwoNodes = 16, kRetire = 32, kRelative = 64,
                    kOtherJob = 128;
  // Accepted: epoch 2 appended (the usual commit), ...
  AppendSeed("append_next", 0, kRelative, 0, log);
  AppendSeed("append_twice_prepared", kWritePrev,
             kRelative | kTwice | kPrepared | kPreempted, 0, log, prev);
  AppendSeed("incremental_twice", 0, kRelative | kIncremental | kTwice, 0, log);
  AppendSeed("retire_oldest", 0, kRelative | kRetire | kTwoNodes, 0, log);
  AppendSeed("other_job", 0, kRelative | kOtherJob | kTwice, 0, log);
  AppendSeed("payload", kFrameLog, kRelative, 0, payload);
  AppendSeed("bare_payload_old_format", 0, kRelative, 0, payload);
  // ... epoch 1 saved again (its entry replaced) ...
  AppendSeed("resave_epoch_1", 0, 0, 1, log);
  // ... a log that lists another job's epochs and is out of order ...
  CommitLog mixed;
  mixed.set_format_version(1);
  mixed.set_db_type(kDefaultDbType);
  for (const auto& [epoch, node] : std::vector<std::pair<int64_t, std::string>>{
           {3, "trainer_0"}, {1, "reader_0"}, {2, "trainer_0"}}) {
    CommittedEpoch* entry = mixed.add_epoch();
    entry->set_epoch(epoch);
    entry->add_node(node);
    entry->set_total_bytes(100 * epoch);
    entry->set_committed_unix_micros(1000 + epoch);
  }
  AppendSeed("out_of_order_two_jobs", kFrameLog, kRelative, 0,
             mixed.SerializeAsString());
  // ... a directory without a log, or whose log is missing or damaged
  // beside an intact previous copy.
  AppendSeed("no_log", kNoLog, 0, 0, "");
  AppendSeed("log_missing_prev_intact", kNoLog | kWritePrev, kRelative, 0, "",
             log);
  AppendSeed("log_bit_flipped_prev_intact", kWritePrev, kRelative, 0,
             FlipLastBit(log), prev);
  // Refused: a damaged log without a copy, a newer format, an incremental
  // save that references an epoch its job has not listed.
  AppendSeed("log_truncated", 0, kRelative, 0, log.substr(0, log.size() - 1));
  CommitLog newer;
  newer.set_format_version(kCommitLogFormatVersion + 1);
  newer.set_db_type(kDefaultDbType);
  AppendSeed("newer_format", kFrameLog, kRelative, 0,
             newer.SerializeAsString());
  AppendSeed("reference_not_listed", 0, kRelative | kIncremental | kOtherJob, 0,
             log);
}

void CheckpointSeeds() {
  fuzz::ScratchDir scratch("make_corpus");
  const std::string dir = scratch.path();
  WriteCheckpoint(dir);

  // The commit log, and its previous copy (one commit less).
  const std::string log_path =
      absl::StrCat(dir, "/", std::string(kCommitLogFileName));
  const std::string log = ReadFile(log_path);
  const std::string prev = ReadFile(absl::StrCat(log_path, ".prev"));
  absl::StatusOr<Unframed> payload = UnframeChecksummed(log, "log");
  Check(payload.status());
  Seed("commit_log_fuzzer", "log",
       std::string(1, '\x00') + Len16(log.size()) + log);
  Seed("commit_log_fuzzer", "log_and_prev",
       std::string(1, '\x02') + Len16(log.size()) + log + prev);
  Seed("commit_log_fuzzer", "payload",
       std::string(1, '\x01') + Len16(payload->payload.size()) +
           payload->payload);
  Seed("commit_log_fuzzer", "bare_payload_old_format",
       std::string(1, '\x00') + Len16(payload->payload.size()) +
           payload->payload);
  Seed("commit_log_fuzzer", "commit_over_log",
       std::string(1, '\x50') + Len16(log.size()) + log);
  Seed("commit_log_fuzzer", "prev_only_framed",
       std::string(1, '\x0e') + Len16(0) + payload->payload);
  Seed("commit_log_fuzzer", "log_bit_flipped",
       std::string(1, '\x00') + Len16(log.size()) + FlipLastBit(log));
  CommitLogAppendSeeds(log, prev, payload->payload);

  // JOBGRAPH_FILES of a real database.
  const std::string files =
      ReadFile(absl::StrCat(dir, "/trainer_0.1/", kDbFileList));
  absl::StatusOr<Unframed> files_payload = UnframeChecksummed(files, "files");
  Check(files_payload.status());
  Seed("db_files_fuzzer", "file_list", std::string(1, '\x00') + files);
  Seed("db_files_fuzzer", "file_list_payload",
       std::string(1, '\x01') + files_payload->payload);
  Seed("db_files_fuzzer", "file_list_bit_flipped",
       std::string(1, '\x00') + FlipLastBit(files));
  // The list of the fuzzer's own database, which verifies: framed, and its
  // payload for the harness to frame.
  fuzz::ScratchDir fixture_scratch("make_corpus_db_files");
  const std::string fixture =
      absl::StrCat(fixture_scratch.path(), "/trainer_0.1");
  fuzz::WriteDbFilesFixture(fixture);
  const std::string fixture_files =
      ReadFile(absl::StrCat(fixture, "/", kDbFileList));
  absl::StatusOr<Unframed> fixture_payload =
      UnframeChecksummed(fixture_files, "fixture files");
  Check(fixture_payload.status());
  Seed("db_files_fuzzer", "fixture_file_list",
       std::string(1, '\x00') + fixture_files);
  Seed("db_files_fuzzer", "fixture_file_list_payload",
       std::string(1, '\x01') + fixture_payload->payload);

  // The whole directory.
  std::vector<ArchiveEntry> image;
  CollectFiles(dir, "", &image);
  Seed("ckpt_fuzzer", "checkpoint",
       std::string(1, '\x00') + fuzz::WriteArchive(image));
  Seed("ckpt_fuzzer", "checkpoint_json",
       std::string(1, '\x01') + fuzz::WriteArchive(image));
}

void PlanPositionSeeds() {
  const PlanDef plan = fuzz::FuzzPlan();
  for (int check = 0;; ++check) {
    Workspace ws(nullptr, "root");
    RunControl control;
    control.stop_at_check.store(check);
    PlanPosition position;
    absl::Status status =
        RunPlan(&ws, plan, {.control = &control, .stopped_at = &position});
    if (status.ok()) break;  // the plan ran to its end before the stop
    FUZZ_CHECK(IsStopRequest(status), status.ToString());
    Seed("plan_position_fuzzer", absl::StrCat("stop_", check),
         position.SerializeAsString());
  }
  PlanPosition finished;
  finished.set_plan(plan.name());
  finished.set_finished(true);
  Seed("plan_position_fuzzer", "finished", finished.SerializeAsString());
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus OUTPUT_DIR\n");
    return 2;
  }
  jobgraph::g_out = argv[1];
  jobgraph::BlobAndCursorSeeds();
  jobgraph::BlobIndexSeeds();
  jobgraph::CheckpointSeeds();
  jobgraph::PlanPositionSeeds();
  std::printf("corpus written to %s\n", argv[1]);
  return 0;
}

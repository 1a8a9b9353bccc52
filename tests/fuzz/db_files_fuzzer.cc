// Fuzzes the check of a LevelDB database's JOBGRAPH_FILES (a DbFileList in a
// checksummed frame, checkpoint/FORMAT.md section 4) by DB::VerifyFiles.
//
// A small real database (db_files_fixture.h) is written once; each input
// replaces its JOBGRAPH_FILES and the database, open for reading, verifies
// its files.
// Input: a mode byte, then the file's bytes. Mode bit 1: frame the bytes
// with a correct checksum, so that the DbFileList is what varies.
// Invariants: the pristine list verifies; a list that verifies names only
// files inside the database directory.
// Outcome (fuzz::NoteOutcome): accepted when VerifyFiles accepts the list.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/file_util.h"
#include "proto/jobgraph.pb.h"
#include "tests/fuzz/db_files_fixture.h"
#include "tests/fuzz/fuzz_util.h"

namespace jobgraph {
namespace {

using fuzz::kDbFileList;

struct Fixture {
  fuzz::ScratchDir scratch{"db_files"};
  std::string db_path;
  std::string list_path;
  std::unique_ptr<DB> db;
};

Fixture& GetFixture() {
  static Fixture* const fixture = [] {
    auto* f = new Fixture;
    f->db_path = absl::StrCat(f->scratch.path(), "/trainer_0.1");
    f->list_path = absl::StrCat(f->db_path, "/", kDbFileList);
    fuzz::WriteDbFilesFixture(f->db_path);
    absl::StatusOr<std::unique_ptr<DB>> reader =
        DbRegistry::Global().Open(kDefaultDbType, f->db_path, DbMode::kRead);
    FUZZ_CHECK(reader.ok(), reader.status().ToString());
    f->db = *std::move(reader);
    absl::Status pristine = f->db->VerifyFiles(DB::FileCheck{});
    FUZZ_CHECK(pristine.ok(), pristine.ToString());
    return f;
  }();
  return *fixture;
}

bool Run(fuzz::FuzzInput& input) {
  Fixture& f = GetFixture();
  const uint8_t mode = input.Byte();
  const std::string payload(input.Rest());
  const std::string bytes = (mode & 1) ? FrameChecksummed(payload) : payload;
  fuzz::WriteFileOrDie(f.list_path, bytes);
  if (!f.db->VerifyFiles(DB::FileCheck{}).ok()) return false;
  absl::StatusOr<Unframed> unframed = UnframeChecksummed(bytes, "fuzz");
  FUZZ_CHECK(unframed.ok(), "a damaged frame verified");
  DbFileList list;
  FUZZ_CHECK(list.ParseFromString(unframed->payload),
             "a file list that does not parse verified");
  for (const DbFile& file : list.file()) {
    FUZZ_CHECK(file.name().find('/') == std::string::npos,
               "a verified file list names a file outside the database");
  }
  return true;
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

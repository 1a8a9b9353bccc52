// Fuzzes `ckpt` (tools/ckpt/ckpt.h) on a damaged checkpoint directory: the
// input is an image of the directory, written into a scratch directory, on
// which `list`, `verify` and `show` (of every database in it) run
// in-process through RunCkpt. That reaches every reader of a checkpoint:
// the commit log, LevelDB's CURRENT and MANIFEST-<n> (parsed by jobgraph),
// its tables, JOBGRAPH_FILES, the blob index and the values.
//
// Input: a mode byte (bit 1: JSON output), then an archive (fuzz_util.h) of
// at most 24 files: the name is a path relative to the directory, at most
// one level deep ("MANIFEST.jobgraph", "trainer_0.1/CURRENT"); names with
// more slashes, empty, "." or ".." components or NUL bytes are skipped.
// Invariant: every command returns one of ckpt's exit codes.

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/ckpt/ckpt.h"

namespace jobgraph {
namespace {

bool SafeComponent(absl::string_view part) {
  return !part.empty() && part != "." && part != ".." &&
         part.find('\0') == absl::string_view::npos;
}

void RunCommand(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = ckpt::RunCkpt(args, "", out, err);
  FUZZ_CHECK(code == ckpt::kExitOk || code == ckpt::kExitProblem ||
                 code == ckpt::kExitUsage,
             absl::StrCat("ckpt ", args[0], " returned ", code));
}

void Run(fuzz::FuzzInput& input) {
  static fuzz::ScratchDir* const scratch = new fuzz::ScratchDir("ckpt");
  const std::string& dir = scratch->path();
  fuzz::RemoveContents(dir);
  const uint8_t mode = input.Byte();
  std::set<std::string> databases;
  for (const fuzz::ArchiveEntry& file : fuzz::ParseArchive(input, 24)) {
    std::vector<std::string> parts = absl::StrSplit(file.name, '/');
    if (parts.size() > 2 || !SafeComponent(parts[0]) ||
        (parts.size() == 2 && !SafeComponent(parts[1]))) {
      continue;
    }
    if (parts.size() == 2) {
      // A file cannot also be a directory; the first one wins.
      const std::string sub = absl::StrCat(dir, "/", parts[0]);
      struct stat st;
      if (::stat(sub.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) continue;
      databases.insert(parts[0]);
    } else {
      struct stat st;
      if (::stat(absl::StrCat(dir, "/", parts[0]).c_str(), &st) == 0 &&
          S_ISDIR(st.st_mode)) {
        continue;
      }
    }
    fuzz::WriteFileOrDie(absl::StrCat(dir, "/", file.name), file.bytes);
  }
  const std::string format = (mode & 1) ? "--format=json" : "--format=text";
  RunCommand({"list", dir, format});
  RunCommand({"verify", dir, format});
  for (const std::string& db : databases) {
    RunCommand({"show", absl::StrCat(dir, "/", db), format, "--keys"});
  }
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::Run(input);
  return 0;
}

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
// Outcome (fuzz::NoteOutcome): accepted when every command succeeds
// (kExitOk), refused when one reports a problem.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Whether the command succeeded.
bool RunCommand(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = ckpt::RunCkpt(args, "", out, err);
  FUZZ_CHECK(code == ckpt::kExitOk || code == ckpt::kExitProblem ||
                 code == ckpt::kExitUsage,
             absl::StrCat("ckpt ", args[0], " returned ", code));
  return code == ckpt::kExitOk;
}

// Writes `bytes` to `name` (relative to the directory open as `dir_fd`).
// Aborts on I/O errors: they are the harness's.
void WriteFileAtOrDie(int dir_fd, const std::string& name,
                      absl::string_view bytes) {
  const int fd = ::openat(dir_fd, name.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, absl::StrCat("open ", name, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    FUZZ_CHECK(n > 0, absl::StrCat("write ", name, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

bool Run(fuzz::FuzzInput& input) {
  // The image goes into the same directory (on tmpfs) every time, emptied
  // first. Names are resolved relative to it, and which names are files and
  // which directories is tracked here rather than asked of the file system:
  // the harness's system calls were about half of all per input.
  static fuzz::ScratchDir* const scratch = new fuzz::ScratchDir("ckpt");
  static const int dir_fd = [] {
    const int fd =
        ::open(scratch->path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0, absl::StrCat("open ", scratch->path(), ": ",
                                     std::strerror(errno)));
    return fd;
  }();
  const std::string& dir = scratch->path();
  fuzz::RemoveContents(dir);
  const uint8_t mode = input.Byte();
  std::set<std::string> files;      // top-level files written
  std::set<std::string> databases;  // top-level directories made
  for (const fuzz::ArchiveEntry& file : fuzz::ParseArchive(input, 24)) {
    std::vector<std::string> parts = absl::StrSplit(file.name, '/');
    if (parts.size() > 2 || !SafeComponent(parts[0]) ||
        (parts.size() == 2 && !SafeComponent(parts[1]))) {
      continue;
    }
    if (parts.size() == 2) {
      // A file cannot also be a directory; the first one wins.
      if (files.count(parts[0]) > 0) continue;
      if (databases.insert(parts[0]).second) {
        FUZZ_CHECK(
            ::mkdirat(dir_fd, parts[0].c_str(), 0700) == 0,
            absl::StrCat("mkdir ", parts[0], ": ", std::strerror(errno)));
      }
    } else {
      if (databases.count(parts[0]) > 0) continue;
      files.insert(parts[0]);
    }
    WriteFileAtOrDie(dir_fd, file.name, file.bytes);
  }
  const std::string format = (mode & 1) ? "--format=json" : "--format=text";
  bool ok = RunCommand({"list", dir, format});
  ok &= RunCommand({"verify", dir, format});
  for (const std::string& db : databases) {
    ok &= RunCommand({"show", absl::StrCat(dir, "/", db), format, "--keys"});
  }
  return ok;
}

}  // namespace
}  // namespace jobgraph

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jobgraph::fuzz::FuzzInput input(data, size);
  jobgraph::fuzz::NoteOutcome(jobgraph::Run(input));
  return 0;
}

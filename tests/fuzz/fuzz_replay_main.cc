// The main of the corpus replay tests (and of the *_fuzzer binaries when they
// are built without --config=fuzz): runs every file given on the command
// line, or found in a directory given there, through LLVMFuzzerTestOneInput,
// as libFuzzer does when it is given files. A crash or a failed FUZZ_CHECK
// aborts; the test also fails when it found fewer files than
// --min_files=N (default 1), so an empty or mislocated corpus cannot pass.
//
// Each harness notes whether the code under test accepted or refused each
// input (fuzz::NoteOutcome). The counts are printed as
// "accepted=N refused=M"; --accepted=N and --refused=M make the run fail
// unless exactly that many inputs were accepted and refused, and
// --min_accepted=N and --min_refused=M unless at least that many were. With
// any of these flags, every input must note exactly one outcome.
// --print_outcomes lists each file's outcome (it is also listed when a
// count is wrong), which is how the expected counts of a new corpus are
// found.

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

void CollectFiles(const std::string& path, std::vector<std::string>* files) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz_replay: %s does not exist\n", path.c_str());
    std::exit(1);
  }
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) CollectFiles(path + "/" + name, files);
}

// The value of `arg` if it is `--<flag>=<value>`.
bool FlagValue(const std::string& arg, const char* flag, long* value) {
  const std::string prefix = std::string("--") + flag + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  char* end = nullptr;
  *value = std::strtol(arg.c_str() + prefix.size(), &end, 10);
  if (end == arg.c_str() + prefix.size() || *end != '\0' || *value < 0) {
    std::fprintf(stderr, "fuzz_replay: bad flag %s\n", arg.c_str());
    std::exit(1);
  }
  return true;
}

// What one file did.
struct Replayed {
  std::string file;
  int64_t accepted = 0;
  int64_t refused = 0;

  const char* Outcome() const {
    if (accepted == 1 && refused == 0) return "accepted";
    if (accepted == 0 && refused == 1) return "refused";
    if (accepted == 0 && refused == 0) return "no outcome noted";
    return "several outcomes noted";
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  long min_files = 1;
  long accepted = -1;  // -1: not checked
  long refused = -1;
  long min_accepted = -1;
  long min_refused = -1;
  bool print_outcomes = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (FlagValue(arg, "min_files", &min_files) ||
        FlagValue(arg, "accepted", &accepted) ||
        FlagValue(arg, "refused", &refused) ||
        FlagValue(arg, "min_accepted", &min_accepted) ||
        FlagValue(arg, "min_refused", &min_refused)) {
      continue;
    }
    if (arg == "--print_outcomes") {
      print_outcomes = true;
    } else if (arg.rfind("-", 0) == 0) {
      // libFuzzer flags (-runs=, -max_len=, ...) mean nothing here.
    } else {
      CollectFiles(arg, &files);
    }
  }
  std::vector<Replayed> replayed;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", file.c_str());
      return 1;
    }
    const jobgraph::fuzz::OutcomeCounts before = jobgraph::fuzz::Outcomes();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
    const jobgraph::fuzz::OutcomeCounts after = jobgraph::fuzz::Outcomes();
    replayed.push_back({file, after.accepted - before.accepted,
                        after.refused - before.refused});
  }
  const jobgraph::fuzz::OutcomeCounts total = jobgraph::fuzz::Outcomes();
  std::printf("fuzz_replay: ran %zu inputs without a crash: accepted=%" PRId64
              " refused=%" PRId64 "\n",
              files.size(), total.accepted, total.refused);
  std::fflush(stdout);  // before any message on stderr

  std::vector<std::string> problems;
  if (static_cast<long>(files.size()) < min_files) {
    problems.push_back("expected at least " + std::to_string(min_files) +
                       " inputs, found " + std::to_string(files.size()));
  }
  const bool checks_outcomes =
      accepted >= 0 || refused >= 0 || min_accepted >= 0 || min_refused >= 0;
  if (checks_outcomes) {
    for (const Replayed& r : replayed) {
      if (r.accepted + r.refused != 1) {
        problems.push_back(r.file + ": " + r.Outcome() +
                           " (the harness must call NoteOutcome once)");
      }
    }
  }
  auto check = [&](const char* what, long expected, bool exact,
                   int64_t actual) {
    if (expected < 0) return;
    if (exact ? actual == expected : actual >= expected) return;
    problems.push_back(std::string("expected ") + (exact ? "" : "at least ") +
                       std::to_string(expected) + " " + what + " inputs, got " +
                       std::to_string(actual));
  };
  check("accepted", accepted, /*exact=*/true, total.accepted);
  check("refused", refused, /*exact=*/true, total.refused);
  check("accepted", min_accepted, /*exact=*/false, total.accepted);
  check("refused", min_refused, /*exact=*/false, total.refused);

  if (print_outcomes || !problems.empty()) {
    FILE* out = problems.empty() ? stdout : stderr;
    for (const Replayed& r : replayed) {
      std::fprintf(out, "fuzz_replay: %s: %s\n", r.file.c_str(), r.Outcome());
    }
  }
  for (const std::string& problem : problems) {
    std::fprintf(stderr, "fuzz_replay: FAILED: %s\n", problem.c_str());
  }
  if (!problems.empty() && checks_outcomes) {
    std::fprintf(stderr,
                 "fuzz_replay: the corpus must reach the outcomes the "
                 "replay test expects (accepted=/refused= of "
                 "jobgraph_fuzzer in tests/fuzz/BUILD.bazel); if the corpus "
                 "or the code under test changed on purpose, update them\n");
  }
  return problems.empty() ? 0 : 1;
}

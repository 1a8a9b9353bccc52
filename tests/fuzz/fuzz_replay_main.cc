// The main of the corpus replay tests (and of the *_fuzzer binaries when they
// are built without --config=fuzz): runs every file given on the command
// line, or found in a directory given there, through LLVMFuzzerTestOneInput,
// as libFuzzer does when it is given files. A crash or a failed FUZZ_CHECK
// aborts; the test also fails when it found fewer files than
// --min_files=N (default 1), so an empty or mislocated corpus cannot pass.

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  long min_files = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--min_files=", 0) == 0) {
      min_files = std::strtol(arg.c_str() + 12, nullptr, 10);
    } else if (arg.rfind("-", 0) == 0) {
      // libFuzzer flags (-runs=, -max_len=, ...) mean nothing here.
    } else {
      CollectFiles(arg, &files);
    }
  }
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", file.c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                           bytes.size());
  }
  std::printf("fuzz_replay: ran %zu inputs without a crash\n", files.size());
  if (static_cast<long>(files.size()) < min_files) {
    std::fprintf(stderr, "fuzz_replay: expected at least %ld inputs\n",
                 min_files);
    return 1;
  }
  return 0;
}

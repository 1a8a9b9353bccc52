#include "tests/fuzz/fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/jobgraph.pb.h"

// Called once by libFuzzer (and by fuzz_replay_main) before the first
// input: damaged inputs make protobuf and glog log on every run, which would
// flood the output and slow the fuzzers down.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  FLAGS_minloglevel = google::GLOG_ERROR;
  return 0;
}

namespace jobgraph {
namespace fuzz {

void CheckFailed(const char* file, int line, const char* condition,
                 absl::string_view message) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %.*s\n", file, line,
               condition, static_cast<int>(message.size()), message.data());
  std::abort();
}

namespace {
OutcomeCounts g_outcomes;
}  // namespace

void NoteOutcome(bool accepted) {
  if (accepted) {
    ++g_outcomes.accepted;
  } else {
    ++g_outcomes.refused;
  }
}

OutcomeCounts Outcomes() { return g_outcomes; }

uint8_t FuzzInput::Byte() {
  if (data_.empty()) return 0;
  const uint8_t byte = static_cast<uint8_t>(data_[0]);
  data_.remove_prefix(1);
  return byte;
}

uint16_t FuzzInput::Length16() {
  const uint16_t low = Byte();
  const uint16_t high = Byte();
  return static_cast<uint16_t>(low | (high << 8));
}

absl::string_view FuzzInput::Bytes(size_t n) {
  n = std::min(n, data_.size());
  absl::string_view bytes = data_.substr(0, n);
  data_.remove_prefix(n);
  return bytes;
}

absl::string_view FuzzInput::Rest() { return Bytes(data_.size()); }

std::vector<ArchiveEntry> ParseArchive(FuzzInput& input, size_t max_entries) {
  std::vector<ArchiveEntry> entries;
  while (!input.empty() && entries.size() < max_entries) {
    ArchiveEntry entry;
    entry.name = std::string(input.Bytes(input.Byte()));
    entry.bytes = std::string(input.Bytes(input.Length16()));
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string WriteArchive(const std::vector<ArchiveEntry>& entries) {
  std::string out;
  for (const ArchiveEntry& entry : entries) {
    if (entry.name.size() > 0xff || entry.bytes.size() > 0xffff) {
      CheckFailed(__FILE__, __LINE__, "entry fits",
                  absl::StrCat("archive entry ", entry.name, " is too big"));
    }
    out.push_back(static_cast<char>(entry.name.size()));
    out += entry.name;
    out.push_back(static_cast<char>(entry.bytes.size() & 0xff));
    out.push_back(static_cast<char>(entry.bytes.size() >> 8));
    out += entry.bytes;
  }
  return out;
}

bool DeclaresLargeTensor(absl::string_view value) {
  BlobProto proto;
  if (!proto.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return false;
  }
  constexpr int64_t kMaxElements = int64_t{1} << 20;
  int64_t numel = 1;
  for (int64_t dim : proto.tensor().dims()) {
    if (dim <= 0) return false;  // empty, or refused by the reader
    if (dim > kMaxElements || numel * dim > kMaxElements) return true;
    numel *= dim;
  }
  return false;
}

namespace {

// Removes everything in the directory open as `fd`, and closes it. Names are
// resolved relative to the directory, and readdir's d_type saves an lstat
// per entry where the file system reports it (tmpfs does).
void RemoveTreeAt(int fd) {
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const char* name = entry->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
    }
    if (is_dir) {
      // Directories the code under test made unreadable still go.
      ::fchmodat(fd, name, 0700, 0);
      const int child =
          ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) RemoveTreeAt(child);
      ::unlinkat(fd, name, AT_REMOVEDIR);
    } else {
      ::unlinkat(fd, name, 0);
    }
  }
  ::closedir(dir);
}

void RemoveTree(const std::string& path, bool remove_self) {
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) RemoveTreeAt(fd);
  if (remove_self) ::rmdir(path.c_str());
}

}  // namespace

void RemoveContents(const std::string& path) {
  RemoveTree(path, /*remove_self=*/false);
}

ScratchDir::ScratchDir(absl::string_view tag) {
  struct stat st;
  std::string base;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
      ::access("/dev/shm", W_OK) == 0) {
    base = "/dev/shm";
  } else if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp) {
    base = tmp;
  } else {
    base = "/tmp";
  }
  std::string pattern = absl::StrCat(base, "/jobgraph_", tag, "_XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    CheckFailed(__FILE__, __LINE__, "mkdtemp",
                absl::StrCat(pattern, ": ", std::strerror(errno)));
  }
  path_ = pattern;
}

ScratchDir::~ScratchDir() { RemoveTree(path_, /*remove_self=*/true); }

void WriteFileOrDie(const std::string& path, absl::string_view bytes) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    CheckFailed(__FILE__, __LINE__, "open",
                absl::StrCat(path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      CheckFailed(__FILE__, __LINE__, "write",
                  absl::StrCat(path, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace fuzz
}  // namespace jobgraph

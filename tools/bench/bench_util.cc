#include "tools/bench/bench_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace bench {
namespace {

constexpr size_t kRawChunk = size_t{4} << 20;  // RawWrite's write()s
constexpr size_t kDirectAlign = 4096;

}  // namespace

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double CpuSeconds() {
  struct rusage usage;
  CHECK_EQ(::getrusage(RUSAGE_SELF, &usage), 0);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
         usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

long MinorFaults() {
  struct rusage usage;
  CHECK_EQ(::getrusage(RUSAGE_SELF, &usage), 0);
  return usage.ru_minflt;
}

void InitBench(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
}

int ExitCode(const char* bench, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", bench, status.ToString().c_str());
  return 1;
}

void Check(const absl::Status& status) { CHECK(status.ok()) << status; }

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status RemovePath(const std::string& path) {
  JG_ASSIGN_OR_RETURN(const bool exists, PathExists(path));
  if (!exists) return absl::OkStatus();
  return RemoveRecursively(path);
}

void RemoveIfExists(const std::string& path) { Check(RemovePath(path)); }

absl::Status ForEachFile(
    const std::string& path,
    const std::function<absl::Status(const std::string&, int64_t)>& visit) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path);
  if (S_ISDIR(st.st_mode)) {
    JG_ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(path));
    for (const std::string& name : names) {
      JG_RETURN_IF_ERROR(ForEachFile(JoinPath(path, name), visit));
    }
    return absl::OkStatus();
  }
  if (!S_ISREG(st.st_mode)) return absl::OkStatus();
  return visit(path, st.st_size);
}

void Settle(int64_t churn_mib, int settle_ms) {
  if (churn_mib > 0) {
    const size_t bytes = static_cast<size_t>(churn_mib) << 20;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PCHECK(p != MAP_FAILED);
    std::memset(p, 1, bytes);
    PCHECK(::munmap(p, bytes) == 0);
  }
  ::sync();
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
}

bool DropCaches() {
  ::sync();
  FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("3\n", f) >= 0;
  ok = std::fclose(f) == 0 && ok;
  return ok;
}

namespace {

// The number after "<field>:" in the /proc file at `path`; -1 if absent.
int64_t ProcField(const char* path, const char* field) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t value = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      value = std::strtoll(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return value;
}

}  // namespace

long StatusKb(const char* field) {
  return static_cast<long>(ProcField("/proc/self/status", field));
}

int64_t IoBytes(const char* field) { return ProcField("/proc/self/io", field); }

bool ResetPeakRss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("5", f) >= 0;
  ok = std::fclose(f) == 0 && ok;
  return ok;
}

DirInfo DescribeDir(const std::string& dir) {
  DirInfo info;
  const std::vector<std::string> names = ListDir(dir).value();
  for (const std::string& name : names) {
    struct stat st;
    CHECK_EQ(::stat(JoinPath(dir, name).c_str(), &st), 0);
    if (!S_ISREG(st.st_mode)) continue;
    info.bytes += st.st_size;
    const absl::string_view n(name);
    if (absl::EndsWith(n, ".ldb")) ++info.tables;
    if (absl::EndsWith(n, ".log")) {
      ++info.logs;
      info.log_bytes += st.st_size;
    }
  }
  return info;
}

void WarmFiles(const std::string& path, std::vector<char>* scratch) {
  struct stat st;
  CHECK_EQ(::stat(path.c_str(), &st), 0) << path;
  if (S_ISDIR(st.st_mode)) {
    const std::vector<std::string> names = ListDir(path).value();
    for (const std::string& name : names) {
      WarmFiles(JoinPath(path, name), scratch);
    }
    return;
  }
  if (!S_ISREG(st.st_mode)) return;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  PCHECK(fd >= 0) << path;
  while (::read(fd, scratch->data(), scratch->size()) > 0) {
  }
  ::close(fd);
}

absl::StatusOr<StagingBuffer> NewStagingBuffer() {
  void* staging = nullptr;
  if (::posix_memalign(&staging, kDirectAlign, kRawChunk) != 0) {
    return absl::ResourceExhaustedError("cannot allocate a staging buffer");
  }
  return StagingBuffer(static_cast<char*>(staging));
}

absl::StatusOr<double> RawWrite(const std::string& path,
                                const std::vector<absl::string_view>& pieces,
                                bool direct, char* staging) {
  const auto start = Clock::now();
  const int fd = ::open(
      path.c_str(),
      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0) return ErrnoStatus("open", path);
  absl::Status status;
  for (absl::string_view piece : pieces) {
    while (!piece.empty() && status.ok()) {
      const size_t n = std::min(piece.size(), kRawChunk);
      const char* from = piece.data();
      const bool aligned =
          reinterpret_cast<uintptr_t>(from) % kDirectAlign == 0 &&
          n % kDirectAlign == 0;
      if (direct && !aligned) {
        if (n % kDirectAlign != 0) {
          status = absl::InvalidArgumentError(
              "O_DIRECT raw write of a size that is not a multiple of 4 KiB");
          break;
        }
        std::memcpy(staging, from, n);
        from = staging;
      }
      const ssize_t written = ::write(fd, from, n);
      if (written <= 0) {
        status = ErrnoStatus("write", path);
        break;
      }
      piece.remove_prefix(static_cast<size_t>(written));
    }
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus("fsync", path);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus("close", path);
  JG_RETURN_IF_ERROR(status);
  return Seconds(start);
}

double Sample::Median() const {
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Sample::Min() const {
  return *std::min_element(values.begin(), values.end());
}

double Sample::Max() const {
  return *std::max_element(values.begin(), values.end());
}

std::vector<Variant> ParseVariants(const std::string& text) {
  std::vector<Variant> variants;
  for (absl::string_view spec : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    Variant v;
    v.label = std::string(spec);
    for (absl::string_view kv : absl::StrSplit(spec, '/')) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
      int64_t x = 0;
      CHECK(absl::SimpleAtoi(p.second, &x)) << "bad variant " << spec;
      if (p.first == "flush") {
        v.leveldb.flush_memtable_on_close = x != 0;
      } else if (p.first == "direct") {
        v.leveldb.write_tables_directly = x != 0;
      } else if (p.first == "dio") {
        v.leveldb.direct_io = x != 0;
      } else if (p.first == "wbs") {
        v.leveldb.write_buffer_size = static_cast<size_t>(x) << 20;
      } else if (p.first == "mfs") {
        v.leveldb.max_file_size = static_cast<size_t>(x) << 20;
      } else if (p.first == "batch") {
        v.options.db.writer_batch_bytes = static_cast<size_t>(x) << 20;
      } else if (p.first == "chunk") {
        v.options.serialization.chunk_bytes = x << 20;
      } else {
        LOG(FATAL) << "unknown variant key '" << p.first << "' in " << spec;
      }
    }
    variants.push_back(std::move(v));
  }
  return variants;
}

}  // namespace bench
}  // namespace jobgraph

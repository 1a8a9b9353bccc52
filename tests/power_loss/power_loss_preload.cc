// libpower_loss_preload.so: loaded with LD_PRELOAD into a process whose
// checkpoint directory a test will "lose power" under. It stands between
// the process and libc's fsync, fdatasync, rename, renameat, renameat2, link
// and linkat, so every write path is seen whoever calls them (jobgraph's file
// utilities, its direct table writer, LevelDB's Env in libleveldb.so).
//
// For calls on paths under JOBGRAPH_POWER_LOSS_ROOT it
//  - records what becomes durable (shadow_store.h): a file's bytes when it
//    is synced, a directory's entries when it is synced. Nothing else is
//    durable: bytes written since a file's last sync and entries created,
//    renamed or removed since its directory's last sync are what a power
//    loss takes away, as POSIX allows and as ext4 does on a real power cut;
//  - counts each call as an event, and with JOBGRAPH_POWER_LOSS_AT=N cuts
//    the power just before the N-th: it marks the store frozen and SIGKILLs
//    the process. Every other process recording into the same store (the
//    ranks of an MPI job) dies at its next event without recording it.
// The calls themselves go to the kernel unchanged.
//
// Test-only. Needs nothing but libc: the process may carry its own copies
// of every other library. Thread-safe: one mutex orders a process's events.

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "tests/power_loss/shadow_store.h"

namespace jobgraph {
namespace power_loss {
namespace {

struct Config {
  bool enabled = false;
  std::string root;    // realpath, no trailing '/'
  std::string shadow;  // the store
  long crash_at = 0;   // 0: never
  long sigterm_at = 0;
  bool crash_rank = true;  // this process is the one kCrashAtEnv counts for
  std::string events_path;
};

Config ReadConfig();
// Made at the first call, which ReadConfigAtLoad below makes at load time,
// on the main thread before any other exists: threads read it with no lock,
// and thread creation orders them after it (also for ThreadSanitizer, which
// cannot see this uninstrumented library's static-init guard). A function
// rather than a global: a constructor function may run before the C++
// globals of this library are made.
const Config& Cfg() {
  static const Config* config = new Config(ReadConfig());
  return *config;
}
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
long g_events = 0;  // guarded by g_mu

// Writes can be interrupted or short; this is a test's store, so any other
// failure is fatal (a lost record would make the test pass wrongly).
[[noreturn]] void Die(const char* what, const std::string& path) {
  char buf[512];
  int n = snprintf(buf, sizeof(buf), "power_loss_preload: %s %s: %s\n", what,
                   path.c_str(), strerror(errno));
  if (n > 0) (void)!write(STDERR_FILENO, buf, n);
  abort();
}

void WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Die("write", path);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Replaces `path` with `contents` atomically (the store is read by other
// processes of the job and by the test).
void PutFile(const std::string& path, const std::string& contents) {
  static long counter = 0;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(++counter);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Die("open", tmp);
  WriteAll(fd, contents.data(), contents.size(), tmp);
  close(fd);
  if (syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(),
              0) != 0) {
    Die("rename", tmp);
  }
}

bool Frozen() { return access((Cfg().shadow + "/frozen").c_str(), F_OK) == 0; }

void PowerOff() {
  int fd = open((Cfg().shadow + "/frozen").c_str(),
                O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  kill(getpid(), SIGKILL);
  for (;;) pause();
}

std::string FdPath(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n < 0) return "";
  return std::string(target, static_cast<size_t>(n));
}

// `path` (relative to `dirfd`) made absolute, without resolving links: the
// checkpoint code passes absolute or cwd-relative paths.
std::string AbsolutePath(int dirfd, const char* path) {
  if (path[0] == '/') return path;
  std::string base;
  if (dirfd == AT_FDCWD) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) return "";
    base = cwd;
  } else {
    base = FdPath(dirfd);
  }
  return base + "/" + path;
}

bool UnderRoot(const std::string& path) {
  const std::string& root = Cfg().root;
  return path.size() >= root.size() &&
         path.compare(0, root.size(), root) == 0 &&
         (path.size() == root.size() || path[root.size()] == '/');
}

// Counts an event of this process; cuts the power at the configured one.
// Called with g_mu held.
void Event(const char* call, const std::string& path) {
  if (Frozen()) PowerOff();
  ++g_events;
  // To the process, not this thread: whichever thread takes signals gets it.
  if (Cfg().sigterm_at == g_events) kill(getpid(), SIGTERM);
  if (Cfg().crash_rank && Cfg().crash_at == g_events) PowerOff();
  std::string line = std::to_string(g_events) + " " + call + " " + path + "\n";
  int fd = open(Cfg().events_path.c_str(),
                O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) Die("open", Cfg().events_path);
  WriteAll(fd, line.data(), line.size(), Cfg().events_path);
  close(fd);
}

// Records the durable state of the open file or directory `fd` after a
// successful sync. Called with g_mu held.
void RecordSync(int fd, const std::string& path) {
  std::string key;
  bool is_dir = false, is_regular = false;
  if (!StatKey(fd, "", AT_EMPTY_PATH, &key, &is_dir, &is_regular)) {
    Die("statx", path);
  }
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  if (is_dir) {
    int dfd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) Die("open", path);
    DIR* dir = fdopendir(dfd);
    if (dir == nullptr) Die("fdopendir", path);
    std::string listing;
    while (struct dirent* entry = readdir(dir)) {
      const char* name = entry->d_name;
      if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
      std::string entry_key;
      bool entry_dir = false, entry_regular = false;
      if (!StatKey(dirfd(dir), name, 0, &entry_key, &entry_dir,
                   &entry_regular)) {
        if (errno == ENOENT) continue;  // removed while we read
        Die("statx", path + "/" + name);
      }
      if (!entry_dir && !entry_regular) continue;  // no such thing is kept
      listing += entry_dir ? "d " : "f ";
      listing += entry_key + " " + name + "\n";
    }
    closedir(dir);
    PutFile(Cfg().shadow + "/dirs/" + key, listing);
    return;
  }
  if (!is_regular) return;
  // Read through a new description: `fd` may be write-only or O_DIRECT.
  int rfd = open(proc, O_RDONLY | O_CLOEXEC);
  if (rfd < 0) Die("open", path);
  std::string contents;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(rfd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Die("read", path);
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
  }
  close(rfd);
  PutFile(Cfg().shadow + "/files/" + key, contents);
}

long EnvLong(const char* name) {
  const char* value = getenv(name);
  return value == nullptr ? 0 : strtol(value, nullptr, 10);
}

Config ReadConfig() {
  Config config;
  const char* root = getenv(kRootEnv);
  const char* shadow = getenv(kShadowEnv);
  if (root == nullptr || shadow == nullptr || *root == '\0' ||
      *shadow == '\0') {
    return config;
  }
  char resolved[PATH_MAX];
  if (realpath(root, resolved) == nullptr) Die("realpath", root);
  config.root = resolved;
  config.shadow = shadow;
  config.crash_at = EnvLong(kCrashAtEnv);
  config.sigterm_at = EnvLong(kSigtermAtEnv);
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  const long my_rank = rank == nullptr ? 0 : strtol(rank, nullptr, 10);
  if (getenv(kCrashRankEnv) != nullptr) {
    config.crash_rank = EnvLong(kCrashRankEnv) == my_rank;
  }
  config.events_path = config.shadow + "/events/rank" +
                       std::to_string(my_rank) + "." + std::to_string(getpid());
  config.enabled = true;
  return config;
}

__attribute__((constructor)) void ReadConfigAtLoad() { Cfg(); }

// One traced call: counts it (maybe cutting the power first), runs it, and
// records what a successful sync made durable.
struct Traced {
  Traced(const char* call, std::string path)
      : active(Cfg().enabled && UnderRoot(path)) {
    if (!active) return;
    pthread_mutex_lock(&g_mu);
    Event(call, path);
  }
  ~Traced() {
    if (active) pthread_mutex_unlock(&g_mu);
  }
  bool active;
};

int Sync(long nr, const char* call, int fd) {
  Traced traced(call, Cfg().enabled ? FdPath(fd) : std::string());
  const int result = static_cast<int>(syscall(nr, fd));
  if (result == 0 && traced.active) {
    const int saved = errno;
    RecordSync(fd, FdPath(fd));
    errno = saved;
  }
  return result;
}

int Rename(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
           unsigned flags) {
  // A rename is an event of both directories; the destination names it.
  Traced traced("rename", Cfg().enabled ? AbsolutePath(newdirfd, newpath)
                                        : std::string());
  return static_cast<int>(
      syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags));
}

int Link(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
         int flags) {
  Traced traced(
      "link", Cfg().enabled ? AbsolutePath(newdirfd, newpath) : std::string());
  return static_cast<int>(
      syscall(SYS_linkat, olddirfd, oldpath, newdirfd, newpath, flags));
}

}  // namespace
}  // namespace power_loss
}  // namespace jobgraph

using jobgraph::power_loss::Cfg;
using jobgraph::power_loss::Die;
using jobgraph::power_loss::FdPath;
using jobgraph::power_loss::Link;
using jobgraph::power_loss::Rename;
using jobgraph::power_loss::Sync;

extern "C" {

int fsync(int fd) { return Sync(SYS_fsync, "fsync", fd); }
int fdatasync(int fd) { return Sync(SYS_fdatasync, "fdatasync", fd); }
int rename(const char* oldpath, const char* newpath) {
  return Rename(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}
int renameat(int olddirfd, const char* oldpath, int newdirfd,
             const char* newpath) {
  return Rename(olddirfd, oldpath, newdirfd, newpath, 0);
}
int renameat2(int olddirfd, const char* oldpath, int newdirfd,
              const char* newpath, unsigned int flags) {
  return Rename(olddirfd, oldpath, newdirfd, newpath, flags);
}
int link(const char* oldpath, const char* newpath) {
  return Link(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}
int linkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
           int flags) {
  return Link(olddirfd, oldpath, newdirfd, newpath, flags);
}
// Syncs the layer does not simulate must not pass unseen while it records.
int syncfs(int fd) {
  if (Cfg().enabled) Die("syncfs is not simulated", FdPath(fd));
  return static_cast<int>(syscall(SYS_syncfs, fd));
}
void sync() {
  if (Cfg().enabled) Die("sync is not simulated", "");
  syscall(SYS_sync);
}

}  // extern "C"

// The on-disk record of what a simulated power loss keeps: the "shadow
// store" that power_loss_preload.cc writes as a process syncs files and
// directories, and that power_loss_image.cc reads to build the directory a
// power loss would leave. Test-only; plain POSIX so that the preloaded
// library needs nothing but libc.
//
// Layout of a shadow store directory S:
//   S/root            the key of the tracked root directory (one line)
//   S/files/<key>     a file's durable bytes: its contents at its last fsync
//                     or fdatasync (or when the store was made)
//   S/dirs/<key>      a directory's durable entries at its last fsync, one
//                     line each: "<f|d> <key> <name>"
//   S/events/<proc>   the events of one process, one line each:
//                     "<n> <call> <path>" (<proc> is "rank<r>.<pid>")
//   S/frozen          exists once the power is off: no process records
//                     anything more, and each dies at its next event
// A key names one inode for the life of the store: device, inode number
// and birth time, so that a number reused by a new file is a new key.
//
// Thread-safe: only free functions without state.

#ifndef JOBGRAPH_TESTS_POWER_LOSS_SHADOW_STORE_H_
#define JOBGRAPH_TESTS_POWER_LOSS_SHADOW_STORE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cinttypes>
#include <cstdio>
#include <string>

namespace jobgraph {
namespace power_loss {

// Environment variables read by the preloaded library.
inline constexpr char kRootEnv[] = "JOBGRAPH_POWER_LOSS_ROOT";
inline constexpr char kShadowEnv[] = "JOBGRAPH_POWER_LOSS_SHADOW";
// Power goes off just before the process's N-th event (1-based).
inline constexpr char kCrashAtEnv[] = "JOBGRAPH_POWER_LOSS_AT";
// Only the process of this MPI rank (OMPI_COMM_WORLD_RANK, 0 outside MPI)
// counts towards kCrashAtEnv.
inline constexpr char kCrashRankEnv[] = "JOBGRAPH_POWER_LOSS_RANK";
// SIGTERM is raised in the process just before its N-th event, as a batch
// system's preemption notice arriving in the middle of a save.
inline constexpr char kSigtermAtEnv[] = "JOBGRAPH_POWER_LOSS_SIGTERM_AT";

// The key of the inode `st` describes; false if the file system gives no
// inode number.
inline bool KeyOf(const struct statx& st, std::string* key) {
  if ((st.stx_mask & STATX_INO) == 0) return false;
  char buf[96];
  // Without a birth time (a file system that keeps none) the key is the
  // inode number alone (ext4, xfs and btrfs keep one).
  const bool btime = (st.stx_mask & STATX_BTIME) != 0;
  std::snprintf(buf, sizeof(buf), "%x.%x-%" PRIx64 "-%" PRIx64 ".%x",
                st.stx_dev_major, st.stx_dev_minor,
                static_cast<uint64_t>(st.stx_ino),
                btime ? static_cast<uint64_t>(st.stx_btime.tv_sec) : 0,
                btime ? st.stx_btime.tv_nsec : 0u);
  *key = buf;
  return true;
}

// statx of `name` relative to `dirfd` (AT_FDCWD, or an open directory;
// `name` "" with AT_EMPTY_PATH in `flags` for `dirfd` itself), never
// following a symbolic link.
inline bool StatKey(int dirfd, const char* name, int flags, std::string* key,
                    bool* is_dir, bool* is_regular) {
  struct statx st;
  if (::statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW,
              STATX_TYPE | STATX_INO | STATX_BTIME, &st) != 0) {
    return false;
  }
  *is_dir = S_ISDIR(st.stx_mode);
  *is_regular = S_ISREG(st.stx_mode);
  return KeyOf(st, key);
}

}  // namespace power_loss
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_POWER_LOSS_SHADOW_STORE_H_

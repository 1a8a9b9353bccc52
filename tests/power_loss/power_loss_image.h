// The test side of the simulated power loss (power_loss_preload.cc): makes
// a shadow store that holds a directory tree as durable, and builds from a
// store the tree a power loss would leave.
//
// Usage: Start(root, shadow) before the process under test runs with
// LD_PRELOAD and the environment Environment() gives; after it died (or
// ended), BuildImage(shadow, image, ...) writes the surviving tree to a new
// directory `image`, which the test puts in place of `root`.
//
// Not thread-safe; test-only.

#ifndef JOBGRAPH_TESTS_POWER_LOSS_POWER_LOSS_IMAGE_H_
#define JOBGRAPH_TESTS_POWER_LOSS_POWER_LOSS_IMAGE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jobgraph {
namespace power_loss {

// Creates the shadow store `shadow` (which must not exist) and records the
// whole tree under the directory `root` as it is now as durable.
absl::Status Start(const std::string& root, const std::string& shadow);

// The environment of a process under test: LD_PRELOAD=`preload_library`
// and the layer's settings. `crash_at` 0 never cuts the power; `crash_rank`
// -1 lets every process count (one process), else only that MPI rank;
// `sigterm_at` 0 raises no SIGTERM.
std::vector<std::string> Environment(const std::string& preload_library,
                                     const std::string& root,
                                     const std::string& shadow,
                                     int64_t crash_at, int crash_rank = -1,
                                     int64_t sigterm_at = 0);

// What a process recorded: its events in order, as "<call> <path>".
struct ProcessEvents {
  int rank = 0;
  std::vector<std::string> events;
};
absl::StatusOr<std::vector<ProcessEvents>> ReadEvents(
    const std::string& shadow);

// Whether a process cut the power (S/frozen exists).
bool PowerWasCut(const std::string& shadow);

struct ImageOptions {
  // False: a file keeps exactly its synced bytes. True: where the file at
  // the same inode in `root` (read now, after the crash) starts with its
  // synced bytes and goes on, a page-aligned part of the rest survives too
  // (pages written back before the power went), chosen by `seed`: a torn
  // write.
  bool torn = false;
  // For torn images.
  uint32_t seed = 0;
};

struct ImageStats {
  int64_t files = 0;
  int64_t directories = 0;
  // Bytes past the synced ones that a torn image kept.
  int64_t torn_bytes = 0;
};

// Writes the tree that survives in `shadow` to `image` (which must not
// exist): every directory with the entries it had at its last sync, every
// file with its bytes at its last sync (hard links stay links).
absl::StatusOr<ImageStats> BuildImage(const std::string& shadow,
                                      const std::string& image,
                                      const std::string& root,
                                      const ImageOptions& options = {});

}  // namespace power_loss
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_POWER_LOSS_POWER_LOSS_IMAGE_H_

// tsan_mpi_race_child: a deliberate data race between jobgraph code and Open
// MPI, for tests/tsan_mpi_race_test.cc, which runs it under `mpirun -np 1`.
//
// A second thread writes a payload while the main thread hands the same bytes
// to MPI through MpiSession::AllGather, where Open MPI's MPI_Allgatherv copies
// them with memcpy. Nothing orders the two accesses for ThreadSanitizer: the
// main thread waits for the writer on a relaxed atomic, which makes the write
// certainly come first but creates no happens-before edge, and TSan judges
// races by happens-before, not by timing. A TSan build therefore reports the
// race on every run unless a suppression hides it; the program is linked as
// every jobgraph MPI program is (//:jobgraph_mpi), so it carries jobgraph's
// default suppressions (checkpoint/leveldb/leveldb_tsan_suppressions.cc).
//
// Standard output:
//   suppression: <entry>    each of TSan's default suppressions (TSan builds)
//   result: gathered=<n> overwritten=<true|false>
//                           the bytes MPI gathered, and whether they are the
//                           writer's (so MPI read the very bytes written)
// Exit status 0 (TSan's 66 after a report); 1 with the error on stderr if MPI
// fails.

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/config.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "engine/mpi/mpi_session.h"

#ifdef ABSL_HAVE_THREAD_SANITIZER
extern "C" const char* __tsan_default_suppressions();
#endif

namespace jobgraph {
namespace {

// More than fits in std::string's small-string buffer: moving the payload
// into AllGather hands over the same heap bytes, so MPI reads exactly the
// bytes the writer wrote.
constexpr size_t kPayloadBytes = 4096;

char PatternByte(size_t i) { return static_cast<char>('a' + i % 26); }

// The jobgraph side of the race: plain stores, so the report's frame for
// this access is this function's.
ABSL_ATTRIBUTE_NOINLINE void OverwritePayload(char* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) bytes[i] = PatternByte(i);
}

void PrintSuppressions() {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  for (absl::string_view entry : absl::StrSplit(__tsan_default_suppressions(),
                                                '\n', absl::SkipWhitespace())) {
    std::printf("suppression: %.*s\n", static_cast<int>(entry.size()),
                entry.data());
  }
#endif
}

int Run() {
  PrintSuppressions();
  absl::StatusOr<std::unique_ptr<MpiSession>> session =
      MpiSession::Create({"node"});
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }

  std::string payload(kPayloadBytes, '\0');
  char* const bytes = payload.data();
  std::atomic<bool> written{false};
  std::atomic<bool> gathered{false};
  // The writer stays alive until MPI has read the payload, so that TSan
  // still holds its history when it reports the race.
  std::thread writer([bytes, &written, &gathered] {
    OverwritePayload(bytes, kPayloadBytes);
    written.store(true, std::memory_order_relaxed);
    while (!gathered.load(std::memory_order_relaxed)) std::this_thread::yield();
  });
  while (!written.load(std::memory_order_relaxed)) std::this_thread::yield();
  absl::StatusOr<std::vector<std::string>> all =
      (*session)->AllGather(std::move(payload));
  gathered.store(true, std::memory_order_relaxed);
  writer.join();
  if (!all.ok()) {
    std::fprintf(stderr, "%s\n", all.status().ToString().c_str());
    return 1;
  }

  const std::string& mine = all->front();
  bool overwritten = mine.size() == kPayloadBytes;
  for (size_t i = 0; overwritten && i < mine.size(); ++i) {
    overwritten = mine[i] == PatternByte(i);
  }
  std::printf("result: gathered=%zu overwritten=%s\n", mine.size(),
              overwritten ? "true" : "false");
  return 0;
}

}  // namespace
}  // namespace jobgraph

int main() { return jobgraph::Run(); }

// Helpers shared by jobgraph's libFuzzer targets (tests/fuzz/README.md).
//
// A fuzz input is split with FuzzInput; inputs that describe several named
// byte strings (database entries, files of a checkpoint directory) use the
// tiny archive format of ParseArchive. FUZZ_CHECK states an invariant of the
// code under test: when it fails, the process aborts, so libFuzzer reports
// the input and the corpus replay test fails. Each harness also says, once
// per input, whether the code under test accepted the input or refused it
// cleanly (NoteOutcome); the replay tests count both, so that a corpus that
// only ever reaches one of them fails.
//
// Not thread-safe; each fuzzer runs single-threaded.

#ifndef JOBGRAPH_TESTS_FUZZ_FUZZ_UTIL_H_
#define JOBGRAPH_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

#define FUZZ_CHECK(condition, message)                              \
  do {                                                              \
    if (!(condition)) {                                             \
      ::jobgraph::fuzz::CheckFailed(__FILE__, __LINE__, #condition, \
                                    (message));                     \
    }                                                               \
  } while (false)

namespace jobgraph {
namespace fuzz {

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              absl::string_view message);

// Records the outcome of one input: `accepted` when the code under test
// took it as valid (a parser returned OK, a commit succeeded), false when it
// refused it with a clean error. Every harness calls it exactly once per
// input, from LLVMFuzzerTestOneInput. libFuzzer ignores the counts;
// fuzz_replay_main checks them against the counts the replay test expects
// (fuzz.bzl).
void NoteOutcome(bool accepted);

// The outcomes noted so far in this process.
struct OutcomeCounts {
  int64_t accepted = 0;
  int64_t refused = 0;
};
OutcomeCounts Outcomes();

// Reads a fuzz input front to back; past the end every read returns zeros
// or empty strings.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data), size) {}

  uint8_t Byte();
  // A little-endian 16-bit length.
  uint16_t Length16();
  // The next `n` bytes (fewer at the end).
  absl::string_view Bytes(size_t n);
  // Everything not yet read.
  absl::string_view Rest();
  bool empty() const { return data_.empty(); }

 private:
  absl::string_view data_;
};

// An archive entry: a name and its bytes.
struct ArchiveEntry {
  std::string name;
  std::string bytes;
};

// The archive format of the fuzz inputs that carry several byte strings:
// records of
//   name length  1 byte
//   name         that many bytes
//   data length  2 bytes, little-endian
//   data         that many bytes
// until the input ends; a truncated last record keeps what is there. At most
// `max_entries` entries are returned.
std::vector<ArchiveEntry> ParseArchive(FuzzInput& input, size_t max_entries);
// The inverse, for corpus generators.
std::string WriteArchive(const std::vector<ArchiveEntry>& entries);

// A fresh, empty directory for one fuzz input, on tmpfs (/dev/shm) when the
// machine has it, else under TMPDIR; removed with everything in it when the
// object dies. The same path is reused from one input to the next.
class ScratchDir {
 public:
  explicit ScratchDir(absl::string_view tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether `value`, parsed as a BlobProto, declares a tensor of more than
// 2^20 elements. The harnesses skip such values: loading one allocates the
// whole tensor up front (bounded by the machine's memory, not by libFuzzer's
// malloc limit), which is by design, since a checkpoint's values are checked
// against their CRC-32C before they are deserialized.
bool DeclaresLargeTensor(absl::string_view value);

// Removes everything below `path` (not `path` itself).
void RemoveContents(const std::string& path);

// Writes `bytes` to `path`, creating the parent directories below `root`
// when `path` has some. Aborts on I/O errors: they are the harness's.
void WriteFileOrDie(const std::string& path, absl::string_view bytes);

}  // namespace fuzz
}  // namespace jobgraph

#endif  // JOBGRAPH_TESTS_FUZZ_FUZZ_UTIL_H_

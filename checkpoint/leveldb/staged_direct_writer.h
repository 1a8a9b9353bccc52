// Writes a new file with O_DIRECT, past the page cache. Appends are copied
// into two 4 KiB-aligned staging buffers; a thread of the writer's own
// writes each full buffer while the caller fills the other. The buffers are
// 256 KiB until the file (or, with `large`, the database it belongs to) has
// 16 MiB, then 1 MiB: small databases keep their peak memory near their
// size, and large ones are written in requests the disk takes at full
// speed. Internal to the LevelDB adapter: OutputFile
// (leveldb_table_writer.h) writes table files through it.
//
// Why: a write through the page cache copies every byte into cache pages
// allocated for it, and on VMs whose host takes freed memory back that copy
// is the whole cost of a large save (tools/bench/README.md). A checkpoint is
// written once and read back by another process, so caching it only evicts
// the job's data.
//
// Thread-compatible: one caller thread at a time; the writer thread is the
// object's own and is stopped by Finish or the destructor.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_

#include <condition_variable>  // NOLINT(build/c++11)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>  // NOLINT(build/c++11)
#include <string>
#include <thread>  // NOLINT(build/c++11)

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jobgraph {

class StagedDirectWriter {
 public:
  // Alignment of staged buffers, file offsets and lengths of direct writes:
  // a multiple of every logical block size in use (512 B and 4 KiB).
  static constexpr size_t kAlignment = 4096;
  static constexpr size_t kSmallBufferBytes = size_t{256} << 10;
  static constexpr size_t kLargeBufferBytes = size_t{1} << 20;
  static constexpr uint64_t kLargeAfterBytes = uint64_t{16} << 20;

  // Switches `fd`, an empty file open for writing whose name is `path` (for
  // messages), to O_DIRECT. nullptr when its file system refuses (some FUSE
  // file systems; tmpfs before Linux 6.6): the caller then writes through the
  // page cache. `large`: large buffers
  // from the start (the file's database has written kLargeAfterBytes).
  static std::unique_ptr<StagedDirectWriter> Start(int fd, std::string path,
                                                   bool large = false);
  StagedDirectWriter(const StagedDirectWriter&) = delete;
  StagedDirectWriter& operator=(const StagedDirectWriter&) = delete;
  // Stops the writer thread; what was not written by Finish is lost.
  ~StagedDirectWriter();

  // Appends `data` at the end of the file. An error of an earlier write of
  // the thread's is returned here or by Finish.
  absl::Status Append(absl::string_view data);
  // Writes what is staged (its unaligned end through the page cache) and
  // stops the thread. Not synced. Call once.
  absl::Status Finish();

  // Bytes appended so far.
  uint64_t size() const { return offset_ + filled_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<char[], Free>;

  StagedDirectWriter(int fd, std::string path, bool large);
  // Makes buffers_[current_], which is empty and not being written, as
  // large as the file now calls for.
  void SizeCurrentBuffer();
  // Hands the full current buffer to the thread and makes the other one
  // current, once the thread is done with it.
  absl::Status HandOff();
  void Run();
  // Writes `size` bytes at `offset` (O_DIRECT unless it was turned off);
  // a direct write the file refuses (EINVAL) is made through the page cache,
  // as is everything after it.
  absl::Status Write(const char* data, size_t size, uint64_t offset);
  absl::Status TurnOffDirect();

  const int fd_;
  const std::string path_;
  const bool large_;
  Buffer buffers_[2];
  size_t capacity_[2] = {0, 0};
  int current_ = 0;
  size_t filled_ = 0;    // bytes staged in buffers_[current_]
  uint64_t offset_ = 0;  // where buffers_[current_] goes in the file
  // Set by Write on a refused direct write (then only the thread writes
  // until Finish has joined it).
  bool direct_ = true;

  // libstdc++'s mutex is pthreads, which ThreadSanitizer sees (the system's
  // Abseil is not instrumented).
  std::mutex mu_;
  std::condition_variable changed_;  // busy_ or stop_ changed
  // A buffer was handed to the thread and is not written yet.
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  const char* pending_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t pending_size_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pending_offset_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the thread's first error
  std::thread thread_;                       // started by the first HandOff
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_

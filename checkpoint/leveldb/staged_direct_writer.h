// Writes a new file with O_DIRECT, past the page cache. Appends are copied
// into 4 KiB-aligned staging buffers; threads of the writer's own write the
// full buffers while the caller fills the next. A small file (below 16 MiB,
// unless its database has written that much; an append that takes it past
// makes it large) has two 256 KiB buffers and one write in flight, so its peak
// memory stays near its size; a large one has kLargeWritesInFlight threads,
// each writing 2 MiB buffers at their own offsets, so that the disk has
// several requests queued (with one, a direct write runs at the latency-bound
// speed of `dd oflag=direct`, not at the disk's bandwidth), and one buffer
// more than that: 8 MiB staged per file, given back as the writes complete
// once Finish has begun. (4 MiB buffers wrote a little faster but put an
// asynchronous save's memory past 1.2x the bytes it copies; async_bench.)
// A copy in the background (Writers::kCaller) has no threads: the caller
// writes each full buffer itself, a large file's in 8 MiB writes: three
// writer threads beside the flush's own took the job's core often enough to
// cost its epochs 11-16% in five runs, where a one-thread copy of the same
// bytes cost a median 6% (tier_bench part 3).
//
// Why: a write through the page cache copies every byte into cache pages
// allocated for it, and on VMs whose host takes freed memory back that copy
// is the whole cost of a large save (tools/bench/README.md). A checkpoint is
// written once and read back by another process, so caching it only evicts
// the job's data. Internal to the LevelDB adapter: OutputFile
// (leveldb_table_writer.h) writes table files through it.
//
// A large value need not be staged at all: AppendBorrowed writes the
// 4 KiB-aligned middle of the caller's buffer from the buffer itself (no
// copy), several requests in flight, when the file's position and the
// buffer's address agree modulo 4 KiB; PaddingToBorrow says how many bytes
// to append first to make them agree. Staging alone reached 0.74-0.86 of a
// plain O_DIRECT write of the same bytes from their own memory
// (checkpoint_bench); the copy and the smaller requests made the difference.
//
// Large staging buffers come from StoragePool::Global(): a fresh mapping per
// table would pay the first touch of fresh memory, which runs at a few
// hundred MB/s on some VMs (storage_pool.h), for every table of every save.
//
// Thread-compatible: one caller thread at a time; the writer threads are the
// object's own and are stopped by Finish or the destructor.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_

#include <atomic>
#include <condition_variable>  // NOLINT(build/c++11)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>  // NOLINT(build/c++11)
#include <string>
#include <thread>  // NOLINT(build/c++11)
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jobgraph {

class StagedDirectWriter {
 public:
  // Alignment of staged buffers, file offsets and lengths of direct writes:
  // a multiple of every logical block size in use (512 B and 4 KiB).
  static constexpr size_t kAlignment = 4096;
  static constexpr size_t kSmallBufferBytes = size_t{256} << 10;
  static constexpr size_t kLargeBufferBytes = size_t{2} << 20;
  // A large file's one buffer when the caller writes (Writers::kCaller):
  // one write of 8 MiB is two requests of the disk's largest (4 MiB on these
  // VMs' virtio disks) in flight, where the threads keep several writes.
  static constexpr size_t kCallerBufferBytes = size_t{8} << 20;
  static constexpr uint64_t kLargeAfterBytes = uint64_t{16} << 20;
  // Writes a large file keeps in flight (threads); it stages in one buffer
  // more than that.
  static constexpr int kLargeWritesInFlight = 3;
  // AppendBorrowed writes from the caller's memory when it has at least this
  // many bytes, in requests of kBorrowedWriteBytes.
  static constexpr size_t kMinBorrowedBytes = size_t{1} << 20;
  static constexpr size_t kBorrowedWriteBytes = size_t{4} << 20;

  // Who makes the writes.
  enum class Writers {
    // Threads of the writer's own, several in flight for a large file, while
    // the caller stages the next buffer: for a save, which the job waits for.
    kOwnThreads,
    // The caller's thread, one write at a time, as each buffer fills: for a
    // copy in the background (the flush), which has time, and whose threads
    // waking each other for every buffer would take time from the job's
    // cores (tier_bench part 3).
    kCaller,
  };

  // Switches `fd`, an empty file open for writing whose name is `path` (for
  // messages), to O_DIRECT. nullptr when its file system refuses (some FUSE
  // file systems; tmpfs before Linux 6.6): the caller then writes through the
  // page cache. `large`: large buffers from the start (the file's database
  // has written kLargeAfterBytes).
  static std::unique_ptr<StagedDirectWriter> Start(
      int fd, std::string path, bool large = false,
      Writers writers = Writers::kOwnThreads);
  StagedDirectWriter(const StagedDirectWriter&) = delete;
  StagedDirectWriter& operator=(const StagedDirectWriter&) = delete;
  // Stops the writer threads; what was not written by Finish is lost.
  ~StagedDirectWriter();

  // Appends `data` at the end of the file. An error of an earlier write of
  // the threads' is returned here or by Finish; after an error every call
  // returns it (the file is abandoned).
  absl::Status Append(absl::string_view data);
  // Append(data), writing the part of `data` that lies in whole 4 KiB pages
  // straight from the caller's memory, when `data` has kMinBorrowedBytes and
  // the file's position (size()) and data.data() agree modulo kAlignment
  // (else, or for the rest, it copies as Append does). `data` must stay
  // valid and unchanged until Finish returns or the writer is destroyed.
  absl::Status AppendBorrowed(absl::string_view data);
  // The free end of the staging buffer, for a caller that fills it in place
  // and then calls Commit with the bytes it filled: a copy reads its source
  // straight into it, where Append would copy the bytes once more. Never
  // empty; valid until the next call of any other method. 4 KiB-aligned
  // once the file's size is (a buffer starts empty).
  absl::StatusOr<absl::Span<char>> Reserve();
  // Appends the first `n` bytes of what Reserve returned, `n` at most its
  // size (CHECKed).
  absl::Status Commit(size_t n);
  // How many bytes to append before an AppendBorrowed(data) that would start
  // at file offset `position`, so that it writes from the caller's memory:
  // 0 for data too short to borrow, else in [0, kAlignment).
  static size_t PaddingToBorrow(uint64_t position, absl::string_view data);
  // Writes what is staged (its unaligned end through the page cache) and
  // stops the threads; once it returns, with or without an error, no write
  // is in flight. Not synced. Call once.
  absl::Status Finish();

  // Bytes appended so far.
  uint64_t size() const { return offset_ + filled_; }
  // Of those, the bytes written from the caller's memory (AppendBorrowed).
  uint64_t borrowed_bytes() const { return borrowed_bytes_; }

 private:
  // Small buffers are malloc'ed; large ones come from the StoragePool and
  // go back to it (`pooled_bytes`), so that every table of every save
  // stages in memory the process has touched before.
  struct Release {
    // Constructors rather than a member initializer, which a nested class
    // cannot use before the enclosing one is complete.
    Release() : pooled_bytes(0) {}
    explicit Release(size_t pooled) : pooled_bytes(pooled) {}
    void operator()(char* p) const;
    size_t pooled_bytes;
  };
  using Buffer = std::unique_ptr<char[], Release>;
  // A full buffer handed to the threads, or (buffer kBorrowed) a piece of
  // the caller's memory.
  static constexpr int kBorrowed = -1;
  struct Job {
    int buffer = 0;
    const char* data = nullptr;
    size_t size = 0;
    uint64_t offset = 0;
  };
  static constexpr int kMaxBuffers = kLargeWritesInFlight + 1;

  StagedDirectWriter(int fd, std::string path, bool large, Writers writers);
  bool large() const { return large_ || size() >= kLargeAfterBytes; }
  // Makes buffers_[current_], which is empty and not being written, as
  // large as the file now calls for.
  void SizeCurrentBuffer();
  // Hands the full current buffer to the threads and makes another one
  // current: a new one while the file may have more, else the first one a
  // thread is done with.
  absl::Status HandOff();
  // Hands `job` to the threads, or, with none to be had, writes it here.
  absl::Status Submit(const Job& job);
  // Queues a write of the caller's memory [data, data + size) at offset_
  // (all three aligned) and moves offset_ past it.
  absl::Status QueueBorrowed(const char* data, size_t size);
  // Starts a thread if the file calls for more than it has; false if none
  // runs (the process is at its limit).
  bool StartThreadIfWanted();
  // Drops the writes not yet taken and waits for the threads to end.
  void StopThreads();
  void Run();
  // Writes `size` bytes at `offset` (O_DIRECT unless it was turned off);
  // a direct write the file refuses (EINVAL) is made through the page cache,
  // as is everything after it.
  absl::Status Write(const char* data, size_t size, uint64_t offset);
  absl::Status TurnOffDirect();

  const int fd_;
  const std::string path_;
  bool large_;  // large from the start, or since an append took it there
  const Writers writers_;
  // The caller thread's; the threads see a Job's data, and once finishing_
  // is set they release the buffers they wrote (under mu_).
  Buffer buffers_[kMaxBuffers];
  size_t capacity_[kMaxBuffers] = {};
  int buffer_count_ = 0;  // buffers made so far
  int current_ = 0;
  size_t filled_ = 0;    // bytes staged in buffers_[current_]
  uint64_t offset_ = 0;  // where buffers_[current_] goes in the file
  uint64_t borrowed_bytes_ = 0;
  // Cleared by the first direct write the file refuses; every write after
  // it goes through the page cache.
  std::atomic<bool> direct_{true};
  // The first error Append returned; set, nothing more is staged.
  absl::Status failed_;

  // libstdc++'s mutex is pthreads, which ThreadSanitizer sees (the system's
  // Abseil is not instrumented).
  std::mutex mu_;
  std::condition_variable work_;               // jobs_ grew, or stop_ was set
  std::condition_variable done_;               // a job finished
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);  // handed over, not taken
  int writing_ ABSL_GUARDED_BY(mu_) = 0;       // taken, not finished
  // Buffers handed over and written since; the caller reuses them
  // (borrowed pieces are not listed).
  std::vector<int> written_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Set by Finish: a buffer whose write completes is given back at once
  // (the next file of the database is being staged meanwhile).
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the threads' first error
  std::vector<std::thread> threads_;         // started by HandOff
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_STAGED_DIRECT_WRITER_H_

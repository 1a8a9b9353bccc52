#include "checkpoint/leveldb/staged_direct_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/util/io_faults.h"
#include "engine/status_macros.h"
#include "engine/storage_pool.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

absl::Status SetDirect(int fd, bool direct) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return absl::ErrnoToStatus(errno, "fcntl(F_GETFL)");
  const int wanted = direct ? flags | O_DIRECT : flags & ~O_DIRECT;
  if (::fcntl(fd, F_SETFL, wanted) != 0) {
    return absl::ErrnoToStatus(errno, "fcntl(F_SETFL)");
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<StagedDirectWriter> StagedDirectWriter::Start(int fd,
                                                              std::string path,
                                                              bool large,
                                                              Writers writers) {
  if (!SetDirect(fd, true).ok()) return nullptr;
  return std::unique_ptr<StagedDirectWriter>(
      new StagedDirectWriter(fd, std::move(path), large, writers));
}

void StagedDirectWriter::Release::operator()(char* p) const {
  if (pooled_bytes > 0) {
    StoragePool::Global().Give(p, pooled_bytes);
  } else {
    std::free(p);
  }
}

StagedDirectWriter::StagedDirectWriter(int fd, std::string path, bool large,
                                       Writers writers)
    : fd_(fd), path_(std::move(path)), large_(large), writers_(writers) {}

StagedDirectWriter::~StagedDirectWriter() { StopThreads(); }

void StagedDirectWriter::StopThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void StagedDirectWriter::SizeCurrentBuffer() {
  if (buffer_count_ == 0) buffer_count_ = 1;
  const size_t wanted = !large()                       ? kSmallBufferBytes
                        : writers_ == Writers::kCaller ? kCallerBufferBytes
                                                       : kLargeBufferBytes;
  if (capacity_[current_] >= wanted) return;
  // Freed first: a small and a large buffer are never held in one slot.
  // (Each is made when first filled, so a small file holds one.)
  buffers_[current_].reset();
  if (wanted > kSmallBufferBytes) {
    // Whole pages, so aligned for O_DIRECT.
    buffers_[current_] = Buffer(
        static_cast<char*>(StoragePool::Global().Take(wanted, /*zero=*/false)),
        Release{wanted});
  } else {
    buffers_[current_] =
        Buffer(static_cast<char*>(std::aligned_alloc(kAlignment, wanted)));
  }
  CHECK(buffers_[current_] != nullptr) << "out of memory";
  capacity_[current_] = wanted;
}

absl::Status StagedDirectWriter::Append(absl::string_view data) {
  JG_RETURN_IF_ERROR(failed_);
  // A file this append takes past kLargeAfterBytes is large from now on, not
  // from the middle of the append on.
  if (size() + data.size() >= kLargeAfterBytes) large_ = true;
  while (!data.empty()) {
    if (filled_ == 0) SizeCurrentBuffer();
    const size_t capacity = capacity_[current_];
    const size_t n = std::min(data.size(), capacity - filled_);
    std::memcpy(buffers_[current_].get() + filled_, data.data(), n);
    filled_ += n;
    data.remove_prefix(n);
    if (filled_ == capacity) {
      absl::Status status = HandOff();
      if (!status.ok()) {
        // current_ may name a buffer a thread still writes from: nothing
        // is staged again.
        failed_ = status;
        return status;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<char>> StagedDirectWriter::Reserve() {
  JG_RETURN_IF_ERROR(failed_);
  if (filled_ == 0) SizeCurrentBuffer();
  return absl::Span<char>(buffers_[current_].get() + filled_,
                          capacity_[current_] - filled_);
}

absl::Status StagedDirectWriter::Commit(size_t n) {
  JG_RETURN_IF_ERROR(failed_);
  CHECK_LE(filled_ + n, capacity_[current_]) << path_;
  filled_ += n;
  if (filled_ < capacity_[current_]) return absl::OkStatus();
  absl::Status status = HandOff();
  if (!status.ok()) failed_ = status;  // as Append
  return status;
}

size_t StagedDirectWriter::PaddingToBorrow(uint64_t position,
                                           absl::string_view data) {
  if (data.size() < kMinBorrowedBytes) return 0;
  const uint64_t address = reinterpret_cast<uintptr_t>(data.data());
  return static_cast<size_t>((address - position) % kAlignment);
}

absl::Status StagedDirectWriter::AppendBorrowed(absl::string_view data) {
  JG_RETURN_IF_ERROR(failed_);
  const uint64_t address = reinterpret_cast<uintptr_t>(data.data());
  if (data.size() < kMinBorrowedBytes || (address - size()) % kAlignment != 0) {
    return Append(data);
  }
  // Staged up to the first page of `data`, which then starts at an aligned
  // file offset; whole pages from there on are written from `data`.
  const size_t lead = static_cast<size_t>(-address % kAlignment);
  const size_t pages = (data.size() - lead) / kAlignment * kAlignment;
  JG_RETURN_IF_ERROR(Append(data.substr(0, lead)));
  if (size() + data.size() - lead >= kLargeAfterBytes) large_ = true;
  if (filled_ > 0) {
    // Whole pages: size() is aligned here, and so is offset_.
    if (absl::Status status = HandOff(); !status.ok()) {
      failed_ = status;
      return status;
    }
  }
  for (size_t done = 0; done < pages; done += kBorrowedWriteBytes) {
    const size_t n = std::min(kBorrowedWriteBytes, pages - done);
    if (absl::Status status = QueueBorrowed(data.data() + lead + done, n);
        !status.ok()) {
      failed_ = status;
      return status;
    }
  }
  return Append(data.substr(lead + pages));
}

absl::Status StagedDirectWriter::QueueBorrowed(const char* data, size_t size) {
  const Job job{kBorrowed, data, size, offset_};
  offset_ += size;
  borrowed_bytes_ += size;
  return Submit(job);
}

absl::Status StagedDirectWriter::Submit(const Job& job) {
  if (!StartThreadIfWanted()) {
    absl::Status status = Write(job.data, job.size, job.offset);
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok() && error_.ok()) error_ = std::move(status);
    return error_;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(error_);
    jobs_.push_back(job);
  }
  work_.notify_one();
  return absl::OkStatus();
}

bool StagedDirectWriter::StartThreadIfWanted() {
  if (writers_ == Writers::kCaller) return false;
  const size_t wanted = large() ? kLargeWritesInFlight : 1;
  if (threads_.size() < wanted) {
    try {
      threads_.emplace_back([this] { Run(); });
    } catch (const std::system_error&) {
      // No thread to be had (a process at its limit): fewer writes in
      // flight, or, with none, the caller writes.
    }
  }
  return !threads_.empty();
}

absl::Status StagedDirectWriter::HandOff() {
  const Job job{current_, buffers_[current_].get(), filled_, offset_};
  offset_ += filled_;
  filled_ = 0;
  JG_RETURN_IF_ERROR(Submit(job));
  // Written already (no thread to be had): the buffer is free again.
  if (threads_.empty()) return absl::OkStatus();
  // One buffer more than writes in flight, so the caller fills one while
  // the threads write the others.
  const int buffers = large() ? kMaxBuffers : 2;
  if (buffer_count_ < buffers) {
    current_ = buffer_count_++;
    return absl::OkStatus();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !written_.empty() || !error_.ok();
  });
  JG_RETURN_IF_ERROR(error_);
  current_ = written_.back();
  written_.pop_back();
  return absl::OkStatus();
}

void StagedDirectWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !jobs_.empty() || stop_;
    });
    if (jobs_.empty()) return;  // stopped
    const Job job = jobs_.front();
    jobs_.pop_front();
    // After a failed write the file is abandoned: the rest is not written.
    if (!error_.ok()) {
      if (job.buffer != kBorrowed) written_.push_back(job.buffer);
      done_.notify_all();
      continue;
    }
    ++writing_;
    lock.unlock();
    absl::Status status = Write(job.data, job.size, job.offset);
    lock.lock();
    --writing_;
    if (error_.ok()) error_ = std::move(status);
    if (job.buffer == kBorrowed) {
      // Nothing to give back.
    } else if (finishing_) {
      buffers_[job.buffer].reset();
      capacity_[job.buffer] = 0;
    } else {
      written_.push_back(job.buffer);
    }
    done_.notify_all();
  }
}

absl::Status StagedDirectWriter::Finish() {
  if (!failed_.ok()) {
    // No write is made after Finish returns: the caller may free what it
    // lent (AppendBorrowed).
    StopThreads();
    return failed_;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    finishing_ = true;
    for (int buffer : written_) {
      buffers_[buffer].reset();
      capacity_[buffer] = 0;
    }
    written_.clear();
    done_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return jobs_.empty() && writing_ == 0;
    });
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(error_);
  }
  if (filled_ == 0) return absl::OkStatus();
  const char* const data = buffers_[current_].get();
  const size_t aligned = filled_ / kAlignment * kAlignment;
  if (aligned > 0) JG_RETURN_IF_ERROR(Write(data, aligned, offset_));
  if (aligned < filled_) {
    // A direct write is whole blocks; the end goes through the page cache.
    if (direct_) JG_RETURN_IF_ERROR(TurnOffDirect());
    JG_RETURN_IF_ERROR(
        Write(data + aligned, filled_ - aligned, offset_ + aligned));
  }
  offset_ += filled_;
  filled_ = 0;
  return absl::OkStatus();
}

absl::Status StagedDirectWriter::TurnOffDirect() {
  direct_ = false;
  absl::Status status = SetDirect(fd_, false);
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(path_, ": ", status.message()));
}

absl::Status StagedDirectWriter::Write(const char* data, size_t size,
                                       uint64_t offset) {
  if (int e = io_faults::Next()) {
    return absl::ErrnoToStatus(e, absl::StrCat("write ", path_));
  }
  while (size > 0) {
    // Read before the write: another thread may turn direct writes off
    // meanwhile, and a write sent as a direct one is retried either way.
    const bool sent_direct = direct_;
    const ssize_t n = ::pwrite(fd_, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && sent_direct) {
        // A block size or file system that refuses this direct write.
        if (direct_) JG_RETURN_IF_ERROR(TurnOffDirect());
        continue;
      }
      return absl::ErrnoToStatus(errno, absl::StrCat("write ", path_));
    }
    if (n == 0) {  // never for a regular file; do not spin
      return absl::InternalError(absl::StrCat(
          "write ", path_, ": no progress writing ", size, " bytes"));
    }
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

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
                                                              bool large) {
  if (!SetDirect(fd, true).ok()) return nullptr;
  return std::unique_ptr<StagedDirectWriter>(
      new StagedDirectWriter(fd, std::move(path), large));
}

StagedDirectWriter::StagedDirectWriter(int fd, std::string path, bool large)
    : fd_(fd), path_(std::move(path)), large_(large) {}

StagedDirectWriter::~StagedDirectWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StagedDirectWriter::SizeCurrentBuffer() {
  const size_t wanted = large_ || size() >= kLargeAfterBytes
                            ? kLargeBufferBytes
                            : kSmallBufferBytes;
  if (capacity_[current_] >= wanted) return;
  // Freed first: the smaller and the larger buffer are never held together.
  // (Each is made when first filled, so a small file holds one.)
  buffers_[current_].reset();
  buffers_[current_].reset(
      static_cast<char*>(std::aligned_alloc(kAlignment, wanted)));
  CHECK(buffers_[current_] != nullptr) << "out of memory";
  capacity_[current_] = wanted;
}

absl::Status StagedDirectWriter::Append(absl::string_view data) {
  while (!data.empty()) {
    if (filled_ == 0) SizeCurrentBuffer();
    const size_t capacity = capacity_[current_];
    const size_t n = std::min(data.size(), capacity - filled_);
    std::memcpy(buffers_[current_].get() + filled_, data.data(), n);
    filled_ += n;
    data.remove_prefix(n);
    if (filled_ == capacity) JG_RETURN_IF_ERROR(HandOff());
  }
  return absl::OkStatus();
}

absl::Status StagedDirectWriter::HandOff() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // The other buffer is the one the thread may still be writing.
    changed_.wait(lock,
                  [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !busy_; });
    JG_RETURN_IF_ERROR(error_);
    pending_ = buffers_[current_].get();
    pending_size_ = filled_;
    pending_offset_ = offset_;
    busy_ = true;
  }
  changed_.notify_all();
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      // No thread to be had (a process at its limit): write it here.
      absl::Status status = Write(buffers_[current_].get(), filled_, offset_);
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (!status.ok()) return error_ = std::move(status);
    }
  }
  offset_ += filled_;
  filled_ = 0;
  current_ ^= 1;
  return absl::OkStatus();
}

void StagedDirectWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return busy_ || stop_;
    });
    if (!busy_) return;  // stopped
    const char* const data = pending_;
    const size_t size = pending_size_;
    const uint64_t offset = pending_offset_;
    // The caller fills the other buffer meanwhile.
    lock.unlock();
    absl::Status status = Write(data, size, offset);
    lock.lock();
    if (error_.ok()) error_ = std::move(status);
    busy_ = false;
    changed_.notify_all();
  }
}

absl::Status StagedDirectWriter::Finish() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock,
                  [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !busy_; });
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
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
    const ssize_t n = ::pwrite(fd_, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && direct_) {
        // A block size or file system that refuses this direct write.
        JG_RETURN_IF_ERROR(TurnOffDirect());
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

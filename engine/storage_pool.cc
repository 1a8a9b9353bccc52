#include "engine/storage_pool.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace jobgraph {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Under AddressSanitizer an idle buffer is poisoned, so that a read or
// write through a pointer into a freed tensor is reported, as it was when
// every buffer was unmapped at once. (No-ops in other builds.)
void Unmap(void* data, size_t mapped) {
  ASAN_UNPOISON_MEMORY_REGION(data, mapped);
  PCHECK(munmap(data, mapped) == 0) << "munmap of a tensor buffer";
}

// A fresh anonymous mapping of `mapped` bytes (zero), or nullptr.
void* MapFresh(size_t mapped) {
  void* data = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return data == MAP_FAILED ? nullptr : data;
}

}  // namespace

StoragePool::~StoragePool() {
  std::lock_guard<std::mutex> lock(mu_);
  ShrinkTo(0);
}

StoragePool& StoragePool::Global() {
  // Never destroyed: tensors in static storage may be freed after main.
  static StoragePool* pool = new StoragePool();
  return *pool;
}

size_t StoragePool::MappedSize(size_t bytes) {
  const size_t page = PageSize();
  return (bytes + page - 1) / page * page;
}

void* StoragePool::Take(size_t bytes, bool zero) {
  const size_t mapped = MappedSize(bytes);
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [first, end] = idle_.equal_range(mapped);
    if (first != end) {
      // The newest of that size: its pages are the likeliest still cached.
      auto newest = std::prev(end);
      data = newest->second.data;
      idle_.erase(newest);
      stats_.held_bytes -= mapped;
      --stats_.held_buffers;
      ++stats_.hits;
    } else {
      ++stats_.misses;
    }
  }
  if (data != nullptr) {
    ASAN_UNPOISON_MEMORY_REGION(data, mapped);
    if (zero) std::memset(data, 0, bytes);
    return data;
  }
  if (data = MapFresh(mapped); data != nullptr) return data;
  {
    // Idle buffers are memory the new one could have.
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.held_bytes == 0) return nullptr;
    ShrinkTo(0);
  }
  return MapFresh(mapped);
}

void StoragePool::Give(void* data, size_t bytes) {
  const size_t mapped = MappedSize(bytes);
  std::vector<std::pair<void*, size_t>> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mapped > limit_bytes_) {
      ++stats_.refused;
      evicted.emplace_back(data, mapped);
    } else {
      // The newest buffer is the likeliest to be asked for again (the next
      // table's staging, the next epoch's copy): room is made for it by
      // evicting the idle buffers given back longest ago.
      while (stats_.held_bytes + mapped > limit_bytes_) {
        auto oldest = Oldest();
        evicted.emplace_back(oldest->second.data, oldest->first);
        Forget(oldest);
      }
      ASAN_POISON_MEMORY_REGION(data, mapped);
      idle_.emplace(mapped, Idle{data, round_, next_sequence_++});
      stats_.held_bytes += mapped;
      ++stats_.held_buffers;
      ++stats_.kept;
    }
  }
  // Outside the lock: unmapping takes a while, and every tensor's Take and
  // Give waits for the lock.
  for (const auto& [buffer, size] : evicted) Unmap(buffer, size);
}

size_t StoragePool::TrimIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t released = 0;
  for (auto it = idle_.begin(); it != idle_.end();) {
    // Given back before the previous call and not taken since.
    if (it->second.round < round_) {
      released += it->first;
      it = Release(it);
    } else {
      ++it;
    }
  }
  ++round_;
  return released;
}

void StoragePool::set_limit_bytes(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_bytes_ = bytes;
  ShrinkTo(bytes);
}

size_t StoragePool::limit_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_bytes_;
}

StoragePool::Stats StoragePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void StoragePool::ShrinkTo(size_t bytes) {
  while (stats_.held_bytes > bytes) {
    auto oldest = Oldest();
    Unmap(oldest->second.data, oldest->first);
    Forget(oldest);
  }
}

StoragePool::IdleMap::iterator StoragePool::Oldest() {
  auto oldest = idle_.begin();
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if (it->second.sequence < oldest->second.sequence) oldest = it;
  }
  return oldest;
}

void StoragePool::Forget(IdleMap::iterator it) {
  ++stats_.evicted;
  Drop(it);
}

StoragePool::IdleMap::iterator StoragePool::Release(IdleMap::iterator it) {
  Unmap(it->second.data, it->first);
  return Drop(it);
}

StoragePool::IdleMap::iterator StoragePool::Drop(IdleMap::iterator it) {
  stats_.held_bytes -= it->first;
  stats_.released_bytes += static_cast<int64_t>(it->first);
  --stats_.held_buffers;
  return idle_.erase(it);
}

}  // namespace jobgraph

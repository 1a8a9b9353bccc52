// SharedStorage<T>: a reference-counted T for copy-on-write storage (the
// elements of a Tensor and of its snapshots).
//
// Unlike std::shared_ptr, whose use_count() is a relaxed load, IsShared()
// reads the count with acquire ordering, and a holder's release decrements
// with release ordering. So a holder that finds itself the only one may write
// the value: every read by the former holders happened before. (With
// shared_ptr such a write would race those reads, and ThreadSanitizer says
// so.)
//
// Thread-safety: copies of one SharedStorage may be used and destroyed on
// different threads; the value itself is not synchronized: write it only
// when !IsShared().

#ifndef JOBGRAPH_ENGINE_SHARED_STORAGE_H_
#define JOBGRAPH_ENGINE_SHARED_STORAGE_H_

#include <atomic>
#include <cstdint>
#include <utility>

namespace jobgraph {

template <typename T>
class SharedStorage {
 public:
  SharedStorage() = default;
  // A new value, built from `args`, held once.
  template <typename... Args>
  static SharedStorage Make(Args&&... args) {
    SharedStorage s;
    s.block_ = new Block(std::forward<Args>(args)...);
    return s;
  }

  SharedStorage(const SharedStorage& other) : block_(other.block_) {
    if (block_ != nullptr) block_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedStorage(SharedStorage&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)) {}
  SharedStorage& operator=(SharedStorage other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~SharedStorage() { reset(); }

  void reset() {
    Block* block = std::exchange(block_, nullptr);
    if (block != nullptr &&
        block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete block;
    }
  }

  // Whether another SharedStorage holds the same value now.
  bool IsShared() const {
    return block_ != nullptr &&
           block_->refs.load(std::memory_order_acquire) > 1;
  }

  T* get() const { return block_ != nullptr ? &block_->value : nullptr; }
  T* operator->() const { return get(); }
  T& operator*() const { return *get(); }
  friend bool operator==(const SharedStorage& s, std::nullptr_t) {
    return s.block_ == nullptr;
  }
  friend bool operator!=(const SharedStorage& s, std::nullptr_t) {
    return s.block_ != nullptr;
  }

 private:
  struct Block {
    template <typename... Args>
    explicit Block(Args&&... args) : value(std::forward<Args>(args)...) {}
    std::atomic<int64_t> refs{1};
    T value;
  };

  Block* block_ = nullptr;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_SHARED_STORAGE_H_

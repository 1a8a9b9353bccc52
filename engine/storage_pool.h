// StoragePool: large tensor buffers (kMappedStorageBytes and more) that the
// process has freed, kept mapped for the next tensor of the same size.
//
// Why: on cloud VMs the first touch of fresh memory can run at a few hundred
// MB/s (the host took the freed pages back), against memcpy speed for pages
// the process already touched. Every epoch of an asynchronous checkpoint
// makes copy-on-write copies of the tensors it writes and frees them when
// the save is done; restores and staging make tensors of the sizes the last
// ones had. Without a pool each of those buffers is mapped fresh, and every
// epoch pays the first touch again.
//
// What it keeps: buffers given back by ~Tensor storage (Give), at most
// limit_bytes() in all (set_limit_bytes; 0 turns the pool off); a buffer
// given back to a full pool takes the place of the ones idle longest. A buffer
// is handed out again only for a request of the same size in pages (Take),
// zeroed when the tensor asks for zeros. TrimIdle, called once per epoch by
// the JobRunner, unmaps the buffers that were already idle at the call
// before and still are: the pool holds what the last epochs freed and
// reused, and gives back the rest within two epochs of the last use. A
// program that frees tensors without a JobRunner keeps up to the bound until
// it calls TrimIdle or set_limit_bytes itself.
//
// Ownership: the pool owns the mappings it holds; a buffer taken belongs to
// the caller, who gives it back or unmaps it. Thread-safe: tensors are freed
// on the save threads as on the job's.

#ifndef JOBGRAPH_ENGINE_STORAGE_POOL_H_
#define JOBGRAPH_ENGINE_STORAGE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>  // NOLINT(build/c++11)

#include "absl/base/thread_annotations.h"

namespace jobgraph {

class StoragePool {
 public:
  // The pool's bound when nothing sets one: 1 GiB. What an epoch of an
  // asynchronous save cycles through is the bytes it overwrites (each
  // tensor written while a save holds it is copied once); 1 GiB covers the
  // benchmarks' 256 MiB epochs four times over and stays small beside the
  // 24 GiB of the machines the project targets.
  static constexpr size_t kDefaultLimitBytes = size_t{1} << 30;

  struct Stats {
    size_t held_bytes = 0;    // mapped and idle in the pool now
    size_t held_buffers = 0;  // how many buffers that is
    int64_t hits = 0;         // Takes served from the pool
    int64_t misses = 0;       // Takes the pool could not serve
    int64_t kept = 0;         // Gives the pool kept
    int64_t refused = 0;      // Gives larger than the limit (unmapped)
    // Idle buffers unmapped to make room (for a Give, a fresh mapping or a
    // lower limit).
    int64_t evicted = 0;
    // Idle bytes unmapped: by TrimIdle, a lower limit, and evictions.
    int64_t released_bytes = 0;
  };

  StoragePool() = default;
  StoragePool(const StoragePool&) = delete;
  StoragePool& operator=(const StoragePool&) = delete;
  ~StoragePool();

  // The pool every tensor uses.
  static StoragePool& Global();

  // The size in bytes a buffer of `bytes` is mapped with: whole pages.
  static size_t MappedSize(size_t bytes);

  // A buffer of MappedSize(bytes) bytes, mapped read-write: one the pool
  // held (its old contents, or its first `bytes` zeroed if `zero`), else a
  // fresh mapping (zero already). If the system has no memory to map, the
  // pool unmaps what it holds and tries once more; nullptr if that fails.
  void* Take(size_t bytes, bool zero);

  // Gives back a buffer from Take (`bytes` as asked for): kept, unmapping
  // the buffers idle longest if the pool would go past its limit; unmapped
  // if it is larger than the limit.
  void Give(void* data, size_t bytes);

  // Unmaps the buffers that were idle in the pool at the previous call and
  // still are; returns the bytes unmapped.
  size_t TrimIdle();

  // Sets the bound, unmapping idle buffers (oldest first) down to it.
  void set_limit_bytes(size_t bytes);
  size_t limit_bytes() const;

  Stats stats() const;

 private:
  struct Idle {
    void* data;
    uint64_t round;     // the TrimIdle round it was given back in
    uint64_t sequence;  // order of the Gives
  };

  // Unmaps idle buffers, given back longest ago first, until at most
  // `bytes` are held; counts them as evicted.
  void ShrinkTo(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Mapped size -> idle buffers of that size, the newest last.
  using IdleMap = std::multimap<size_t, Idle>;
  // Unmaps the idle buffer at `it`, counts it, and returns the next one.
  IdleMap::iterator Release(IdleMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The idle buffer given back longest ago; idle_ must not be empty.
  IdleMap::iterator Oldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops an idle buffer from the pool (the caller unmaps it) and counts it
  // as evicted.
  void Forget(IdleMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes an idle buffer out of the pool and its stats (not unmapping it);
  // returns the next one.
  IdleMap::iterator Drop(IdleMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex, and a buffer freed on a save thread and taken on
  // the job's would look like a race.
  mutable std::mutex mu_;
  size_t limit_bytes_ ABSL_GUARDED_BY(mu_) = kDefaultLimitBytes;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  IdleMap idle_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_STORAGE_POOL_H_

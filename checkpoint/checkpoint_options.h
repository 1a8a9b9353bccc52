// CheckpointOptions: how a Checkpointer (checkpointer.h) saves, keeps and
// finds a job's checkpoints. Plain values; thread-compatible.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINT_OPTIONS_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINT_OPTIONS_H_

#include <cstdint>
#include <string>

namespace jobgraph {

// Which committed epochs a checkpoint directory keeps. The newest committed
// epoch is always kept (and, while it is a mid-epoch preemption checkpoint,
// the newest ordinary one too).
struct RetentionOptions {
  // Keep only the newest `keep_last` committed epochs. Default 0: keep all.
  int keep_last = 0;
  // Also keep every epoch divisible by `keep_every`. Default 0: none extra.
  int keep_every = 0;
};

struct CheckpointOptions {
  // Directory that holds the databases and the commit log; created (with
  // its parents) on the first save. Required.
  std::string directory;
  // Database type from the DB registry. Default "leveldb" ("memory" for
  // tests).
  std::string db_type = "leveldb";
  // For a job with one checkpointed node: the name its databases carry
  // (Caffe2's node_name). Default empty: the node's own name. Must be empty
  // when the job checkpoints several nodes.
  std::string node_name;
  // Tensors are split into database values of at most this many bytes.
  // Default 64 MiB.
  int64_t chunk_bytes = int64_t{64} << 20;
  // Which committed epochs to keep after each commit. Default: all.
  RetentionOptions retention;
  // Save in the background. Default false: a save returns once its epoch is
  // committed. When true, a save blocks only while it freezes the
  // checkpointed blobs (tensors are shared copy-on-write, so this grows
  // with the number of blobs, not their bytes); the databases are written
  // and the epoch committed while the job goes on, and the outcome is known
  // later (Checkpointer::TakeFinishedSaves). At most one save writes at a
  // time. A crash loses the epochs not committed yet: one in one process;
  // under MPI, where the ranks agree at the next boundary and rank 0 then
  // commits, up to two.
  bool async = false;
  // Incremental saves: a node's database holds only the blobs that changed
  // since the node's last committed save in this run, and lists the others
  // by reference to the databases that hold them (checkpoint/FORMAT.md
  // 4.7). A tensor counts as changed when anything wrote it since
  // (Tensor::generation); other blobs are always written. Default false.
  bool incremental = false;
  // With `incremental`: a full save whenever the last full save of the run
  // is this many epochs back, so that restoring an epoch reads at most this
  // many databases per node. From 1 (every save full) to kMaxFullEvery: the
  // processes of a job exchange one count per epoch of a chain at every
  // save. Default 10.
  int full_every = 10;

  // --- Tiers (checkpoint/FORMAT.md, "The local tier").
  // A node-local checkpoint directory (a tmpfs such as /dev/shm, or a local
  // disk); "%h" stands for the host name, "%%" for "%". When set, every
  // save is written and committed there, with a commit log of its own, and
  // `directory` (the shared tier) receives committed epochs by a background
  // flush that copies their databases, checking each file's recorded size
  // and CRC-32C, and commits them in the shared commit log. A resume
  // reads an epoch from the local tier when it holds a copy that verifies
  // and that continues the shared tier's history, else from `directory`.
  // Default empty: no local tier, every save goes to `directory`. One
  // process only for now (not under MpiSession), and not with
  // `incremental`.
  std::string local_directory;
  // With a local tier: epochs divisible by `shared_every` are flushed to
  // `directory` in the background. Whatever it is, the end of a run, a
  // preemption and the mark after the last epoch flush the newest committed
  // epoch before they return. From 1 (every epoch, the default).
  int shared_every = 1;
  // With a local tier: the local commit log keeps the newest `keep_local`
  // committed epochs, besides the newest one flushed to `directory` and any
  // being flushed (those are what a resume checks the local copy against,
  // and what a flush reads). At least 1; default 2. `retention` applies to
  // `directory`.
  int keep_local = 2;
};

// The largest CheckpointOptions::full_every.
inline constexpr int kMaxFullEvery = 1000;

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINT_OPTIONS_H_

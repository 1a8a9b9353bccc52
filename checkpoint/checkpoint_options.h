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
};

// The largest CheckpointOptions::full_every.
inline constexpr int kMaxFullEvery = 1000;

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINT_OPTIONS_H_

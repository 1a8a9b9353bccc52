// ShuffleCursor: the reading position of a shuffling Dataset reader, held in
// a blob of the node's root workspace.
//
// Epoch e reads the rows in the order ShufflePermutation(seed, e, num_rows)
// (shuffle.h), so the position within an epoch plus the epoch number fully
// determine what comes next: a cursor restored from a checkpoint taken in the
// middle of an epoch continues the same order. The state:
//   seed       fixed at creation;
//   epoch      0 for the first pass over the data;
//   position   rows of this epoch's order already handed out;
//   num_rows   the data's row count, recorded by the epoch's first read
//              (-1 before it) so that reading resumed over different data
//              fails instead of silently reading another order;
//   exhausted  the epoch has returned its empty batch.
//
// End of an epoch: once `position` reaches num_rows, reads return an empty
// batch and mark the epoch exhausted; they keep returning empty batches until
// a new epoch is started. StartNextEpoch(only_if_exhausted = true) (run by
// the reader's setup, i.e. at the start of every task run) starts epoch + 1
// at position 0 only if the current epoch is exhausted; Reset starts it
// unconditionally. So with a ReaderWithLimit, an epoch whose last row was
// consumed but whose empty batch was not yet seen still ends with an empty
// read (setting data_finished), exactly like the unshuffled reader.
//
// Checkpointed as BlobProto.type "std::unique_ptr<ShuffleCursor>": an int64
// tensor [seed (two's complement of the uint64), epoch, position, num_rows,
// exhausted] and the field names, space-separated, in `content`.
//
// Thread-safe: reads take the mutex, copy their row indices and advance.

#ifndef JOBGRAPH_ENGINE_DATA_SHUFFLE_CURSOR_H_
#define JOBGRAPH_ENGINE_DATA_SHUFFLE_CURSOR_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace jobgraph {

inline constexpr char kShuffleCursorTypeName[] =
    "std::unique_ptr<ShuffleCursor>";

class ShuffleCursor {
 public:
  struct State {
    uint64_t seed = 0;
    int64_t epoch = 0;
    int64_t position = 0;
    int64_t num_rows = -1;
    bool exhausted = false;
  };

  ShuffleCursor() = default;
  ShuffleCursor(std::vector<std::string> fields, State state)
      : fields_(std::move(fields)), state_(state) {}
  ShuffleCursor(const ShuffleCursor&) = delete;
  ShuffleCursor& operator=(const ShuffleCursor&) = delete;

  const std::vector<std::string>& fields() const { return fields_; }

  // Sets `rows` to the indices of the next batch of at most `batch_size` rows
  // of this epoch's order over data of `num_rows` rows, and advances. An
  // empty `rows` is the end of the epoch. FailedPrecondition when `num_rows`
  // differs from the count this epoch started with.
  absl::Status NextBatch(int64_t batch_size, int64_t num_rows,
                         std::vector<int64_t>* rows);

  // Starts epoch + 1 at position 0 (always, or only when the current epoch
  // is exhausted). Returns whether it did.
  bool StartNextEpoch(bool only_if_exhausted);

  State state() const;

 private:
  const std::vector<std::string> fields_;
  mutable std::mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
  // This epoch's order, computed on the epoch's first read (also after a
  // restore); not part of the state.
  std::vector<int64_t> order_ ABSL_GUARDED_BY(mu_);
  int64_t order_epoch_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_SHUFFLE_CURSOR_H_

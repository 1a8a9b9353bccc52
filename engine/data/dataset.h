// Dataset: an in-memory record (field tensors with a common first dimension)
// and the readers over it, as Caffe2's dataset.Dataset.
//
// A reader's position is a cursor blob that NewReader's op creates in
// `init_net`. Pass the init group's task (a GLOBAL task) so the cursor lives
// in the node's root workspace: it then survives from epoch to epoch and is
// checkpointed with it, and a resumed job reads exactly the records an
// uninterrupted one would.
//
// Blob names derive from the dataset's name, never from a process-wide
// counter, so a job builds identically each time and checkpoints stay
// loadable:
//   cursor          "<name>_cursor"          (NewReader)
//                   "<name>_shuffle_cursor"  (NewShuffledReader)
//   batch fields    "<reader>/read/<field>"  reader = name, name + "_shuffle"
//   should_stop     "<reader>/read/empty"
// One Dataset gives one reader of each kind; two readers of one kind would
// share the cursor (name a second Dataset differently for a second reader).
//
// Example (Caffe2's checkpoint_test pipeline):
//   Task& init = init_group.NewTask(Node("trainer_0"));
//   Record rec = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(10)}});
//   Dataset dataset(rec, "dataset:0");
//   Reader reader = dataset.NewReader(init.net());  // "dataset:0_cursor"
//
// A Dataset is an immutable value; readers are handles (reader.h).

#ifndef JOBGRAPH_ENGINE_DATA_DATASET_H_
#define JOBGRAPH_ENGINE_DATA_DATASET_H_

#include <cstdint>
#include <string>

#include "engine/data/reader.h"
#include "engine/data/record.h"
#include "engine/net_builder.h"

namespace jobgraph {

class Dataset {
 public:
  // `record` must have at least one field (CHECKed); its blobs must exist
  // when the reader's nets are built (e.g. made by ConstRecord in the same
  // init task).
  explicit Dataset(Record record, std::string name = "dataset");

  const std::string& name() const { return name_; }
  const Record& record() const { return record_; }

  // Reads the rows in order, `batch_size` at a time (the last batch may be
  // shorter; with `enforce_batch_size` a short batch reads as empty, i.e.
  // the end). After the last row, every read returns an empty batch; Reset
  // rewinds to row 0. Adds CreateTreeCursor("<name>_cursor") to `init_net`.
  Reader NewReader(NetBuilder& init_net, int64_t batch_size = 1,
                   bool enforce_batch_size = false) const;

  // Reads every row once per epoch in the order ShufflePermutation(seed,
  // epoch, rows) (shuffle.h), `batch_size` at a time; the epoch and the
  // position in it are in the cursor "<name>_shuffle_cursor", added to
  // `init_net`. An epoch ends with an empty batch; the next epoch starts at
  // the next task run (SetupEx) after that empty batch, or at Reset (see
  // shuffle_cursor.h).
  Reader NewShuffledReader(NetBuilder& init_net, uint64_t seed,
                           int64_t batch_size = 1) const;

 private:
  Record record_;
  std::string name_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_DATASET_H_

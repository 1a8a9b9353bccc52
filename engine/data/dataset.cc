#include "engine/data/dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/data/cursor_reader.h"
#include "glog/logging.h"

namespace jobgraph {

Dataset::Dataset(Record record, std::string name)
    : record_(std::move(record)), name_(std::move(name)) {
  CHECK(!record_.empty()) << "dataset '" << name_ << "' has no fields";
}

Reader Dataset::NewReader(NetBuilder& init_net, int64_t batch_size,
                          bool enforce_batch_size) const {
  data_internal::CursorReaderSpec spec;
  spec.name = name_;
  spec.cursor = init_net.Op("CreateTreeCursor", {},
                            {BlobRef(absl::StrCat(name_, "_cursor"))},
                            {MakeArg("fields", record_.field_names())})[0];
  spec.read_op = "ReadNextBatch";
  spec.sources = record_.field_blobs();
  spec.fields = record_.field_names();
  spec.read_args = {MakeArg("batch_size", batch_size),
                    MakeArg("enforce_batch_size", enforce_batch_size)};
  spec.reset_op = "ResetCursor";
  return data_internal::MakeCursorReader(std::move(spec));
}

Reader Dataset::NewShuffledReader(NetBuilder& init_net, uint64_t seed,
                                  int64_t batch_size) const {
  data_internal::CursorReaderSpec spec;
  spec.name = absl::StrCat(name_, "_shuffle");
  spec.cursor = init_net.Op("CreateShuffleCursor", {},
                            {BlobRef(absl::StrCat(name_, "_shuffle_cursor"))},
                            {MakeArg("fields", record_.field_names()),
                             MakeArg("seed", static_cast<int64_t>(seed))})[0];
  spec.read_op = "ReadNextShuffledBatch";
  spec.sources = record_.field_blobs();
  spec.fields = record_.field_names();
  spec.read_args = {MakeArg("batch_size", batch_size)};
  spec.setup_op = "StartNextShuffleEpoch";
  spec.setup_args = {MakeArg("only_if_exhausted", true)};
  spec.reset_op = "StartNextShuffleEpoch";
  spec.reset_args = {MakeArg("only_if_exhausted", false)};
  return data_internal::MakeCursorReader(std::move(spec));
}

}  // namespace jobgraph

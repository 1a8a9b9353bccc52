// Record: an ordered set of named fields, each a BlobRef to a tensor, all
// with the same first dimension (one row per record). It is what a Reader
// returns for one batch and what a Dataset is built from; Caffe2's schema
// Struct reduced to flat fields.
//
// ConstRecord adds constant fields to a net, naming each field's blob after
// the field ("val"), so a Dataset over it can be built in an init task and
// its blobs found by name later (and checkpointed).
//
// Example:
//   Record rec = ConstRecord(task.net(), {{"val", Tensor::Iota<int64_t>(10)}});
//   BlobRef val = rec.Field("val");  // the blob "val"
//
// A Record is a small value (names only, no tensor data); copy it freely. Not
// thread-safe; use it from builder code.

#ifndef JOBGRAPH_ENGINE_DATA_RECORD_H_
#define JOBGRAPH_ENGINE_DATA_RECORD_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/net_builder.h"
#include "engine/tensor.h"

namespace jobgraph {

class Record {
 public:
  Record() = default;

  // Appends a field. Field names must be unique (checked: a duplicate is a
  // bug in the builder code, not a run-time condition).
  void AddField(std::string name, BlobRef blob);

  bool HasField(absl::string_view name) const;
  // The blob of field `name`. Asking for a field the record does not have is
  // a bug in the builder code; it CHECK-fails, listing the fields it has.
  const BlobRef& Field(absl::string_view name) const;

  size_t size() const { return names_.size(); }
  bool empty() const { return names_.empty(); }
  const std::vector<std::string>& field_names() const { return names_; }
  const std::vector<BlobRef>& field_blobs() const { return blobs_; }

 private:
  std::vector<std::string> names_;
  std::vector<BlobRef> blobs_;
};

// Adds one GivenTensor*Fill per field to `net`, in order, each writing the
// blob named like its field, and returns the record of those blobs.
Record ConstRecord(NetBuilder& net,
                   const std::vector<std::pair<std::string, Tensor>>& fields);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_RECORD_H_

#include "engine/data/shuffle_cursor.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/blob.h"
#include "engine/data/cursor_proto.h"
#include "engine/data/shuffle.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::Status ShuffleCursor::NextBatch(int64_t batch_size, int64_t num_rows,
                                      std::vector<int64_t>* rows) {
  rows->clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.num_rows < 0) state_.num_rows = num_rows;
  if (state_.num_rows != num_rows) {
    return absl::FailedPreconditionError(absl::StrCat(
        "epoch ", state_.epoch, " of the shuffled order was started over ",
        state_.num_rows, " rows (now at position ", state_.position,
        ") but the data has ", num_rows,
        " rows; did the data change since the position was saved?"));
  }
  if (state_.position >= num_rows) {
    state_.exhausted = true;
    return absl::OkStatus();
  }
  if (order_epoch_ != state_.epoch ||
      static_cast<int64_t>(order_.size()) != num_rows) {
    order_ = ShufflePermutation(state_.seed, state_.epoch, num_rows);
    order_epoch_ = state_.epoch;
  }
  const int64_t end = std::min(num_rows, state_.position + batch_size);
  rows->assign(order_.begin() + state_.position, order_.begin() + end);
  state_.position = end;
  return absl::OkStatus();
}

bool ShuffleCursor::StartNextEpoch(bool only_if_exhausted) {
  std::lock_guard<std::mutex> lock(mu_);
  if (only_if_exhausted && !state_.exhausted) return false;
  ++state_.epoch;
  state_.position = 0;
  state_.num_rows = -1;
  state_.exhausted = false;
  return true;
}

ShuffleCursor::State ShuffleCursor::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

namespace {

class ShuffleCursorSerializer final : public BlobSerializer {
 public:
  std::string type_name() const override { return kShuffleCursorTypeName; }

  absl::Status Serialize(absl::string_view name, const Blob& blob,
                         const SerializationOptions& options,
                         const BlobSink& sink) const override {
    const ShuffleCursor& cursor = blob.Get<ShuffleCursor>();
    const ShuffleCursor::State s = cursor.state();
    std::string fields;
    for (const std::string& field : cursor.fields()) {
      absl::StrAppend(&fields, field, " ");
    }
    const int64_t values[] = {static_cast<int64_t>(s.seed), s.epoch, s.position,
                              s.num_rows, s.exhausted ? 1 : 0};
    return sink(std::string(name), data_internal::SerializeCursorProto(
                                       name, type_name(), values, fields));
  }

  absl::Status Deserialize(const BlobProto& proto,
                           Blob* target) const override {
    JG_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                        data_internal::CursorValues(proto));
    if (v.size() != 5) {
      return absl::DataLossError(
          absl::StrCat("blob '", proto.name(),
                       "': a shuffle cursor holds 5 "
                       "values (seed, epoch, position, num_rows, exhausted), "
                       "got ",
                       v.size()));
    }
    ShuffleCursor::State s;
    s.seed = static_cast<uint64_t>(v[0]);
    s.epoch = v[1];
    s.position = v[2];
    s.num_rows = v[3];
    s.exhausted = v[4] != 0;
    if (s.epoch < 0 || s.position < 0 || s.num_rows < -1 ||
        (s.num_rows >= 0 && s.position > s.num_rows) || v[4] < 0 || v[4] > 1) {
      return absl::DataLossError(
          absl::StrCat("blob '", proto.name(),
                       "': inconsistent shuffle cursor state "
                       "(epoch ",
                       s.epoch, ", position ", s.position, ", num_rows ",
                       s.num_rows, ", exhausted ", v[4], ")"));
    }
    std::vector<std::string> fields =
        absl::StrSplit(proto.content(), ' ', absl::SkipEmpty());
    target->Reset(std::make_unique<ShuffleCursor>(std::move(fields), s));
    return absl::OkStatus();
  }
};

JG_REGISTER_BLOB_TYPE(ShuffleCursor, kShuffleCursorTypeName);
JG_REGISTER_BLOB_SERIALIZER(ShuffleCursor, ShuffleCursorSerializer);

}  // namespace
}  // namespace jobgraph

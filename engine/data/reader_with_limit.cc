#include "engine/data/reader_with_limit.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace jobgraph {
namespace {

class ReaderWithLimitImpl final : public ReaderImpl {
 public:
  ReaderWithLimitImpl(Reader inner, std::optional<int64_t> num_iter,
                      std::string name)
      : inner_(std::move(inner)),
        num_iter_(num_iter.has_value() && *num_iter < 0 ? std::nullopt
                                                        : num_iter),
        name_(name.empty() ? inner_.impl().DerivedName("limit")
                           : std::move(name)),
        data_finished_(absl::StrCat(name_, "/data_finished"), inner_.node()),
        counter_(absl::StrCat(name_, "/counter"), inner_.node()),
        status_(absl::StrCat(name_, "/status"), inner_.node()) {}

  const std::string& name() const override { return name_; }
  const std::string& node() const override { return inner_.node(); }

  void SetupEx(NetBuilder& task_init, NetBuilder& task_exit) const override {
    FillFalse(task_init, data_finished_);
    inner_.SetupEx(task_init, task_exit);
    if (num_iter_.has_value()) task_init.CreateCounter(*num_iter_, counter_);
  }

  ReadResult ReadEx(NetBuilder& instance_init, NetBuilder& instance_exit,
                    NetBuilder& body) const override {
    // (a) limited_reader_condition.
    body.NewNet();
    if (num_iter_.has_value()) {
      body.CountDown(counter_, status_);
    } else {
      FillFalse(body, status_);
    }
    body.NewNet();
    // (b) the inner reader's nets.
    ReadResult inner = inner_.ReadEx(instance_init, instance_exit, body);
    // (c) limited_reader_post.
    body.NewNet();
    body.Copy(inner.should_stop, status_);
    body.Op("AtomicOr", {data_finished_, inner.should_stop}, {data_finished_});
    body.NewNet();
    return {status_, std::move(inner.record)};
  }

  void Reset(NetBuilder& net) const override {
    inner_.Reset(net);
    FillFalse(net, data_finished_);
  }

  std::vector<BlobRef> TaskOutputs() const override {
    std::vector<BlobRef> outputs = inner_.TaskOutputs();
    outputs.push_back(data_finished_);
    return outputs;
  }

  const BlobRef& data_finished() const { return data_finished_; }
  const BlobRef& counter() const { return counter_; }
  std::optional<int64_t> num_iter() const { return num_iter_; }

 private:
  const Reader inner_;
  const std::optional<int64_t> num_iter_;
  const std::string name_;
  const BlobRef data_finished_;
  const BlobRef counter_;
  const BlobRef status_;
};

const ReaderWithLimitImpl& Impl(const Reader& reader) {
  return static_cast<const ReaderWithLimitImpl&>(reader.impl());
}

}  // namespace

ReaderWithLimit::ReaderWithLimit(Reader reader, std::optional<int64_t> num_iter,
                                 std::string name)
    : Reader(std::make_shared<ReaderWithLimitImpl>(std::move(reader), num_iter,
                                                   std::move(name))) {}

BlobRef ReaderWithLimit::data_finished() const {
  return Impl(*this).data_finished();
}
BlobRef ReaderWithLimit::counter() const { return Impl(*this).counter(); }
std::optional<int64_t> ReaderWithLimit::num_iter() const {
  return Impl(*this).num_iter();
}

}  // namespace jobgraph

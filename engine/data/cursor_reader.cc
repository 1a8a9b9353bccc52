#include "engine/data/cursor_reader.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jobgraph {
namespace data_internal {
namespace {

class CursorReader final : public ReaderImpl {
 public:
  explicit CursorReader(CursorReaderSpec spec) : spec_(std::move(spec)) {}

  const std::string& name() const override { return spec_.name; }
  const std::string& node() const override { return spec_.cursor.node(); }

  void SetupEx(NetBuilder& task_init, NetBuilder& task_exit) const override {
    if (spec_.setup_op.empty()) return;
    task_init.Op(spec_.setup_op, {spec_.cursor}, std::vector<BlobRef>{},
                 spec_.setup_args);
  }

  ReadResult ReadEx(NetBuilder& instance_init, NetBuilder& instance_exit,
                    NetBuilder& body) const override {
    std::vector<BlobRef> inputs = {spec_.cursor};
    inputs.insert(inputs.end(), spec_.sources.begin(), spec_.sources.end());
    std::vector<BlobRef> outputs;
    for (const std::string& field : spec_.fields) {
      outputs.push_back(BlobRef(absl::StrCat(spec_.name, "/read/", field)));
    }
    // One net: the stop check comes after the emptiness test, never between
    // the read and it.
    body.NewNet();
    std::vector<BlobRef> batch =
        body.Op(spec_.read_op, inputs, outputs, spec_.read_args);
    ReadResult result;
    result.should_stop = body.IsEmpty(
        batch[0], BlobRef(absl::StrCat(spec_.name, "/read/empty")));
    body.NewNet();
    for (size_t i = 0; i < spec_.fields.size(); ++i) {
      result.record.AddField(spec_.fields[i], batch[i]);
    }
    return result;
  }

  void Reset(NetBuilder& net) const override {
    net.Op(spec_.reset_op, {spec_.cursor}, std::vector<BlobRef>{},
           spec_.reset_args);
  }

 private:
  const CursorReaderSpec spec_;
};

}  // namespace

Reader MakeCursorReader(CursorReaderSpec spec) {
  return Reader(std::make_shared<CursorReader>(std::move(spec)));
}

}  // namespace data_internal
}  // namespace jobgraph

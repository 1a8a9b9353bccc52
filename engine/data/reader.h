// Reader: the builder-side interface of a data source, mirroring Caffe2's
// dataio.Reader. A reader does not hold data or a position itself; it emits
// ops. Its position lives in a cursor blob that an init task creates in the
// node's root workspace, so a checkpoint of that workspace captures it and a
// resumed job continues with exactly the next records.
//
// The protocol, as a task that reads uses it (see Pipe in pipe.h):
//   - SetupEx(task_init, task_exit): once per task run (so once per epoch for
//     an epoch group), in the task's init and exit nets.
//   - ReadEx(instance_init, instance_exit, body): once per task, for its
//     instances. It appends the nets that read one batch to `body`, each net
//     of its own (body.NewNet() in between) so that the executor checks the
//     stop blob between them, and returns the should_stop blob and the batch.
//     should_stop is a bool scalar; true means "nothing more to read". Every
//     instance runs the nets in its own workspace, so they must be safe to
//     run concurrently against the shared cursor.
//   - Reset(net): rewinds the reader (what "rewind" means is per reader).
//   - TaskOutputs(): blobs that must exist in the node's root workspace
//     (e.g. ReaderWithLimit's data_finished); a task reading from this
//     reader adds them as task outputs so the session pre-creates them there.
//
// End of data is signalled by an EMPTY batch (0 rows) and nothing else.
//
// `Reader` is a cheap, copyable handle to an immutable ReaderImpl; builder
// code passes it by value. Implementations are immutable after construction,
// so handles may be shared across threads, but builder calls are not
// thread-safe (NetBuilder is not).

#ifndef JOBGRAPH_ENGINE_DATA_READER_H_
#define JOBGRAPH_ENGINE_DATA_READER_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/data/record.h"
#include "engine/net_builder.h"

namespace jobgraph {

// What ReadEx returns: the blob that stops the reading loop and the batch.
struct ReadResult {
  BlobRef should_stop;
  Record record;
};

// Implemented by each kind of reader. Methods only add ops to builders.
class ReaderImpl {
 public:
  virtual ~ReaderImpl() = default;

  // A deterministic name (derived from the dataset / file name) that
  // prefixes every blob the reader's nets create.
  virtual const std::string& name() const = 0;
  // The node whose workspaces hold the reader's blobs (the node of the init
  // net it was made in), so blobs it names, such as a limit's
  // data_finished, can be fetched and used as stop conditions.
  virtual const std::string& node() const = 0;
  virtual void SetupEx(NetBuilder& task_init, NetBuilder& task_exit) const = 0;
  virtual ReadResult ReadEx(NetBuilder& instance_init,
                            NetBuilder& instance_exit,
                            NetBuilder& body) const = 0;
  virtual void Reset(NetBuilder& net) const = 0;
  virtual std::vector<BlobRef> TaskOutputs() const { return {}; }

  // "<name()>/<kind>" the first time, then "<name()>/<kind>:1", ":2"...: a
  // name for a reader built on this one (a limit), unique among those of
  // the same kind, and the same every time the job is built in the same
  // order, so checkpoints made by one build resume in another.
  std::string DerivedName(absl::string_view kind) const;

 private:
  mutable std::mutex derived_mu_;
  mutable std::map<std::string, int> derived_counts_;
};

class Reader {
 public:
  // An invalid reader; using it CHECK-fails.
  Reader() = default;
  explicit Reader(std::shared_ptr<const ReaderImpl> impl)
      : impl_(std::move(impl)) {}

  bool valid() const { return impl_ != nullptr; }
  const std::string& name() const { return impl().name(); }
  const std::string& node() const { return impl().node(); }

  void SetupEx(NetBuilder& task_init, NetBuilder& task_exit) const {
    impl().SetupEx(task_init, task_exit);
  }
  ReadResult ReadEx(NetBuilder& instance_init, NetBuilder& instance_exit,
                    NetBuilder& body) const {
    return impl().ReadEx(instance_init, instance_exit, body);
  }
  void Reset(NetBuilder& net) const { impl().Reset(net); }
  std::vector<BlobRef> TaskOutputs() const { return impl().TaskOutputs(); }

  const ReaderImpl& impl() const;
  const std::shared_ptr<const ReaderImpl>& shared_impl() const { return impl_; }

 private:
  std::shared_ptr<const ReaderImpl> impl_;
};

// Adds `status := false` (a bool scalar, ConstantFill) to `net`: how a
// reading loop's should_stop blob is reset before its first iteration, and
// how "unlimited" limits and data_finished flags are initialised.
void FillFalse(NetBuilder& net, const BlobRef& blob);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_READER_H_

// Publishing a finished job's checkpoint: Caffe2's UploadTaskGroupBuilder,
// and a built-in builder that copies each node's last database to a local
// directory (a mounted bucket, a shared file system).
//
// The runner calls Build() once, after the epoch loop, and runs the group.

#ifndef JOBGRAPH_CHECKPOINT_UPLOAD_H_
#define JOBGRAPH_CHECKPOINT_UPLOAD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpointer.h"
#include "engine/task.h"

namespace jobgraph {

class UploadTaskGroupBuilder {
 public:
  virtual ~UploadTaskGroupBuilder() = default;
  // The group that publishes the databases of `epoch`.
  virtual absl::StatusOr<TaskGroup> Build(int64_t epoch,
                                          const Checkpointer& checkpointer) = 0;
};

// Copies "<checkpoint dir>/<node>.<epoch>" to "<directory>/<node>" for every
// node, with a Function op on that node. An existing "<directory>/<node>" (an
// earlier run's upload) is replaced atomically: readers see the old copy or
// the new one.
class UploadToLocalDirectory : public UploadTaskGroupBuilder {
 public:
  explicit UploadToLocalDirectory(std::string directory)
      : directory_(std::move(directory)) {}
  absl::StatusOr<TaskGroup> Build(int64_t epoch,
                                  const Checkpointer& checkpointer) override;

 private:
  std::string directory_;
};

// Copies a file, or a directory and everything below it, to `to`, which must
// not exist; the copy is fsynced. Errors name both paths.
absl::Status CopyRecursively(const std::string& from, const std::string& to);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_UPLOAD_H_

// Workspace: the named blobs that operators read and write.
//
// A node's root ("global") workspace lives as long as its Session. A child
// workspace has a parent and follows Caffe2's rules: lookups fall through to
// the parent; CreateBlob of a name that exists in the parent returns the
// parent's blob, so writes go through; blobs first created in the child vanish
// with it. The parent must outlive the child.
//
// Thread-safe: any number of threads may look up, create and remove blobs
// concurrently. Blob pointers stay valid until the blob is removed or its
// workspace destroyed. Access to one blob's value is not synchronised here.

#ifndef JOBGRAPH_ENGINE_WORKSPACE_H_
#define JOBGRAPH_ENGINE_WORKSPACE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/blob.h"
#include "engine/tensor.h"

namespace jobgraph {

class Collectives;

class Workspace {
 public:
  // `parent` (may be null) is borrowed and must outlive this workspace.
  explicit Workspace(Workspace* parent = nullptr, std::string name = "");
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();

  // A label for messages: "trainer_0" for a node's root workspace.
  const std::string& name() const { return name_; }
  Workspace* parent() const { return parent_; }

  // True when `name` exists here or in an ancestor.
  bool HasBlob(absl::string_view name) const;
  // The blob named `name` here or in the nearest ancestor; null if none.
  Blob* GetBlob(absl::string_view name) const;
  // GetBlob, or an error naming the blob and this workspace.
  absl::StatusOr<Blob*> FindBlob(absl::string_view name) const;
  // The existing blob if any ancestor has `name` (so writes reach it);
  // otherwise a new, uninitialized local blob.
  Blob* CreateBlob(absl::string_view name);
  // CreateBlob of each of `names`, in order, taking this workspace's lock
  // once and making room for all first: for an operator with many outputs
  // (a Load of 100,000 blobs).
  std::vector<Blob*> CreateBlobs(absl::Span<const absl::string_view> names);
  // A local blob, shadowing any ancestor's blob of the same name.
  Blob* CreateLocalBlob(absl::string_view name);
  // Removes a local blob; returns false if there was none.
  bool RemoveBlob(absl::string_view name);

  // Local blob names, sorted.
  std::vector<std::string> LocalBlobNames() const;
  // Local and ancestor names, sorted, without duplicates.
  std::vector<std::string> BlobNames() const;

  // The tensor held by blob `name`, or an error naming the blob when it is
  // missing or holds something else.
  absl::StatusOr<const Tensor*> GetTensor(absl::string_view name) const;
  // Stores `value` in blob `name` (CreateBlob rules) and returns it.
  Tensor* SetTensor(absl::string_view name, Tensor value);

  // The collectives (collectives.h) of the run in progress: set on a node's
  // root workspace by the session for one Run and found from every child.
  // Null outside such a run. Borrowed.
  void set_collectives(Collectives* collectives) {
    collectives_.store(collectives);
  }
  Collectives* collectives() const;

 private:
  Blob* FindLocal(absl::string_view name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  Workspace* const parent_;
  const std::string name_;
  std::atomic<Collectives*> collectives_{nullptr};
  mutable std::shared_mutex mu_;
  // Hashed, not ordered: a Save or Load of 100,000 blobs looks each one up
  // here, and the listings sort their copy instead.
  absl::flat_hash_map<std::string, std::unique_ptr<Blob>> blobs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_WORKSPACE_H_

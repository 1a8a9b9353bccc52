#include "engine/workspace.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace jobgraph {

Workspace::Workspace(Workspace* parent, std::string name)
    : parent_(parent), name_(std::move(name)) {}

Workspace::~Workspace() = default;

Blob* Workspace::FindLocal(absl::string_view name) const {
  auto it = blobs_.find(name);
  return it == blobs_.end() ? nullptr : it->second.get();
}

bool Workspace::HasBlob(absl::string_view name) const {
  return GetBlob(name) != nullptr;
}

Blob* Workspace::GetBlob(absl::string_view name) const {
  for (const Workspace* ws = this; ws != nullptr; ws = ws->parent_) {
    std::shared_lock<std::shared_mutex> lock(ws->mu_);
    if (Blob* blob = ws->FindLocal(name)) return blob;
  }
  return nullptr;
}

absl::StatusOr<Blob*> Workspace::FindBlob(absl::string_view name) const {
  if (Blob* blob = GetBlob(name)) return blob;
  return absl::NotFoundError(absl::StrCat(
      "blob '", name, "' does not exist in workspace '", name_, "'"));
}

Blob* Workspace::CreateBlob(absl::string_view name) {
  if (parent_ != nullptr) {
    if (Blob* inherited = parent_->GetBlob(name)) return inherited;
  }
  return CreateLocalBlob(name);
}

std::vector<Blob*> Workspace::CreateBlobs(
    absl::Span<const absl::string_view> names) {
  std::vector<Blob*> blobs(names.size(), nullptr);
  if (parent_ != nullptr) {
    for (size_t i = 0; i < names.size(); ++i) {
      blobs[i] = parent_->GetBlob(names[i]);
    }
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  blobs_.reserve(blobs_.size() + names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (blobs[i] != nullptr) continue;
    std::unique_ptr<Blob>& blob = blobs_[names[i]];
    if (blob == nullptr) blob = std::make_unique<Blob>();
    blobs[i] = blob.get();
  }
  return blobs;
}

Blob* Workspace::CreateLocalBlob(absl::string_view name) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = blobs_.find(name);
  if (it != blobs_.end()) return it->second.get();
  auto inserted =
      blobs_.emplace(std::string(name), std::make_unique<Blob>()).first;
  return inserted->second.get();
}

bool Workspace::RemoveBlob(absl::string_view name) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = blobs_.find(name);
  if (it == blobs_.end()) return false;
  blobs_.erase(it);
  return true;
}

std::vector<std::string> Workspace::LocalBlobNames() const {
  std::vector<std::string> names;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    names.reserve(blobs_.size());
    for (const auto& [name, blob] : blobs_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> Workspace::BlobNames() const {
  std::vector<std::string> names = LocalBlobNames();
  if (parent_ != nullptr) {
    std::vector<std::string> inherited = parent_->BlobNames();
    std::vector<std::string> merged;
    merged.reserve(names.size() + inherited.size());
    std::set_union(names.begin(), names.end(), inherited.begin(),
                   inherited.end(), std::back_inserter(merged));
    names = std::move(merged);
  }
  return names;
}

absl::StatusOr<const Tensor*> Workspace::GetTensor(
    absl::string_view name) const {
  absl::StatusOr<Blob*> blob = FindBlob(name);
  if (!blob.ok()) return blob.status();
  if (!(*blob)->IsType<Tensor>()) {
    return absl::FailedPreconditionError(
        absl::StrCat("blob '", name, "' in workspace '", name_, "' holds ",
                     (*blob)->TypeName(), ", not a Tensor"));
  }
  return &(*blob)->Get<Tensor>();
}

Tensor* Workspace::SetTensor(absl::string_view name, Tensor value) {
  return CreateBlob(name)->Reset(std::make_unique<Tensor>(std::move(value)));
}

Collectives* Workspace::collectives() const {
  for (const Workspace* ws = this; ws != nullptr; ws = ws->parent_) {
    Collectives* c = ws->collectives_.load();
    if (c != nullptr) return c;
  }
  return nullptr;
}

}  // namespace jobgraph

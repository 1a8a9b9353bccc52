// A database's blob index (proto/jobgraph.proto BlobIndex) decoded for
// reading: the serialized bytes, kept, plus flat arrays of the offsets of
// each blob's name and keys and of its sizes and checksums. Loading 100,000
// small blobs with the index parsed into messages spent a quarter of its
// time building and freeing 100,000 CheckpointBlobInfo (some 360 bytes
// each); this form costs about 60 bytes per blob beyond the bytes and is
// built in one pass.
//
// Decode accepts exactly what BlobIndex::ParseFromString accepts, with the
// same result: the common encoding (what BlobIndexBuilder writes) is read
// directly, and anything else is parsed by protobuf, which decides, and read
// again from its canonical serialization.
//
// An index owns its bytes and is move-only; moving it keeps every view it
// returned valid. Thread-compatible (const methods may run concurrently).

#ifndef JOBGRAPH_CHECKPOINT_OPS_COMPACT_BLOB_INDEX_H_
#define JOBGRAPH_CHECKPOINT_OPS_COMPACT_BLOB_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

class CompactBlobIndex {
 public:
  // The empty index (no blobs, every field zero).
  CompactBlobIndex();
  CompactBlobIndex(CompactBlobIndex&&) = default;
  CompactBlobIndex& operator=(CompactBlobIndex&&) = default;
  CompactBlobIndex(const CompactBlobIndex&) = delete;
  CompactBlobIndex& operator=(const CompactBlobIndex&) = delete;

  // Decodes serialized BlobIndex `bytes`; nullopt exactly when protobuf
  // would not parse them, and for indexes over 2 GiB (whose offsets do not
  // fit; BlobIndexBuilder writes none).
  static std::optional<CompactBlobIndex> Decode(std::string bytes);

  int32_t format_version() const { return format_version_; }
  absl::string_view node() const { return View(node_); }
  int64_t epoch() const { return epoch_; }
  int64_t total_bytes() const { return total_bytes_; }
  int64_t referenced_bytes() const { return referenced_bytes_; }
  const std::vector<int64_t>& referenced_epochs() const {
    return referenced_epochs_;
  }
  int64_t created_unix_micros() const { return created_unix_micros_; }
  bool files_listed() const { return files_listed_; }

  int blob_size() const { return static_cast<int>(blobs_.size()) - 1; }
  absl::string_view name(int b) const { return View(Blob(b).name); }
  // How many keys, value sizes and value checksums the entry of blob `b`
  // lists (equal in a valid index; ValidateBlobIndex checks).
  int key_size(int b) const {
    return static_cast<int>(blobs_[b + 1].first_key - Blob(b).first_key);
  }
  int value_bytes_size(int b) const {
    return static_cast<int>(blobs_[b + 1].first_size - Blob(b).first_size);
  }
  int value_crc32c_size(int b) const {
    return static_cast<int>(blobs_[b + 1].first_crc - Blob(b).first_crc);
  }
  absl::string_view key(int b, int k) const {
    return View(keys_[Blob(b).first_key + k]);
  }
  int64_t value_bytes(int b, int k) const {
    return value_bytes_[Blob(b).first_size + k];
  }
  uint32_t value_crc32c(int b, int k) const {
    return crcs_[Blob(b).first_crc + k];
  }
  // Whether blob `b`'s values are held by another database (an incremental
  // save), and the epoch of that database.
  bool referenced(int b) const { return Blob(b).referenced; }
  int64_t stored_in_epoch(int b) const { return Blob(b).stored_in_epoch; }
  // The whole entry of blob `b` (with its type, dims and data type).
  CheckpointBlobInfo Entry(int b) const;
  // The index as a message.
  BlobIndex ToProto() const;

 private:
  // A range of bytes_: decoded indexes are under 2 GiB.
  struct Ref {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  // A blob's entry, name, and where its keys, sizes and checksums start in
  // the flat arrays; they end where the next blob's start (blobs_ ends with
  // one more such record for the last blob's ends).
  struct BlobRecord {
    Ref entry;
    Ref name;
    uint32_t first_key = 0;
    uint32_t first_size = 0;
    uint32_t first_crc = 0;
    bool referenced = false;
    int64_t stored_in_epoch = 0;
  };
  class Decoder;

  const BlobRecord& Blob(int b) const {
    DCHECK(b >= 0 && b < blob_size()) << "blob " << b;
    return blobs_[b];
  }
  absl::string_view View(Ref ref) const {
    return absl::string_view(bytes_->data() + ref.offset, ref.size);
  }

  // On the heap so that moving the index moves no bytes (and no view).
  std::unique_ptr<const std::string> bytes_;
  int32_t format_version_ = 0;
  Ref node_;
  int64_t epoch_ = 0;
  int64_t total_bytes_ = 0;
  int64_t created_unix_micros_ = 0;
  bool files_listed_ = false;
  int64_t referenced_bytes_ = 0;
  std::vector<int64_t> referenced_epochs_;
  std::vector<BlobRecord> blobs_;
  std::vector<Ref> keys_;
  std::vector<int64_t> value_bytes_;
  std::vector<uint32_t> crcs_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_OPS_COMPACT_BLOB_INDEX_H_

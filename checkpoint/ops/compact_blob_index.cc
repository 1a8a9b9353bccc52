#include "checkpoint/ops/compact_blob_index.h"

#include <climits>
#include <utility>

#include "engine/wire_format.h"

namespace jobgraph {
namespace {

using serialization_internal::FastWireReader;
using serialization_internal::IsProto3String;
using serialization_internal::kWireFixed32;
using serialization_internal::kWireLengthDelimited;
using serialization_internal::kWireVarint;

// Reads the varints of packed field payload `packed` into `out`.
bool PackedVarints(absl::string_view packed, std::vector<int64_t>* out) {
  FastWireReader in(packed);
  uint64_t v;
  while (!in.done()) {
    if (!in.Varint(&v)) return false;
    if (out != nullptr) out->push_back(static_cast<int64_t>(v));
  }
  return true;
}

}  // namespace

// Reads the common encoding of a BlobIndex into the index whose bytes_ hold
// it: the fields in their usual wire types with one-byte tags, no unknown
// field. False at anything else, with the index partly filled.
class CompactBlobIndex::Decoder {
 public:
  explicit Decoder(CompactBlobIndex* out)
      : out_(out), base_(out->bytes_->data()) {}

  bool Index() {
    FastWireReader in(*out_->bytes_);
    while (!in.done()) {
      int field, wire_type;
      if (!in.Tag(&field, &wire_type)) return false;
      uint64_t v;
      absl::string_view payload;
      if (wire_type == kWireVarint) {
        if (!in.Varint(&v)) return false;
        switch (field) {
          case BlobIndex::kFormatVersionFieldNumber:
            // An int32: protobuf keeps the low 32 bits.
            out_->format_version_ =
                static_cast<int32_t>(static_cast<uint32_t>(v));
            break;
          case BlobIndex::kEpochFieldNumber:
            out_->epoch_ = static_cast<int64_t>(v);
            break;
          case BlobIndex::kTotalBytesFieldNumber:
            out_->total_bytes_ = static_cast<int64_t>(v);
            break;
          case BlobIndex::kCreatedUnixMicrosFieldNumber:
            out_->created_unix_micros_ = static_cast<int64_t>(v);
            break;
          case BlobIndex::kFilesListedFieldNumber:
            out_->files_listed_ = v != 0;
            break;
          case BlobIndex::kReferencedBytesFieldNumber:
            out_->referenced_bytes_ = static_cast<int64_t>(v);
            break;
          case BlobIndex::kReferencedEpochFieldNumber:
            out_->referenced_epochs_.push_back(static_cast<int64_t>(v));
            break;
          default:
            return false;
        }
      } else if (wire_type == kWireLengthDelimited) {
        if (!in.Payload(&payload)) return false;
        if (field == BlobIndex::kNodeFieldNumber && IsProto3String(payload)) {
          out_->node_ = RefOf(payload);  // the last occurrence wins
        } else if (field == BlobIndex::kReferencedEpochFieldNumber) {
          if (!PackedVarints(payload, &out_->referenced_epochs_)) return false;
        } else if (field != BlobIndex::kBlobFieldNumber || !Entry(payload)) {
          return false;
        }
      } else {
        return false;
      }
    }
    out_->blobs_.push_back(Ends());
    return true;
  }

 private:
  Ref RefOf(absl::string_view bytes) const {
    return Ref{static_cast<uint32_t>(bytes.data() - base_),
               static_cast<uint32_t>(bytes.size())};
  }

  // A record whose arrays start where the last blob's end.
  BlobRecord Ends() const {
    BlobRecord record;
    record.first_key = static_cast<uint32_t>(out_->keys_.size());
    record.first_size = static_cast<uint32_t>(out_->value_bytes_.size());
    record.first_crc = static_cast<uint32_t>(out_->crcs_.size());
    return record;
  }

  // One CheckpointBlobInfo. Its type, dims and data type are checked as
  // protobuf would parse them, but only Entry() reads them.
  bool Entry(absl::string_view entry) {
    BlobRecord record = Ends();
    record.entry = RefOf(entry);
    FastWireReader in(entry);
    while (!in.done()) {
      int field, wire_type;
      if (!in.Tag(&field, &wire_type)) return false;
      uint64_t v;
      uint32_t crc;
      absl::string_view payload;
      const bool varint = wire_type == kWireVarint;
      const bool delimited = wire_type == kWireLengthDelimited;
      if (delimited && !in.Payload(&payload)) return false;
      if (varint && !in.Varint(&v)) return false;
      switch (field) {
        case CheckpointBlobInfo::kNameFieldNumber:
          if (!delimited || !IsProto3String(payload)) return false;
          record.name = RefOf(payload);  // the last occurrence wins
          break;
        case CheckpointBlobInfo::kTypeFieldNumber:
          if (!delimited || !IsProto3String(payload)) return false;
          break;
        case CheckpointBlobInfo::kDimsFieldNumber:
          if (!varint && !(delimited && PackedVarints(payload, nullptr))) {
            return false;
          }
          break;
        case CheckpointBlobInfo::kDataTypeFieldNumber:
          if (!varint) return false;
          break;
        case CheckpointBlobInfo::kKeyFieldNumber:
          if (!delimited || !IsProto3String(payload)) return false;
          out_->keys_.push_back(RefOf(payload));
          break;
        case CheckpointBlobInfo::kValueBytesFieldNumber:
          if (varint) {
            out_->value_bytes_.push_back(static_cast<int64_t>(v));
          } else if (!delimited ||
                     !PackedVarints(payload, &out_->value_bytes_)) {
            return false;
          }
          break;
        case CheckpointBlobInfo::kStoredInEpochFieldNumber:
          if (!varint) return false;
          record.referenced = true;  // the last occurrence wins
          record.stored_in_epoch = static_cast<int64_t>(v);
          break;
        case CheckpointBlobInfo::kValueCrc32CFieldNumber:
          if (wire_type == kWireFixed32) {
            if (!in.Fixed32(&crc)) return false;
            out_->crcs_.push_back(crc);
          } else if (delimited && payload.size() % 4 == 0) {
            for (FastWireReader packed(payload); !packed.done();) {
              packed.Fixed32(&crc);
              out_->crcs_.push_back(crc);
            }
          } else {
            return false;
          }
          break;
        default:
          return false;
      }
    }
    out_->blobs_.push_back(record);
    return true;
  }

  CompactBlobIndex* const out_;
  const char* const base_;
};

CompactBlobIndex::CompactBlobIndex()
    : bytes_(std::make_unique<const std::string>()), blobs_(1) {}

std::optional<CompactBlobIndex> CompactBlobIndex::Decode(std::string bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return std::nullopt;
  CompactBlobIndex index;
  index.bytes_ = std::make_unique<const std::string>(std::move(bytes));
  index.blobs_.clear();
  if (Decoder(&index).Index()) return index;
  // Not the common encoding: protobuf decides, and its canonical form (known
  // fields only, in the common encoding) is read instead.
  BlobIndex message;
  if (!message.ParseFromString(*index.bytes_)) return std::nullopt;
  message.DiscardUnknownFields();
  std::string bytes_again;
  // The canonical form can be longer (a negative int32 in 5 bytes takes 10)
  // and then be over protobuf's 2 GiB.
  if (!message.SerializeToString(&bytes_again) ||
      bytes_again.size() > static_cast<size_t>(INT_MAX)) {
    return std::nullopt;
  }
  CompactBlobIndex canonical;
  canonical.bytes_ =
      std::make_unique<const std::string>(std::move(bytes_again));
  canonical.blobs_.clear();
  CHECK(Decoder(&canonical).Index())
      << "protobuf's serialization of a blob index it parsed does not decode";
  return canonical;
}

CheckpointBlobInfo CompactBlobIndex::Entry(int b) const {
  CheckpointBlobInfo info;
  const absl::string_view entry = View(Blob(b).entry);
  // Decode checked that it parses.
  CHECK(info.ParseFromArray(entry.data(), static_cast<int>(entry.size())));
  return info;
}

BlobIndex CompactBlobIndex::ToProto() const {
  BlobIndex index;
  CHECK(index.ParseFromString(*bytes_));  // Decode checked that it parses
  return index;
}

}  // namespace jobgraph

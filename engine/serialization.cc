// The serializer registry, database keys and the serialization entry points.

#include "engine/serialization.h"

#include <algorithm>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "engine/tensor_serializer.h"
#include "engine/wire_format.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::type_index, const BlobSerializer*> by_type ABSL_GUARDED_BY(mu);
  std::map<std::string, const BlobSerializer*, std::less<>> by_name
      ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed
  return *registry;
}

absl::Status CheckOptions(absl::string_view name,
                          const SerializationOptions& options) {
  if (options.chunk_bytes <= 0 || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serializing blob '", name, "': chunk_bytes must be in [1, ",
        kMaxChunkBytes, "], got ", options.chunk_bytes));
  }
  return absl::OkStatus();
}

// Every value carries its blob's name in BlobProto.name, a proto3 string,
// which protobuf refuses to parse unless it is valid UTF-8: a blob of another
// name could be written but never read back.
bool IsValidUtf8(absl::string_view name) {
  return serialization_internal::IsProto3String(name);
}

absl::Status CheckName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "cannot serialize a blob with an empty name");
  }
  if (absl::StrContains(name, kChunkSeparator)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialize blob '", name, "': its name contains '",
                     kChunkSeparator,
                     "', which separates chunk indexes in "
                     "database keys"));
  }
  if (!IsValidUtf8(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialize blob '", absl::CHexEscape(name),
                     "': its name is not valid UTF-8"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterBlobSerializer(
    std::type_index type, std::unique_ptr<BlobSerializer> serializer) {
  CHECK(serializer != nullptr);
  Registry& registry = GetRegistry();
  const std::string name = serializer->type_name();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (registry.by_type.count(type) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("a blob serializer for C++ type ", Blob::TypeNameOf(type),
                     " is already registered"));
  }
  if (registry.by_name.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a blob serializer for type name '", name, "' is already registered"));
  }
  const BlobSerializer* raw = serializer.release();  // never destroyed
  registry.by_type.emplace(type, raw);
  registry.by_name.emplace(name, raw);
  return absl::OkStatus();
}

const BlobSerializer* FindBlobSerializer(std::type_index type) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.by_type.find(type);
  return it == registry.by_type.end() ? nullptr : it->second;
}

const BlobSerializer* FindBlobSerializer(absl::string_view type_name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.by_name.find(type_name);
  return it == registry.by_name.end() ? nullptr : it->second;
}

std::string TensorChunkKey(absl::string_view name, int64_t chunk) {
  return absl::StrCat(name, kChunkSeparator, chunk);
}

namespace {

// SerializeBlob never writes such a key (CheckName).
absl::Status NotUtf8KeyError(absl::string_view key) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed database key '", absl::CHexEscape(key),
                   "': the blob name is not valid UTF-8"));
}

}  // namespace

absl::StatusOr<BlobKey> ParseBlobKey(absl::string_view key) {
  JG_ASSIGN_OR_RETURN(BlobKeyView parsed, ParseBlobKeyView(key));
  return BlobKey{std::string(parsed.blob_name), parsed.chunk};
}

absl::StatusOr<BlobKeyView> ParseBlobKeyView(absl::string_view key) {
  const size_t pos = key.find(kChunkSeparator);
  if (pos == absl::string_view::npos) {
    if (key.empty()) return absl::InvalidArgumentError("empty database key");
    if (!IsValidUtf8(key)) return NotUtf8KeyError(key);
    return BlobKeyView{key, std::nullopt};
  }
  const absl::string_view name = key.substr(0, pos);
  const absl::string_view index = key.substr(pos + kChunkSeparator.size());
  int64_t chunk = 0;
  const bool canonical =
      !index.empty() && (index.size() == 1 || index[0] != '0') &&
      std::all_of(index.begin(), index.end(),
                  [](char c) { return absl::ascii_isdigit(c); }) &&
      absl::SimpleAtoi(index, &chunk);
  if (name.empty() || !canonical) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed database key '", key,
                     "': expected '<blob>' or '<blob>#%<chunk index>'"));
  }
  if (!IsValidUtf8(name)) return NotUtf8KeyError(key);
  return BlobKeyView{name, chunk};
}

absl::Status BlobSerializer::SerializeBorrowing(
    absl::string_view name, const Blob& blob,
    const SerializationOptions& options, const BorrowingBlobSink& sink) const {
  return Serialize(name, blob, options,
                   [&sink](std::string key, std::string value) {
                     return sink(std::move(key), std::move(value), {});
                   });
}

namespace {

// The checks both entry points make; the serializer of `blob` when they pass.
absl::StatusOr<const BlobSerializer*> CheckedSerializer(
    absl::string_view name, const Blob& blob,
    const SerializationOptions& options) {
  JG_RETURN_IF_ERROR(CheckName(name));
  JG_RETURN_IF_ERROR(CheckOptions(name, options));
  if (!blob.IsInitialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("blob '", name,
                     "' is uninitialized, so there is nothing to "
                     "serialize"));
  }
  const BlobSerializer* serializer = FindBlobSerializer(blob.type());
  if (serializer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", name, "' holds ", blob.TypeName(),
        ", which has no registered serializer; only blobs of types with a "
        "serializer (JG_REGISTER_BLOB_SERIALIZER) can be checkpointed"));
  }
  return serializer;
}

}  // namespace

absl::Status SerializeBlob(absl::string_view name, const Blob& blob,
                           const SerializationOptions& options,
                           const BlobSink& sink) {
  JG_ASSIGN_OR_RETURN(const BlobSerializer* serializer,
                      CheckedSerializer(name, blob, options));
  return serializer->Serialize(name, blob, options, sink);
}

absl::Status SerializeBlobBorrowing(absl::string_view name, const Blob& blob,
                                    const SerializationOptions& options,
                                    const BorrowingBlobSink& sink) {
  JG_ASSIGN_OR_RETURN(const BlobSerializer* serializer,
                      CheckedSerializer(name, blob, options));
  return serializer->SerializeBorrowing(name, blob, options, sink);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SerializeBlobToPairs(absl::string_view name, const Blob& blob,
                     const SerializationOptions& options) {
  std::vector<std::pair<std::string, std::string>> pairs;
  JG_RETURN_IF_ERROR(SerializeBlob(
      name, blob, options, [&pairs](std::string key, std::string value) {
        pairs.emplace_back(std::move(key), std::move(value));
        return absl::OkStatus();
      }));
  return pairs;
}

absl::Status SerializeTensor(absl::string_view name, const Tensor& tensor,
                             const SerializationOptions& options,
                             const BlobSink& sink) {
  JG_RETURN_IF_ERROR(CheckName(name));
  JG_RETURN_IF_ERROR(CheckOptions(name, options));
  return serialization_internal::WriteTensorChunks(name, tensor, options, sink);
}

}  // namespace jobgraph

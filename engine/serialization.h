// Blob serialization: turns workspace blobs into (key, value) pairs for a
// checkpoint database and assembles them back.
//
// Every value is one serialized BlobProto (proto/jobgraph.proto). Tensors are
// split into chunks of bounded bytes, each a complete BlobProto with the full
// dims and data_type, a `segment` {begin, end} and only that slice of the
// elements, stored under the key "<name>#%<k>" (k = 0, 1, ...; even a
// single-chunk tensor is "x#%0"). Fixed-width elements go into
// TensorProto.raw_data (little-endian), strings into string_data. Other blob
// types are stored under the bare blob name, one value each.
//
// Which types can be serialized is decided by a registry of BlobSerializers,
// keyed both by C++ type (to write) and by BlobProto.type (to read), which is
// the type's registered blob type name. Built-in:
//   Tensor       kTensorTypeName  (blob.h)          chunked, as above
//   std::string  kStringTypeName  (blob.h)          bytes in `content`
//   Counter      kCounterTypeName (counter_type.h)  `tensor`: dims [1], INT64
//
// Copies (the checkpoint hot path). Saving a fixed-width tensor chunk copies
// its element bytes exactly once: a small header BlobProto (name, type, dims,
// data_type, segment) is encoded by hand, byte for byte as protobuf would
// serialize it (no message is built), then a second occurrence of
// the length-delimited field `tensor` (3) holding only `raw_data` (12) is
// appended by hand, followed by one memcpy of the elements into the value
// string; SerializeBlobBorrowing (what Save uses) skips even that copy: it
// hands over the header and a view of the elements, which the database
// writes from the tensor itself. Protobuf parsers merge repeated occurrences
// of a message field, so the value is an ordinary BlobProto. Loading scans
// the value with a
// CodedInputStream, keeps `raw_data` as a view into the value (no copy) and
// parses only the small remaining fields; the elements are then copied once,
// straight into the target tensor. Strings are likewise encoded and decoded
// by hand, with one copy of their bytes each way.
//
// The pieces, each in a file of its own: the chunk layout (chunking.h), the
// hand-written wire format (wire_format.h), writing tensors
// (tensor_serializer.h), reading them (tensor_reader.h), the std::string and
// Counter serializers (single_value_serializers.cc), BlobAssembler
// (blob_assembler.cc) and the registry and entry points (serialization.cc).
//
// Thread-safety: the registry may be used from any thread. SerializeBlob only
// reads the blob (callers must keep writers away while it runs) and may run
// concurrently for different blobs. A BlobAssembler is not thread-safe.
//
// Example (save):
//   JG_RETURN_IF_ERROR(SerializeBlob("w", *blob, {},
//       [&](std::string key, std::string value) {
//         return db->Put(key, value);
//       }));
// Example (load):
//   BlobAssembler assembler;
//   for (each key, value in the db) {
//     JG_ASSIGN_OR_RETURN(BlobKey k, ParseBlobKey(key));
//     JG_RETURN_IF_ERROR(assembler.Add(k.blob_name, value, target_blob));
//   }
//   JG_RETURN_IF_ERROR(assembler.Finish());

#ifndef JOBGRAPH_ENGINE_SERIALIZATION_H_
#define JOBGRAPH_ENGINE_SERIALIZATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/blob.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

namespace serialization_internal {
struct ScannedBlobProto;
}  // namespace serialization_internal

// The upper bound of SerializationOptions::chunk_bytes, and of any single
// value (one string element or a std::string blob), far below protobuf's
// 2 GiB message limit.
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

// Separates a blob name from the chunk index in a tensor chunk's key.
inline constexpr absl::string_view kChunkSeparator = "#%";

struct SerializationOptions {
  // Most bytes of element data in one tensor chunk; must be in
  // (0, kMaxChunkBytes]. Fixed-width tensors get floor(chunk_bytes / element
  // size) elements per chunk, at least one. String tensors count each
  // element's bytes plus its 2 to 6 bytes of wire framing, and put at least
  // one element in every chunk.
  int64_t chunk_bytes = int64_t{64} << 20;
};

// Receives one (key, value) pair; called once per chunk, in chunk order. An
// error stops serialization and is returned as is.
using BlobSink =
    std::function<absl::Status(std::string key, std::string value)>;

// Receives one value as two pieces: the value is `head` followed by `body`.
// `body` is borrowed from the blob being serialized (a fixed-width tensor
// chunk's element bytes, in the tensor's own memory): it stays valid while
// the blob is alive and unchanged, so a sink may keep it past the call, e.g.
// to write it to disk from that memory later. Otherwise as BlobSink.
using BorrowingBlobSink = std::function<absl::Status(
    std::string key, std::string head, absl::string_view body)>;

// Writes blob `name` through `sink`. Errors: InvalidArgument for bad options
// or a name that is empty, contains kChunkSeparator or is not valid UTF-8
// (BlobProto.name is a proto3 string, which protobuf will not parse
// otherwise); FailedPrecondition when the blob is uninitialized or its type
// has no registered serializer. Every message names the blob.
absl::Status SerializeBlob(absl::string_view name, const Blob& blob,
                           const SerializationOptions& options,
                           const BlobSink& sink);

// SerializeBlob for a sink that writes element bytes from the blob's own
// memory rather than from a copy: a fixed-width tensor chunk arrives as its
// header (`head`) and a view of its elements (`body`); every other value
// arrives whole in `head`, with an empty body. The values are byte for byte
// those of SerializeBlob. Same errors.
absl::Status SerializeBlobBorrowing(absl::string_view name, const Blob& blob,
                                    const SerializationOptions& options,
                                    const BorrowingBlobSink& sink);

// SerializeBlob, collecting all pairs in memory (for small blobs and tests).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SerializeBlobToPairs(absl::string_view name, const Blob& blob,
                     const SerializationOptions& options = {});

// Serializes a tensor not held in a blob (e.g. a snapshot) as blob `name`.
absl::Status SerializeTensor(absl::string_view name, const Tensor& tensor,
                             const SerializationOptions& options,
                             const BlobSink& sink);

// The key of chunk `chunk` of tensor blob `name`: "<name>#%<chunk>".
std::string TensorChunkKey(absl::string_view name, int64_t chunk);

// A database key split into blob name and, for tensor chunks, chunk index.
struct BlobKey {
  std::string blob_name;
  std::optional<int64_t> chunk;  // absent for a bare blob name
};

// "x#%3" -> {"x", 3}; "x" -> {"x", nullopt}. The name ends at the first
// kChunkSeparator, which must be followed by a decimal index without sign or
// leading zeros, and must be valid UTF-8 (as SerializeBlob requires);
// anything else is InvalidArgument.
absl::StatusOr<BlobKey> ParseBlobKey(absl::string_view key);
// ParseBlobKey without a copy of the name: a view into `key`.
struct BlobKeyView {
  absl::string_view blob_name;
  std::optional<int64_t> chunk;
};
absl::StatusOr<BlobKeyView> ParseBlobKeyView(absl::string_view key);

// Writes and reads blobs of one C++ type. Implementations must be
// thread-safe (they are shared by all threads); typically they are stateless.
class BlobSerializer {
 public:
  virtual ~BlobSerializer() = default;

  // The BlobProto.type this serializer writes and reads.
  virtual std::string type_name() const = 0;

  // Serializes `blob`, which holds this serializer's C++ type. `name` is
  // valid and `options` checked. Calls `sink` once per piece, in order.
  virtual absl::Status Serialize(absl::string_view name, const Blob& blob,
                                 const SerializationOptions& options,
                                 const BlobSink& sink) const = 0;
  // Serialize for SerializeBlobBorrowing. The default passes each value
  // whole as the head, with an empty body; a serializer that can lend parts
  // of the blob's memory overrides it.
  virtual absl::Status SerializeBorrowing(absl::string_view name,
                                          const Blob& blob,
                                          const SerializationOptions& options,
                                          const BorrowingBlobSink& sink) const;

  // Sets `target` (reset by the caller) from one complete BlobProto of
  // type_name(). Errors should name proto.name().
  virtual absl::Status Deserialize(const BlobProto& proto,
                                   Blob* target) const = 0;
};

// Registers `serializer` for C++ type `type` and for its type_name().
// AlreadyExists when either is taken (nothing is registered then).
absl::Status RegisterBlobSerializer(std::type_index type,
                                    std::unique_ptr<BlobSerializer> serializer);

// The serializer for a C++ type or a BlobProto.type; null if none. The
// pointer stays valid for the life of the process.
const BlobSerializer* FindBlobSerializer(std::type_index type);
const BlobSerializer* FindBlobSerializer(absl::string_view type_name);

// Registers SerializerClass (default-constructible) for C++ type T at static
// initialization; a duplicate registration is a fatal error at start-up.
#define JG_REGISTER_BLOB_SERIALIZER(T, SerializerClass) \
  JG_REGISTER_BLOB_SERIALIZER_IMPL_(T, SerializerClass, __COUNTER__)
#define JG_REGISTER_BLOB_SERIALIZER_IMPL_(T, SerializerClass, N) \
  JG_REGISTER_BLOB_SERIALIZER_IMPL2_(T, SerializerClass, N)
#define JG_REGISTER_BLOB_SERIALIZER_IMPL2_(T, SerializerClass, N)         \
  static const bool jg_blob_serializer_registered_##N = [] {              \
    absl::Status status = ::jobgraph::RegisterBlobSerializer(             \
        std::type_index(typeid(T)), std::make_unique<SerializerClass>()); \
    CHECK(status.ok()) << status;                                         \
    return true;                                                          \
  }()

// Assembles blobs from database values that arrive in any order, possibly
// interleaved across blobs, and tracks which blobs are complete (Caffe2's
// Load rules):
//  - The first piece of a blob resets its target, then deserializes into it.
//  - Tensor pieces carry a segment; their sizes accumulate up to
//    numel(dims). A piece whose dims or data_type differ from the first, a
//    segment out of range or overlapping an earlier one, an empty segment of
//    a non-empty tensor, a piece after the blob is complete, or a piece
//    without a segment that is not the first: DataLoss.
//  - A non-tensor blob is complete after its one piece; a second: DataLoss.
// Errors name the blob. Not thread-safe.
class BlobAssembler {
 public:
  BlobAssembler();
  BlobAssembler(const BlobAssembler&) = delete;
  BlobAssembler& operator=(const BlobAssembler&) = delete;
  ~BlobAssembler();

  // Deserializes one value (a serialized BlobProto) of blob `name` into
  // `target`. `name` is the name pieces are tracked and reported under (the
  // key's blob name, after any renaming). Every piece of one name must go to
  // the same target, which must outlive the assembler. `value` is not
  // retained. `blob_bytes`, when the caller knows it (else -1), is the size of
  // all the values of this blob together: a first piece whose shape
  // declares more elements than that many bytes can hold (1 byte per
  // fixed-width element, 2 per string) is DataLoss before the tensor is
  // allocated, so a damaged shape cannot make a load allocate more than a
  // small multiple of the bytes it read.
  absl::Status Add(absl::string_view name, absl::string_view value,
                   Blob* target, int64_t blob_bytes = -1);
  // Add for a blob that the caller knows has this one value and no other (a
  // blob index lists one key for it): the value must hold the whole blob
  // (else DataLoss, "blob 'x' is incomplete: ..."), and nothing is kept of
  // it by name, so IsComplete, IsStarted and CompleteBlobs do not list it;
  // num_complete() counts it. A load of 100,000 small blobs keeps no state
  // for each.
  absl::Status AddWhole(absl::string_view name, absl::string_view value,
                        Blob* target, int64_t blob_bytes = -1);

  // True once blob `name` has received all its pieces.
  bool IsComplete(absl::string_view name) const;
  // True once blob `name` has received at least one piece.
  bool IsStarted(absl::string_view name) const;
  // Names of the complete blobs, sorted.
  std::vector<std::string> CompleteBlobs() const;
  int num_complete() const { return num_complete_; }
  int num_started() const { return static_cast<int>(blobs_.size()); }
  // Makes room for `blobs` blobs in all, so that a load of many does not
  // rehash as it goes.
  void Reserve(int blobs) { blobs_.reserve(blobs); }

  // OK iff every started blob is complete; otherwise DataLoss naming the
  // first incomplete one: "blob 'x' is incomplete: got N of M elements".
  absl::Status Finish() const;

 private:
  struct State {
    Blob* target = nullptr;
    bool is_tensor = false;
    bool complete = false;
    // Tensors: the first piece's dims (kept only when it was not the whole
    // tensor) and type, the segments received (begin -> end) and their total
    // size.
    std::vector<int64_t> dims;
    DataType data_type = UNDEFINED;
    // Without the piece that completed the tensor, which needs no overlap
    // checks after it: a tensor in one piece allocates nothing here.
    std::map<int64_t, int64_t> segments;
    int64_t received = 0;
    int64_t numel = 0;
  };

  // Scans `value` into scratch_; DataLoss naming `name` if it is no BlobProto.
  absl::Status Scan(absl::string_view name, absl::string_view value);
  // Adds the piece in scratch_ to `state`'s blob.
  absl::Status AddPiece(absl::string_view name, bool first, int64_t blob_bytes,
                        State* state);
  static absl::Status IncompleteError(absl::string_view name,
                                      const State& state);
  absl::Status AddTensorPiece(
      absl::string_view name,
      const serialization_internal::ScannedBlobProto& piece, bool first,
      int64_t blob_bytes, State* state);

  // Hashed: a load of 100,000 small blobs looks each up several times.
  absl::flat_hash_map<std::string, State> blobs_;
  int num_complete_ = 0;
  // Re-used by every Add, so that parsing a piece's header allocates only
  // when it needs more room than an earlier one.
  std::unique_ptr<serialization_internal::ScannedBlobProto> scratch_;
};

// Deserializes a blob stored in a single value (a non-tensor blob, or a
// tensor in one chunk) into `target`. DataLoss if the value is only part of
// a tensor.
absl::Status DeserializeBlob(absl::string_view name, absl::string_view value,
                             Blob* target);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_SERIALIZATION_H_

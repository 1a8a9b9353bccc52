// Tensor: a dense, row-major array of one element type with a shape.
//
// Element types are bool, uint8, int32, int64, float, double and string
// (jobgraph::DataType from jobgraph.proto). A scalar has shape [] and one
// element. A Tensor owns its elements; copying a Tensor copies them. Moving is
// cheap. A Tensor is not thread-safe: concurrent readers are fine, a writer
// needs exclusive access (a call of a mutable accessor is a write: it sets
// the generation, below).
//
// Every tensor carries a write generation, generation(), so that an
// incremental checkpoint can tell without hashing whether a tensor may have
// changed since it last looked: two tensors, or one tensor at two moments,
// with the same generation hold the same dtype, shape and elements, bit for
// bit. Different generations promise nothing (the contents may be equal).
// New storage and every mutable access take a fresh generation, unique in
// the process and never 0; const access never changes it; copies, moves and
// ShareStorage() snapshots keep it, since they hold the same contents.
// A mutable access takes the generation when it hands out the pointer, so
// writes through that pointer belong to it. Hence the rule: after the tensor
// is shared (ShareStorage, already the rule for copy-on-write), copied, or
// its generation read, a writer must call a mutable accessor again rather
// than write through a pointer obtained earlier, which would change the
// elements behind a generation that someone has seen.
//
// Example:
//   Tensor t = Tensor::FromVector<int64_t>({1, 2, 3});
//   t.mutable_data<int64_t>()[0] = 7;

#ifndef JOBGRAPH_ENGINE_TENSOR_H_
#define JOBGRAPH_ENGINE_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/types/span.h"
#include "engine/shared_storage.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// DataTypeOf<T>::value is the DataType of C++ element type T.
template <typename T>
struct DataTypeOf;
#define JG_DATA_TYPE_OF(T, V)            \
  template <>                            \
  struct DataTypeOf<T> {                 \
    static constexpr DataType value = V; \
  }
JG_DATA_TYPE_OF(bool, BOOL);
JG_DATA_TYPE_OF(uint8_t, UINT8);
JG_DATA_TYPE_OF(int32_t, INT32);
JG_DATA_TYPE_OF(int64_t, INT64);
JG_DATA_TYPE_OF(float, FLOAT);
JG_DATA_TYPE_OF(double, DOUBLE);
JG_DATA_TYPE_OF(std::string, STRING);
#undef JG_DATA_TYPE_OF

// True for the element types a Tensor can hold.
bool IsSupportedDataType(DataType dtype);

// Bytes per element of a fixed-width type; 0 for STRING and unsupported types.
size_t DataTypeSize(DataType dtype);

// "int64", "float", ... as used in messages and by `ckpt show`.
std::string DataTypeName(DataType dtype);

// Calls f(T{}) with T the C++ element type of `dtype` (a supported type).
template <typename F>
decltype(auto) DispatchDataType(DataType dtype, F&& f) {
  switch (dtype) {
    case BOOL:
      return f(bool{});
    case UINT8:
      return f(uint8_t{});
    case INT32:
      return f(int32_t{});
    case INT64:
      return f(int64_t{});
    case FLOAT:
      return f(float{});
    case DOUBLE:
      return f(double{});
    case STRING:
      return f(std::string{});
    default:
      LOG(FATAL) << "unsupported tensor data type " << dtype;
  }
}

namespace tensor_internal {

// Fresh generations come in blocks of this many values: each thread takes a
// block from one process-wide counter and hands its values out on its own,
// so that writers on different threads never contend.
inline constexpr uint64_t kGenerationBlock = uint64_t{1} << 20;

// The current thread's block: values [next, end) are still free.
struct GenerationBlock {
  uint64_t next = 0;
  uint64_t end = 0;
};
inline thread_local GenerationBlock generation_block;

// Gives this thread a new block and returns its first value.
uint64_t RefillGenerationBlock();

// A generation no tensor has held before; never 0.
inline uint64_t NextGeneration() {
  GenerationBlock& block = generation_block;
  if (ABSL_PREDICT_FALSE(block.next == block.end)) {
    return RefillGenerationBlock();
  }
  return block.next++;
}

}  // namespace tensor_internal

// Element storage of at least this many bytes is mapped from the system
// directly (and unmapped when freed) rather than taken from the heap.
inline constexpr size_t kMappedStorageBytes = size_t{1} << 20;

class Tensor {
 public:
  // An empty float tensor of shape [0].
  Tensor();
  // A tensor of `shape` whose elements are zero (or empty strings).
  Tensor(DataType dtype, std::vector<int64_t> shape);

  // Like the constructor, but fixed-width elements are left uninitialized;
  // for callers that overwrite every element (deserialization).
  static Tensor Uninitialized(DataType dtype, std::vector<int64_t> shape);

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DataTypeOf<T>::value, {});
    t.mutable_data<T>()[0] = std::move(value);
    return t;
  }
  // A tensor holding `values`; shape defaults to [values.size()].
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values,
                           std::vector<int64_t> shape = {-1});
  // The 1-D tensor [0, 1, ..., n-1].
  template <typename T>
  static Tensor Iota(int64_t n);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t numel() const { return numel_; }
  // Bytes of element storage (fixed-width types; 0 for strings).
  size_t nbytes() const { return numel_ * DataTypeSize(dtype_); }
  // An estimate of memory held, strings included.
  size_t MemoryBytes() const;

  // Typed element access. The type must match dtype() (checked).
  template <typename T>
  const T* data() const {
    CheckType(DataTypeOf<T>::value);
    if constexpr (std::is_same_v<T, std::string>) {
      return strings_ != nullptr ? strings_->data() : nullptr;
    } else {
      return reinterpret_cast<const T*>(bytes());
    }
  }
  // Writable elements. When a snapshot shares the storage (ShareStorage), the
  // elements are copied first, so the snapshot never sees the write. Get the
  // pointer again after any snapshot: an older one may point at the shared
  // copy. Takes a fresh generation.
  template <typename T>
  T* mutable_data() {
    CheckType(DataTypeOf<T>::value);
    if (ABSL_PREDICT_FALSE(StorageShared())) Unshare();
    generation_ = tensor_internal::NextGeneration();
    if constexpr (std::is_same_v<T, std::string>) {
      return strings_ != nullptr ? strings_->data() : nullptr;
    } else {
      return reinterpret_cast<T*>(bytes());
    }
  }
  template <typename T>
  absl::Span<const T> values() const {
    return absl::Span<const T>(data<T>(), numel_);
  }
  // Raw storage of a fixed-width tensor (nbytes() bytes); the writable one
  // follows mutable_data()'s copy-on-write rule and takes a fresh generation.
  const void* raw_data() const;
  void* raw_mutable_data();

  // A tensor equal to this one that shares its element storage, copy on
  // write: whichever of the two is written next (mutable_data,
  // raw_mutable_data) first gets its own copy, so each keeps seeing its own
  // values. O(1) whatever the size: how an asynchronous checkpoint takes its
  // snapshot. Sharing is safe across threads as long as each Tensor object
  // is used by one thread at a time. The snapshot has this tensor's
  // generation; the side written next takes a fresh one.
  Tensor ShareStorage() const;
  // Whether another tensor shares this one's element storage now.
  bool StorageShared() const {
    return dtype_ == STRING ? strings_.IsShared() : bytes_.IsShared();
  }

  // The first element converted to T; the tensor must hold one element.
  template <typename T>
  T scalar() const {
    CHECK_EQ(numel_, 1) << "scalar() of a tensor with " << numel_
                        << " elements";
    return data<T>()[0];
  }

  // Reallocates to a new type and shape; elements become zero. Takes a
  // fresh generation.
  void Reset(DataType dtype, std::vector<int64_t> shape);

  // The write generation (see the class comment); never 0. What each
  // non-const member does to it:
  //   mutable_data<T>() for every T, raw_mutable_data(), Reset(): takes a
  //     fresh one;
  //   constructors and the factories (Uninitialized, Scalar, FromVector,
  //     Iota): start with a fresh one;
  //   copy and move construction and assignment: take the source's, with
  //     its contents; a moved-from tensor, emptied, takes a fresh one.
  // ShareStorage() gives the snapshot this tensor's. No other member changes
  // dtype, shape or elements.
  uint64_t generation() const { return generation_; }

  // Same dtype, shape and elements, bit for bit (NaNs with equal bits are
  // equal; 0.0 and -0.0 are not).
  bool BitwiseEquals(const Tensor& other) const;

  // "int64[3] {1, 2, 3}", listing at most `max_elements` elements.
  std::string DebugString(int64_t max_elements = 16) const;

 private:
  void CheckType(DataType expected) const {
    CHECK_EQ(dtype_, expected) << "tensor of type " << DataTypeName(dtype_)
                               << " accessed as " << DataTypeName(expected);
  }
  // New storage for dtype_ and shape_, with a fresh generation.
  void Allocate(bool zero);
  // Gives this tensor its own copy of shared storage.
  void Unshare();
  uint8_t* bytes() const { return bytes_ != nullptr ? bytes_->data : nullptr; }

  // Element bytes of a fixed-width tensor: from the heap, or mapped from the
  // system when large (see kMappedStorageBytes).
  struct ByteBuffer {
    ByteBuffer(size_t size, bool zero);
    ByteBuffer(const ByteBuffer&) = delete;
    ByteBuffer& operator=(const ByteBuffer&) = delete;
    ~ByteBuffer();
    uint8_t* data = nullptr;
    size_t size = 0;
    bool mapped = false;
  };

  DataType dtype_ = FLOAT;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  // Shared only between a tensor and its ShareStorage() copies, never
  // written while shared.
  SharedStorage<ByteBuffer> bytes_;                  // fixed-width types
  SharedStorage<std::vector<std::string>> strings_;  // STRING
  // Set by every constructor; see generation().
  uint64_t generation_ = 0;
};

// Number of elements of `shape`; 1 for [].
int64_t NumElements(absl::Span<const int64_t> shape);

// "[2,3]" ("[]" for a scalar), as messages and DebugString() show shapes.
std::string ShapeString(absl::Span<const int64_t> shape);

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values,
                          std::vector<int64_t> shape) {
  if (shape.size() == 1 && shape[0] == -1) {
    shape[0] = static_cast<int64_t>(values.size());
  }
  CHECK_EQ(NumElements(shape), static_cast<int64_t>(values.size()))
      << "FromVector: shape does not match the number of values";
  Tensor t = Uninitialized(DataTypeOf<T>::value, std::move(shape));
  T* out = t.mutable_data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template <typename T>
Tensor Tensor::Iota(int64_t n) {
  Tensor t = Uninitialized(DataTypeOf<T>::value, {n});
  T* out = t.mutable_data<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(i);
  return t;
}

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_TENSOR_H_

#include "engine/tensor.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/storage_pool.h"

namespace jobgraph {

namespace tensor_internal {
namespace {

// The first value of the next block to hand out. It starts one block in, so
// that 0 is never a generation. It does not wrap: there are 2^44 blocks,
// far more than the threads a process starts (a thread's unused values die
// with it) times the blocks each uses.
std::atomic<uint64_t> next_generation_block{kGenerationBlock};

}  // namespace

uint64_t RefillGenerationBlock() {
  // Only uniqueness matters, not order with other memory: relaxed.
  const uint64_t first = next_generation_block.fetch_add(
      kGenerationBlock, std::memory_order_relaxed);
  generation_block.next = first + 1;
  generation_block.end = first + kGenerationBlock;
  return first;
}

}  // namespace tensor_internal

bool IsSupportedDataType(DataType dtype) {
  switch (dtype) {
    case BOOL:
    case UINT8:
    case INT32:
    case INT64:
    case FLOAT:
    case DOUBLE:
    case STRING:
      return true;
    default:
      return false;
  }
}

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case BOOL:
    case UINT8:
      return 1;
    case INT32:
    case FLOAT:
      return 4;
    case INT64:
    case DOUBLE:
      return 8;
    default:
      return 0;
  }
}

std::string DataTypeName(DataType dtype) {
  switch (dtype) {
    case BOOL:
      return "bool";
    case UINT8:
      return "uint8";
    case INT32:
      return "int32";
    case INT64:
      return "int64";
    case FLOAT:
      return "float";
    case DOUBLE:
      return "double";
    case STRING:
      return "string";
    default:
      return absl::StrCat("DataType(", static_cast<int>(dtype), ")");
  }
}

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    CHECK_GE(d, 0) << "negative dimension in shape";
    n *= d;
  }
  return n;
}

Tensor::Tensor()
    : shape_({0}), generation_(tensor_internal::NextGeneration()) {}

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  Allocate(/*zero=*/true);
}

Tensor Tensor::Uninitialized(DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.Allocate(/*zero=*/false);
  return t;
}

void Tensor::Allocate(bool zero) {
  CHECK(IsSupportedDataType(dtype_))
      << "unsupported tensor data type " << DataTypeName(dtype_);
  numel_ = NumElements(shape_);
  generation_ = tensor_internal::NextGeneration();
  bytes_.reset();
  strings_.reset();
  if (dtype_ == STRING) {
    strings_ = SharedStorage<std::vector<std::string>>::Make(numel_);
    return;
  }
  const size_t n = nbytes();
  if (n == 0) return;
  bytes_ = SharedStorage<ByteBuffer>::Make(n, zero);
}

Tensor::ByteBuffer::ByteBuffer(size_t n, bool zero) : size(n) {
  if (n >= kMappedStorageBytes) {
    // Mapped directly, through the pool of buffers the process already
    // touched (storage_pool.h), and given back to it when freed. From
    // glibc's heap, freed storage of this size would stay in the process
    // with no bound, and glibc would raise its mmap threshold so that the
    // next ones come from the heap too: a copy-on-write copy made during an
    // asynchronous save would then outlive the save in the process's RSS.
    if (void* pages = StoragePool::Global().Take(n, zero); pages != nullptr) {
      data = static_cast<uint8_t*>(pages);
      mapped = true;
      return;
    }
  }
  data = new uint8_t[n];
  if (zero) std::memset(data, 0, n);
}

Tensor::ByteBuffer::~ByteBuffer() {
  if (mapped) {
    StoragePool::Global().Give(data, size);
  } else {
    delete[] data;
  }
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      numel_(other.numel_),
      generation_(other.generation_) {
  if (other.strings_ != nullptr) {
    strings_ = SharedStorage<std::vector<std::string>>::Make(*other.strings_);
  }
  const size_t n = nbytes();
  if (other.bytes_ != nullptr && n > 0) {
    bytes_ = SharedStorage<ByteBuffer>::Make(n, /*zero=*/false);
    std::memcpy(bytes(), other.bytes(), n);
  }
}

Tensor Tensor::ShareStorage() const {
  Tensor shared;
  shared.dtype_ = dtype_;
  shared.shape_ = shape_;
  shared.numel_ = numel_;
  shared.bytes_ = bytes_;
  shared.strings_ = strings_;
  shared.generation_ = generation_;
  return shared;
}

void Tensor::Unshare() {
  // A plain copy: the other holders keep the old storage untouched. The
  // mutable accessor that calls this takes the new generation.
  Tensor own(*this);
  bytes_ = std::move(own.bytes_);
  strings_ = std::move(own.strings_);
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      numel_(other.numel_),
      bytes_(std::move(other.bytes_)),
      strings_(std::move(other.strings_)),
      generation_(other.generation_) {
  other.shape_ = {0};
  other.numel_ = 0;
  // Emptied, it no longer holds what the generation stands for.
  other.generation_ = tensor_internal::NextGeneration();
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    numel_ = other.numel_;
    bytes_ = std::move(other.bytes_);
    strings_ = std::move(other.strings_);
    generation_ = other.generation_;
    other.shape_ = {0};
    other.numel_ = 0;
    other.generation_ = tensor_internal::NextGeneration();
  }
  return *this;
}

size_t Tensor::MemoryBytes() const {
  size_t n = nbytes();
  if (strings_ != nullptr) {
    for (const std::string& s : *strings_) n += s.size();
  }
  return n;
}

const void* Tensor::raw_data() const {
  CHECK_NE(dtype_, STRING) << "raw_data() of a string tensor";
  return bytes();
}

void* Tensor::raw_mutable_data() {
  CHECK_NE(dtype_, STRING) << "raw_mutable_data() of a string tensor";
  if (ABSL_PREDICT_FALSE(StorageShared())) Unshare();
  generation_ = tensor_internal::NextGeneration();
  return bytes();
}

void Tensor::Reset(DataType dtype, std::vector<int64_t> shape) {
  dtype_ = dtype;
  shape_ = std::move(shape);
  Allocate(/*zero=*/true);
}

bool Tensor::BitwiseEquals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (dtype_ == STRING) {
    if (strings_ == nullptr || other.strings_ == nullptr) {
      return numel_ == 0 && other.numel_ == 0;
    }
    return *strings_ == *other.strings_;
  }
  const size_t n = nbytes();
  return n == 0 || std::memcmp(bytes(), other.bytes(), n) == 0;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string Tensor::DebugString(int64_t max_elements) const {
  std::string out =
      absl::StrCat(DataTypeName(dtype_), ShapeString(shape_), " {");
  const int64_t shown = std::min(numel_, max_elements);
  DispatchDataType(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* v = data<T>();
    for (int64_t i = 0; i < shown; ++i) {
      if (i > 0) out += ", ";
      if constexpr (std::is_same_v<T, std::string>) {
        absl::StrAppend(&out, "\"", v[i], "\"");
      } else if constexpr (std::is_same_v<T, bool>) {
        out += v[i] ? "true" : "false";
      } else if constexpr (std::is_same_v<T, uint8_t>) {
        absl::StrAppend(&out, static_cast<int>(v[i]));
      } else {
        absl::StrAppend(&out, v[i]);
      }
    }
  });
  if (shown < numel_) absl::StrAppend(&out, ", ... (", numel_, " in all)");
  out += "}";
  return out;
}

}  // namespace jobgraph

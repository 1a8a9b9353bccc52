// Blob: a named slot in a Workspace that holds one value of any C++ type, or
// nothing ("uninitialized").
//
// Values are usually Tensors; other types (counters, reader cursors, timers)
// are stored the same way. A type that should appear in messages and
// checkpoints under a stable name registers it with JG_REGISTER_BLOB_TYPE; a
// type that can be checkpointed also registers a serializer
// (engine/serialization.h).
//
// A Blob owns its value. It is not thread-safe: the Workspace makes lookups
// safe, but two ops that write the same blob concurrently must synchronise
// through the value itself (Counter and cursors do).

#ifndef JOBGRAPH_ENGINE_BLOB_H_
#define JOBGRAPH_ENGINE_BLOB_H_

#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>

#include "glog/logging.h"

namespace jobgraph {

class Blob {
 public:
  Blob() = default;
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  bool IsInitialized() const { return value_ != nullptr; }

  template <typename T>
  bool IsType() const {
    return value_ != nullptr && type_ == std::type_index(typeid(T));
  }

  // The value; the blob must hold a T (checked).
  template <typename T>
  const T& Get() const {
    CHECK(IsType<T>()) << "blob holds " << TypeName() << ", not "
                       << TypeNameOf(typeid(T));
    return *static_cast<const T*>(value_.get());
  }

  // The value, after replacing whatever the blob held by a default-constructed
  // T when it did not hold a T.
  template <typename T>
  T* GetMutable() {
    if (!IsType<T>()) return Reset(std::make_unique<T>());
    return static_cast<T*>(value_.get());
  }

  // Takes ownership of `value` and returns it.
  template <typename T>
  T* Reset(std::unique_ptr<T> value) {
    T* raw = value.get();
    value_ = std::shared_ptr<void>(std::move(value));
    type_ = std::type_index(typeid(T));
    return raw;
  }

  // Makes the blob uninitialized.
  void Reset() {
    value_.reset();
    type_ = std::type_index(typeid(void));
  }

  // Exchanges the values of two blobs (no copy): a restore moves staged
  // blobs into place this way.
  void Swap(Blob& other) noexcept {
    value_.swap(other.value_);
    std::swap(type_, other.type_);
  }

  std::type_index type() const { return type_; }

  // The registered name of the held type ("Tensor", ...), a demangled C++
  // name for unregistered types, or "uninitialized".
  std::string TypeName() const;

  // The registered name of `type`, or its demangled C++ name.
  static std::string TypeNameOf(std::type_index type);

 private:
  std::shared_ptr<void> value_;
  std::type_index type_ = std::type_index(typeid(void));
};

// The stable names of the built-in blob types. Checkpoints store them
// (BlobProto.type), so they are Caffe2's and never change.
inline constexpr char kTensorTypeName[] = "Tensor";
inline constexpr char kStringTypeName[] = "std::string";

// Gives blob type T a stable name. Registering two names for one type, or one
// name for two types, is a fatal error at start-up.
void RegisterBlobTypeName(std::type_index type, const std::string& name);

#define JG_REGISTER_BLOB_TYPE(T, NAME) \
  JG_REGISTER_BLOB_TYPE_IMPL_(T, NAME, __COUNTER__)
#define JG_REGISTER_BLOB_TYPE_IMPL_(T, NAME, N) \
  JG_REGISTER_BLOB_TYPE_IMPL2_(T, NAME, N)
#define JG_REGISTER_BLOB_TYPE_IMPL2_(T, NAME, N)                        \
  static const bool jg_blob_type_registered_##N = [] {                  \
    ::jobgraph::RegisterBlobTypeName(std::type_index(typeid(T)), NAME); \
    return true;                                                        \
  }()

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_BLOB_H_

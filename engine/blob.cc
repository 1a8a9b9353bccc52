#include "engine/blob.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "engine/tensor.h"

namespace jobgraph {
namespace {

struct TypeNames {
  std::mutex mu;
  std::map<std::type_index, std::string> by_type ABSL_GUARDED_BY(mu);
  std::map<std::string, std::type_index> by_name ABSL_GUARDED_BY(mu);
};

TypeNames& Names() {
  static TypeNames* names = new TypeNames;  // never destroyed
  return *names;
}

}  // namespace

void RegisterBlobTypeName(std::type_index type, const std::string& name) {
  TypeNames& names = Names();
  std::lock_guard<std::mutex> lock(names.mu);
  auto by_type = names.by_type.find(type);
  CHECK(by_type == names.by_type.end())
      << "blob type " << by_type->second << " registered twice (again as "
      << name << ")";
  CHECK(names.by_name.find(name) == names.by_name.end())
      << "blob type name " << name << " registered for two types";
  names.by_type.emplace(type, name);
  names.by_name.emplace(name, type);
}

std::string Blob::TypeNameOf(std::type_index type) {
  if (type == std::type_index(typeid(void))) return "uninitialized";
  {
    TypeNames& names = Names();
    std::lock_guard<std::mutex> lock(names.mu);
    auto it = names.by_type.find(type);
    if (it != names.by_type.end()) return it->second;
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string result = status == 0 ? demangled : type.name();
  std::free(demangled);
  return result;
}

std::string Blob::TypeName() const { return TypeNameOf(type_); }

// Caffe2's names, so that checkpoints list familiar types.
JG_REGISTER_BLOB_TYPE(Tensor, kTensorTypeName);
JG_REGISTER_BLOB_TYPE(std::string, kStringTypeName);

}  // namespace jobgraph

#include "checkpoint/db/memory_db.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

// Values are shared so that a cursor's snapshot is a copy of pointers, not of
// data, and stays valid while later writes replace entries.
using Entries =
    std::map<std::string, std::shared_ptr<const std::string>, std::less<>>;

struct Store {
  std::mutex mu;
  Entries entries ABSL_GUARDED_BY(mu);
};

// The process-wide table of databases and of which ones are open.
class Stores {
 public:
  static Stores& Get() {
    static Stores* stores = new Stores;  // Never destroyed.
    return *stores;
  }

  absl::StatusOr<std::shared_ptr<Store>> Acquire(const std::string& path,
                                                 DbMode mode) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stores_.find(path);
    if (mode == DbMode::kNew) {
      if (it != stores_.end()) {
        return absl::AlreadyExistsError(
            absl::StrCat("memory DB ", path, " already exists"));
      }
      it = stores_.emplace(path, std::make_shared<Store>()).first;
    } else if (it == stores_.end()) {
      return absl::NotFoundError(
          absl::StrCat("memory DB ", path, " does not exist"));
    } else if (open_.count(it->second.get()) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("memory DB ", path, " is already open"));
    }
    open_.insert(it->second.get());
    return it->second;
  }

  void Release(const Store* store) {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(store);
  }

  bool Exists(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return stores_.count(path) != 0;
  }

  std::vector<std::string> Paths() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> paths;
    for (const auto& entry : stores_) paths.push_back(entry.first);
    return paths;
  }

  absl::Status Remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stores_.find(path);
    if (it == stores_.end()) {
      return absl::NotFoundError(
          absl::StrCat("cannot remove memory DB ", path, ": does not exist"));
    }
    if (open_.count(it->second.get()) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot remove memory DB ", path, ": it is open"));
    }
    stores_.erase(it);
    return absl::OkStatus();
  }

  // Moves the database at `from` to `to`, replacing the one there, in one
  // step under the lock.
  absl::Status Install(const std::string& from, const std::string& to) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = stores_.find(from);
    if (it == stores_.end()) {
      return absl::NotFoundError(absl::StrCat("cannot install memory DB ", from,
                                              " as ", to, ": ", from,
                                              " does not exist"));
    }
    if (open_.count(it->second.get()) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot install memory DB ", from, " as ", to, ": ",
                       from, " is open"));
    }
    auto old = stores_.find(to);
    if (old != stores_.end() && open_.count(old->second.get()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot install memory DB ", from, " as ", to, ": ", to, " is open"));
    }
    std::shared_ptr<Store> store = std::move(it->second);
    stores_.erase(it);
    stores_.insert_or_assign(to, std::move(store));
    return absl::OkStatus();
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    stores_.clear();
    // open_ keeps the stores of open DBs; they are released on close.
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Store>> stores_ ABSL_GUARDED_BY(mu_);
  std::set<const Store*> open_ ABSL_GUARDED_BY(mu_);
};

class MemoryCursor final : public Cursor {
 public:
  explicit MemoryCursor(Entries snapshot)
      : snapshot_(std::move(snapshot)), it_(snapshot_.begin()) {}

  void SeekToFirst() override { it_ = snapshot_.begin(); }
  void Seek(absl::string_view target) override {
    it_ = snapshot_.lower_bound(target);
  }
  void Next() override { ++it_; }
  bool Valid() const override { return it_ != snapshot_.end(); }
  absl::string_view key() const override { return it_->first; }
  absl::string_view value() const override { return *it_->second; }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  const Entries snapshot_;
  Entries::const_iterator it_;
};

class MemoryWriter final : public Writer {
 public:
  MemoryWriter(Store* store, size_t batch_bytes)
      : store_(store), batch_bytes_(batch_bytes) {}

  absl::Status Put(absl::string_view key, absl::string_view value) override {
    const size_t bytes = key.size() + value.size();
    if (!pending_.empty() && pending_bytes_ + bytes > batch_bytes_) {
      Flush().IgnoreError();  // Cannot fail.
    }
    pending_.emplace_back(std::string(key), std::string(value));
    pending_bytes_ += bytes;
    if (pending_bytes_ >= batch_bytes_) Flush().IgnoreError();
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (pending_.empty()) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(store_->mu);
    for (auto& [key, value] : pending_) {
      store_->entries.insert_or_assign(
          std::move(key),
          std::make_shared<const std::string>(std::move(value)));
    }
    pending_.clear();
    pending_bytes_ = 0;
    return absl::OkStatus();
  }

 private:
  Store* const store_;
  const size_t batch_bytes_;
  std::vector<std::pair<std::string, std::string>> pending_;
  size_t pending_bytes_ = 0;
};

class MemoryDb final : public DB {
 public:
  MemoryDb(const std::string& path, DbMode mode, std::shared_ptr<Store> store,
           const DbOptions& options)
      : DB(path, mode), store_(std::move(store)), options_(options) {}

  ~MemoryDb() override {
    if (!closed()) Stores::Get().Release(store_.get());
  }

 protected:
  std::unique_ptr<Cursor> NewCursorImpl() override {
    std::lock_guard<std::mutex> lock(store_->mu);
    return std::make_unique<MemoryCursor>(store_->entries);
  }

  std::unique_ptr<Writer> NewWriterImpl() override {
    return std::make_unique<MemoryWriter>(store_.get(),
                                          options_.writer_batch_bytes);
  }

  // Nothing stored here has checksums to verify.
  absl::StatusOr<std::string> GetImpl(absl::string_view key,
                                      bool /*verify*/) override {
    std::lock_guard<std::mutex> lock(store_->mu);
    auto it = store_->entries.find(key);
    if (it == store_->entries.end()) return NotFoundKeyError(key);
    return *it->second;
  }

  absl::Status CloseImpl() override {
    Stores::Get().Release(store_.get());
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<Store> store_;
  const DbOptions options_;
};

class MemoryDbType final : public DbType {
 public:
  absl::StatusOr<bool> Exists(const std::string& path) const override {
    return Stores::Get().Exists(path);
  }

  // Any path can hold a memory database.
  absl::Status CheckInstallable(const std::string& path) const override {
    return absl::OkStatus();
  }

  absl::Status Install(const std::string& temp_path,
                       const std::string& final_path) const override {
    return Stores::Get().Install(temp_path, final_path);
  }

  absl::Status Remove(const std::string& path) const override {
    return Stores::Get().Remove(path);
  }

 protected:
  absl::StatusOr<std::unique_ptr<DB>> OpenImpl(
      const std::string& path, DbMode mode,
      const DbOptions& options) const override {
    JG_ASSIGN_OR_RETURN(std::shared_ptr<Store> store,
                        Stores::Get().Acquire(path, mode));
    return std::unique_ptr<DB>(
        std::make_unique<MemoryDb>(path, mode, std::move(store), options));
  }
};

}  // namespace

namespace memory_db {

std::vector<std::string> Paths() { return Stores::Get().Paths(); }

void Clear() { Stores::Get().Clear(); }

}  // namespace memory_db

JG_REGISTER_DB_TYPE(kMemoryDbType, std::make_shared<MemoryDbType>());

}  // namespace jobgraph

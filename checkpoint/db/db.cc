#include "checkpoint/db/db.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/util/crc32c.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// Never valid; status() says why (NewErrorCursor).
class ErrorCursor final : public Cursor {
 public:
  explicit ErrorCursor(absl::Status status) : status_(std::move(status)) {}
  void SeekToFirst() override {}
  void Seek(absl::string_view) override {}
  void Next() override { LOG(DFATAL) << "Next() on an invalid cursor"; }
  bool Valid() const override { return false; }
  absl::string_view key() const override { return {}; }
  absl::string_view value() const override { return {}; }
  absl::Status status() const override { return status_; }

 private:
  const absl::Status status_;
};

// The class of `type` without its namespaces ("MemoryDbType"). A DbType has
// no name of its own (the registry's names belong to the registry, and one
// object may have several), yet a message about what a type cannot do must
// say which type it is.
std::string ClassName(const DbType& type) {
  const char* mangled = typeid(type).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string name =
      status == 0 && demangled != nullptr ? demangled.get() : mangled;
  const size_t colons = name.rfind("::");
  if (colons != std::string::npos) name.erase(0, colons + 2);
  return name;
}

// Unimplemented for Pack and Unpack of a type that does not override them.
absl::Status NotBetweenMachines(const DbType& type, absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(what, ": databases of DB type ", ClassName(type),
                   " cannot be copied between machines (they are not files)"));
}

// Copies every entry of `source` into `target` and closes `target`, which
// makes it durable; returns the bytes of the keys and values. An error
// reading `source` names the last key copied: the damage is after it.
// Waits at `pause` (if set) before each entry and before the close.
absl::StatusOr<int64_t> CopyEntries(DB* source, DB* target, PauseGate* pause) {
  absl::StatusOr<std::unique_ptr<Writer>> writer = target->NewWriter();
  if (!writer.ok()) return writer.status();
  std::unique_ptr<Cursor> cursor = source->NewCursor();
  int64_t bytes = 0;
  std::string last_key;
  bool any = false;
  for (; cursor->Valid(); cursor->Next()) {
    if (pause != nullptr) pause->WaitWhileHeld();
    absl::Status put = (*writer)->Put(cursor->key(), cursor->value());
    if (!put.ok()) return put;
    bytes +=
        static_cast<int64_t>(cursor->key().size() + cursor->value().size());
    last_key.assign(cursor->key().data(), cursor->key().size());
    any = true;
  }
  if (absl::Status read = cursor->status(); !read.ok()) {
    return absl::Status(
        read.code(),
        absl::StrCat("reading ",
                     any ? absl::StrCat("the entry after key '",
                                        absl::CHexEscape(last_key), "'")
                         : std::string("the first entry"),
                     ": ", read.message()));
  }
  if (pause != nullptr) pause->WaitWhileHeld();
  absl::Status flushed = (*writer)->Flush();
  if (!flushed.ok()) return flushed;
  // Close() refuses while either is alive.
  writer->reset();
  cursor.reset();
  absl::Status closed = target->Close();
  if (!closed.ok()) return closed;
  return bytes;
}

}  // namespace

std::unique_ptr<Cursor> NewErrorCursor(absl::Status status) {
  return std::make_unique<ErrorCursor>(std::move(status));
}

// Counts live cursors so that Close() can refuse to pull the database from
// under one (LevelDB iterators would dangle).
class DB::TrackedCursor final : public Cursor {
 public:
  TrackedCursor(std::unique_ptr<Cursor> inner, std::atomic<int>* live)
      : inner_(std::move(inner)), live_(live) {
    live_->fetch_add(1, std::memory_order_relaxed);
  }
  ~TrackedCursor() override {
    inner_.reset();
    live_->fetch_sub(1, std::memory_order_release);
  }
  void SeekToFirst() override { inner_->SeekToFirst(); }
  void Seek(absl::string_view target) override { inner_->Seek(target); }
  void Next() override { inner_->Next(); }
  bool Valid() const override { return inner_->Valid(); }
  absl::string_view key() const override { return inner_->key(); }
  absl::string_view value() const override { return inner_->value(); }
  absl::Status status() const override { return inner_->status(); }

 private:
  std::unique_ptr<Cursor> inner_;
  std::atomic<int>* const live_;
};

std::string JoinValue(absl::string_view head, absl::string_view body) {
  std::string value;
  value.reserve(head.size() + body.size());
  value.append(head.data(), head.size());
  value.append(body.data(), body.size());
  return value;
}

absl::Status Writer::PutBorrowed(absl::string_view key, absl::string_view head,
                                 absl::string_view body, uint32_t body_crc32c) {
  return PutWithCrc(key, JoinValue(head, body),
                    crc32c::Combine(Crc32c(head), body_crc32c, body.size()));
}

// Checks entry sizes, counts live writers and records the first failed write
// in the DB, so that Close() can report it.
class DB::TrackedWriter final : public Writer {
 public:
  TrackedWriter(std::unique_ptr<Writer> inner, DB* db)
      : inner_(std::move(inner)), db_(db) {
    db_->live_writers_.fetch_add(1, std::memory_order_relaxed);
  }
  ~TrackedWriter() override {
    absl::Status status = inner_->Flush();
    if (!status.ok()) {
      LOG(ERROR) << "writer destroyed with unwritten data: " << status;
      db_->RecordWriteError(status);
    }
    inner_.reset();
    db_->live_writers_.fetch_sub(1, std::memory_order_release);
  }

  absl::Status Put(absl::string_view key, absl::string_view value) override {
    if (absl::Status size = CheckSize(key, value); !size.ok()) return size;
    return Check(inner_->Put(key, value));
  }
  absl::Status PutWithCrc(absl::string_view key, absl::string_view value,
                          uint32_t value_crc32c) override {
    if (absl::Status size = CheckSize(key, value); !size.ok()) return size;
    return Check(inner_->PutWithCrc(key, value, value_crc32c));
  }
  absl::Status PutBorrowed(absl::string_view key, absl::string_view head,
                           absl::string_view body,
                           uint32_t body_crc32c) override {
    if (absl::Status size = CheckSize(key, head.size() + body.size());
        !size.ok()) {
      return size;
    }
    return Check(inner_->PutBorrowed(key, head, body, body_crc32c));
  }
  absl::Status Flush() override { return Check(inner_->Flush()); }

 private:
  absl::Status CheckSize(absl::string_view key, absl::string_view value) {
    return CheckSize(key, value.size());
  }
  absl::Status CheckSize(absl::string_view key, size_t value_bytes) {
    if (key.size() + value_bytes > kMaxDbEntryBytes) {
      // Not recorded in the DB: nothing was written, and the caller sees it.
      return absl::InvalidArgumentError(absl::StrCat(
          "DB ", db_->path(), ": entry '", absl::CHexEscape(key.substr(0, 200)),
          "' has ", key.size() + value_bytes, " bytes, more than the ",
          kMaxDbEntryBytes, " one entry may hold; chunk the value"));
    }
    return absl::OkStatus();
  }
  absl::Status Check(absl::Status status) {
    if (!status.ok()) db_->RecordWriteError(status);
    return status;
  }

  std::unique_ptr<Writer> inner_;
  DB* const db_;
};

absl::string_view DbModeName(DbMode mode) {
  switch (mode) {
    case DbMode::kRead:
      return "read";
    case DbMode::kNew:
      return "new";
  }
  return "unknown";
}

DB::DB(std::string path, DbMode mode) : path_(std::move(path)), mode_(mode) {}

DB::~DB() {
  // A cursor or writer that outlives its DB would use freed memory.
  CHECK_EQ(live_cursors_.load(std::memory_order_acquire), 0)
      << "DB " << path_ << " destroyed while cursors are alive";
  CHECK_EQ(live_writers_.load(std::memory_order_acquire), 0)
      << "DB " << path_ << " destroyed while writers are alive";
}

std::unique_ptr<Cursor> DB::NewCursor() {
  if (closed_) {
    return NewErrorCursor(absl::FailedPreconditionError(
        absl::StrCat("cursor on DB ", path_, ", which is closed")));
  }
  return std::make_unique<TrackedCursor>(NewCursorImpl(), &live_cursors_);
}

absl::StatusOr<std::unique_ptr<Writer>> DB::NewWriter() {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write to DB ", path_, ": it is closed"));
  }
  if (mode_ != DbMode::kNew) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write to DB ", path_, ": it was opened with mode ",
        DbModeName(mode_), "; only a DB opened with mode new is writable"));
  }
  return std::unique_ptr<Writer>(
      std::make_unique<TrackedWriter>(NewWriterImpl(), this));
}

absl::StatusOr<std::string> DB::Get(absl::string_view key) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read DB ", path_, ": it is closed"));
  }
  return GetImpl(key, /*verify=*/false);
}

absl::StatusOr<std::string> DB::GetVerified(absl::string_view key) {
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read DB ", path_, ": it is closed"));
  }
  return GetImpl(key, /*verify=*/true);
}

absl::Status DB::Close() {
  if (closed_) return absl::OkStatus();
  const int cursors = live_cursors_.load(std::memory_order_acquire);
  const int writers = live_writers_.load(std::memory_order_acquire);
  if (cursors != 0 || writers != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot close DB ", path_, ": ", cursors, " cursor(s) and ", writers,
        " writer(s) are still alive; destroy them first"));
  }
  closed_ = true;
  absl::Status close_status = CloseImpl();
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_write_error_.ok()) {
    return absl::Status(
        first_write_error_.code(),
        absl::StrCat("DB ", path_, " is incomplete: a write failed: ",
                     first_write_error_.message(),
                     close_status.ok() ? ""
                                       : absl::StrCat("; closing also failed: ",
                                                      close_status.message())));
  }
  return close_status;
}

absl::Status DB::NotFoundKeyError(absl::string_view key) const {
  return absl::NotFoundError(absl::StrCat("key '", absl::CHexEscape(key),
                                          "' not found in DB ", path_));
}

void DB::RecordWriteError(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_write_error_.ok()) first_write_error_ = status;
}

absl::StatusOr<int64_t> DbType::Copy(const std::string& from,
                                     const std::string& to,
                                     const CopyOptions& copy_options) const {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot copy DB ", from, " to ", to, ": ",
                                     status.message()));
  };
  absl::StatusOr<std::unique_ptr<DB>> source = Open(from, DbMode::kRead);
  if (!source.ok()) return failed(source.status());
  // As Save writes (WriteCheckpointDb): nothing reads the copy before it is
  // closed, and its Close() makes it durable.
  DbOptions options;
  options.write_only = true;
  options.durable_close = true;
  absl::StatusOr<std::unique_ptr<DB>> target = Open(to, DbMode::kNew, options);
  // A failed kNew open leaves nothing at `to` that it made; what was there
  // (AlreadyExists) is not the copy's to remove.
  if (!target.ok()) return failed(target.status());
  absl::StatusOr<int64_t> bytes =
      CopyEntries(source->get(), target->get(), copy_options.pause);
  if (!bytes.ok()) {
    target->reset();  // released without Close(): nothing made durable
    absl::Status removed = Remove(to);
    if (!removed.ok() && !absl::IsNotFound(removed)) {
      LOG(WARNING) << "cannot remove " << to << ", the partial copy of DB "
                   << from << ": " << removed;
    }
    return failed(bytes.status());
  }
  // The copy is complete and durable; the source was only read.
  absl::Status closed = (*source)->Close();
  if (!closed.ok()) {
    LOG(WARNING) << "copied DB " << from << " to " << to
                 << ", but closing the source failed: " << closed;
  }
  return bytes;
}

absl::StatusOr<std::string> DbType::Pack(const std::string& from) const {
  return NotBetweenMachines(*this, absl::StrCat("cannot pack DB ", from));
}

absl::StatusOr<int64_t> DbType::Unpack(absl::string_view packed,
                                       const std::string& to) const {
  return NotBetweenMachines(*this, absl::StrCat("cannot unpack ", packed.size(),
                                                " bytes to DB ", to));
}

absl::StatusOr<int64_t> DbType::HoldPacked(std::string packed,
                                           const std::string& path) const {
  return NotBetweenMachines(
      *this, absl::StrCat("cannot hold ", packed.size(),
                          " packed bytes in memory as DB ", path));
}

}  // namespace jobgraph

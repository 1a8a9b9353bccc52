#include "checkpoint/leveldb/leveldb_tables.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/leveldb/leveldb_manifest.h"
#include "checkpoint/leveldb/leveldb_table_checks.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "leveldb/comparator.h"
#include "leveldb/iterator.h"
#include "leveldb/options.h"
#include "leveldb/slice.h"
#include "leveldb/table.h"

namespace jobgraph {
namespace {

using leveldb_format::InternalKey;
using leveldb_format::kMaxSequenceNumber;
using leveldb_format::kTrailerSize;
using leveldb_format::kTypeDeletion;
using leveldb_format::LoadLE64;

// An internal key is the user key followed by an 8-byte trailer (sequence
// number << 8 | type). A damaged table can hold keys too short for one:
// these helpers take such a key whole as its user key, with trailer 0, so
// that it is compared and skipped without reading outside it, and
// TablesCursor reports it as damage.

absl::string_view UserKey(const leveldb::Slice& internal_key) {
  if (internal_key.size() < kTrailerSize) {
    return absl::string_view(internal_key.data(), internal_key.size());
  }
  return absl::string_view(internal_key.data(),
                           internal_key.size() - kTrailerSize);
}

uint64_t Trailer(const leveldb::Slice& internal_key) {
  if (internal_key.size() < kTrailerSize) return 0;
  return LoadLE64(internal_key.data() + internal_key.size() - kTrailerSize);
}

uint8_t KeyType(const leveldb::Slice& internal_key) {
  return static_cast<uint8_t>(Trailer(internal_key) & 0xff);
}

// LevelDB's order of internal keys (user key, then sequence descending),
// which the tables' index blocks were built with.
class InternalKeyOrder final : public leveldb::Comparator {
 public:
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    const absl::string_view ua = UserKey(a);
    const absl::string_view ub = UserKey(b);
    const int r = leveldb::Slice(ua.data(), ua.size())
                      .compare(leveldb::Slice(ub.data(), ub.size()));
    if (r != 0) return r;
    const uint64_t ta = Trailer(a);
    const uint64_t tb = Trailer(b);
    return ta > tb ? -1 : (ta < tb ? 1 : 0);
  }
  const char* Name() const override { return "leveldb.InternalKeyComparator"; }
  // Only table builders shorten keys; a reader never calls these.
  void FindShortestSeparator(std::string*,
                             const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

const InternalKeyOrder& Order() {
  static const InternalKeyOrder* order = new InternalKeyOrder;
  return *order;
}

// The tables' entries merged in key order; deletions and older versions of
// a key (which jobgraph's saves never write) are skipped.
class TablesCursor final : public Cursor {
 public:
  TablesCursor(std::vector<std::unique_ptr<leveldb::Iterator>> iterators,
               const std::string* path)
      : iterators_(std::move(iterators)), path_(path) {
    SeekToFirst();
  }

  void SeekToFirst() override {
    for (auto& it : iterators_) it->SeekToFirst();
    Settle();
  }
  void Seek(absl::string_view target) override {
    const std::string key = InternalKey(target, kMaxSequenceNumber);
    for (auto& it : iterators_) it->Seek(key);
    Settle();
  }
  void Next() override {
    SkipKey(UserKey(iterators_[current_]->key()));
    Settle();
  }
  bool Valid() const override { return current_ >= 0; }
  absl::string_view key() const override {
    return UserKey(iterators_[current_]->key());
  }
  absl::string_view value() const override {
    const leveldb::Slice v = iterators_[current_]->value();
    return absl::string_view(v.data(), v.size());
  }
  absl::Status status() const override {
    if (!damage_.ok()) return damage_;
    for (const auto& it : iterators_) {
      if (!it->status().ok()) return LevelDbTableError(it->status(), *path_);
    }
    return absl::OkStatus();
  }

 private:
  // Points current_ at the smallest entry that is a live value.
  void Settle() {
    while (true) {
      current_ = -1;
      for (int i = 0; i < static_cast<int>(iterators_.size()); ++i) {
        if (!iterators_[i]->Valid()) continue;
        if (current_ < 0 || Order().Compare(iterators_[i]->key(),
                                            iterators_[current_]->key()) < 0) {
          current_ = i;
        }
      }
      if (current_ >= 0 && iterators_[current_]->key().size() < kTrailerSize) {
        damage_ = absl::DataLossError(absl::StrCat(
            "LevelDB database ", *path_, " is damaged: a table holds a key of ",
            iterators_[current_]->key().size(), " bytes, shorter than the ",
            kTrailerSize, "-byte trailer of every key"));
        current_ = -1;
        return;
      }
      if (current_ < 0 ||
          KeyType(iterators_[current_]->key()) != kTypeDeletion) {
        return;
      }
      SkipKey(UserKey(iterators_[current_]->key()));
    }
  }

  // Moves every iterator past `user_key` (the newest version is taken).
  void SkipKey(absl::string_view user_key) {
    const std::string skipped(user_key);
    for (auto& it : iterators_) {
      while (it->Valid() && UserKey(it->key()) == skipped) it->Next();
    }
  }

  std::vector<std::unique_ptr<leveldb::Iterator>> iterators_;
  const std::string* const path_;
  int current_ = -1;
  absl::Status damage_;  // a key too short to be an internal key
};

// A table file of a database held in memory: reads point into its bytes,
// which LevelDB then uses in place (it copies a block only when a read
// fills its scratch buffer).
class HeldFile final : public leveldb::RandomAccessFile {
 public:
  explicit HeldFile(absl::string_view bytes) : bytes_(bytes) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    if (offset > bytes_.size()) {
      return leveldb::Status::IOError("read past the end of a held file");
    }
    *result = leveldb::Slice(
        bytes_.data() + offset,
        std::min<uint64_t>(n, bytes_.size() - static_cast<size_t>(offset)));
    return leveldb::Status::OK();
  }

 private:
  const absl::string_view bytes_;
};

class LevelDbTables final : public DB {
 public:
  // `held`: the database held in memory as `path`, or null for the
  // directory `path`.
  LevelDbTables(const std::string& path, const DbOptions& options,
                std::function<void()> on_release,
                std::shared_ptr<const HeldLevelDb> held = nullptr)
      : DB(path, DbMode::kRead),
        options_(options),
        on_release_(std::move(on_release)),
        held_(std::move(held)) {}
  ~LevelDbTables() override { Release(); }

  absl::Status Open() {
    std::vector<std::string> names;
    std::map<uint64_t, LevelDbTableMeta> live;
    if (held_ != nullptr) {
      for (const auto& [name, bytes] : held_->files) names.push_back(name);
      JG_ASSIGN_OR_RETURN(
          live,
          ReadLevelDbLiveTables(
              path(),
              [&](const std::string& name) -> absl::StatusOr<std::string> {
                auto it = held_->files.find(name);
                if (it == held_->files.end()) {
                  return absl::NotFoundError(
                      absl::StrCat(JoinPath(path(), name), " does not exist"));
                }
                return std::string(it->second);
              }));
    } else {
      JG_ASSIGN_OR_RETURN(names, ListDir(path()));
      JG_ASSIGN_OR_RETURN(live, ReadLevelDbLiveTables(path()));
    }

    // Files on disk by number: tables and logs.
    std::map<uint64_t, std::string> tables;
    for (const std::string& name : names) {
      absl::string_view stem = name;
      uint64_t number = 0;
      const std::string file = JoinPath(path(), name);
      if (absl::ConsumeSuffix(&stem, ".log") &&
          absl::SimpleAtoi(stem, &number)) {
        if (FileSize(name, file).value_or(0) > 0) {
          // Data that only LevelDB's recovery can read.
          return absl::UnimplementedError(absl::StrCat(
              "LevelDB database ", path(), " has a non-empty log ", name));
        }
      } else if ((absl::ConsumeSuffix(&stem, ".ldb") ||
                  absl::ConsumeSuffix(&stem, ".sst")) &&
                 absl::SimpleAtoi(stem, &number)) {
        tables[number] = name;
      }
    }
    leveldb::Options table_options;
    table_options.comparator = &Order();
    table_options.paranoid_checks = true;
    for (const auto& [number, meta] : live) {
      const uint64_t size = meta.size;
      auto found = tables.find(number);
      if (found == tables.end()) {
        return absl::DataLossError(
            absl::StrCat("LevelDB database ", path(), " is damaged: its table ",
                         absl::StrFormat("%06d.ldb", number), " is missing"));
      }
      const std::string& name = found->second;
      const std::string file_path = JoinPath(path(), name);
      const std::optional<uint64_t> actual = FileSize(name, file_path);
      if (actual != size) {
        return absl::DataLossError(absl::StrCat(
            "LevelDB database ", path(), " is damaged: table ", file_path,
            " has ",
            actual.has_value() ? absl::StrCat(*actual) : std::string("no"),
            " bytes, its descriptor records ", size));
      }
      leveldb::RandomAccessFile* file = nullptr;
      if (held_ != nullptr) {
        file = NewBlockCheckingFile(
                   std::make_unique<HeldFile>(held_->files.find(name)->second),
                   size, file_path)
                   .release();
      } else {
        leveldb::Status s =
            BlockCheckingTableEnv()->NewRandomAccessFile(file_path, &file);
        if (!s.ok()) return LevelDbTableError(s, path());
      }
      files_.emplace_back(file);
      JG_RETURN_IF_ERROR(CheckTableFooter(file, size, path(), file_path));
      leveldb::Table* table = nullptr;
      const leveldb::Status s =
          leveldb::Table::Open(table_options, file, size, &table);
      if (!s.ok()) return LevelDbTableError(s, path());
      tables_.emplace_back(table);
      ranges_.push_back({meta.smallest, meta.largest});
    }
    return absl::OkStatus();
  }

 protected:
  std::unique_ptr<Cursor> NewCursorImpl() override {
    leveldb::ReadOptions read_options;
    read_options.verify_checksums = options_.verify_checksums;
    read_options.fill_cache = false;
    std::vector<std::unique_ptr<leveldb::Iterator>> iterators;
    for (const auto& table : tables_) {
      iterators.emplace_back(table->NewIterator(read_options));
    }
    return std::make_unique<TablesCursor>(std::move(iterators), &path());
  }

  std::unique_ptr<Writer> NewWriterImpl() override {
    LOG(FATAL) << "NewWriter of a read-only database";
    return nullptr;
  }

  // Reads only the tables whose recorded key range holds `key`: a seek of
  // the merged cursor would read a block of every table, which for a
  // checkpoint can be a whole chunk per table, and with `verify` would
  // report damage in values that their own reads are there to report.
  absl::StatusOr<std::string> GetImpl(absl::string_view key,
                                      bool verify) override {
    const std::string target = InternalKey(key, kMaxSequenceNumber);
    leveldb::ReadOptions read_options;
    read_options.verify_checksums = options_.verify_checksums || verify;
    read_options.fill_cache = false;
    bool found = false;
    uint64_t newest_trailer = 0;
    std::string value;
    for (size_t i = 0; i < tables_.size(); ++i) {
      const auto& [smallest, largest] = ranges_[i];
      if (smallest.size() >= kTrailerSize && largest.size() >= kTrailerSize &&
          (key < UserKey(smallest) || key > UserKey(largest))) {
        continue;
      }
      std::unique_ptr<leveldb::Iterator> it(
          tables_[i]->NewIterator(read_options));
      it->Seek(target);
      if (!it->status().ok()) return LevelDbTableError(it->status(), path());
      if (!it->Valid() || it->key().size() < kTrailerSize ||
          UserKey(it->key()) != key) {
        continue;
      }
      if (!found || Trailer(it->key()) > newest_trailer) {
        found = true;
        newest_trailer = Trailer(it->key());
        value.assign(it->value().data(), it->value().size());
      }
    }
    if (!found || (newest_trailer & 0xff) == kTypeDeletion) {
      return NotFoundKeyError(key);
    }
    return value;
  }

  absl::Status CloseImpl() override {
    Release();
    return absl::OkStatus();
  }

 public:
  absl::Status VerifyFiles(const FileCheck& check) override {
    // A held database's files were all checked against its list when it
    // was held, and its bytes cannot have changed since.
    if (held_ != nullptr) return absl::OkStatus();
    return VerifyLevelDbFileList(path(), check);
  }

 private:
  // The size of file `name` of the database (at `file` on disk), if it is
  // there.
  std::optional<uint64_t> FileSize(const std::string& name,
                                   const std::string& file) const {
    if (held_ != nullptr) {
      auto it = held_->files.find(name);
      if (it == held_->files.end()) return std::nullopt;
      return it->second.size();
    }
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) return std::nullopt;
    return static_cast<uint64_t>(st.st_size);
  }

  void Release() {
    tables_.clear();
    files_.clear();
    if (on_release_) std::exchange(on_release_, nullptr)();
  }

  const DbOptions options_;
  std::function<void()> on_release_;
  // Outlives files_ and tables_, which read its bytes.
  const std::shared_ptr<const HeldLevelDb> held_;
  std::vector<std::unique_ptr<leveldb::RandomAccessFile>> files_;
  std::vector<std::unique_ptr<leveldb::Table>> tables_;  // before files_ dies
  // The internal keys of each table's first and last entries, from the
  // descriptor.
  std::vector<std::pair<std::string, std::string>> ranges_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbTables(
    const std::string& path, const DbOptions& options,
    std::function<void()> on_release) {
  auto db =
      std::make_unique<LevelDbTables>(path, options, std::move(on_release));
  JG_RETURN_IF_ERROR(db->Open());
  return std::unique_ptr<DB>(std::move(db));
}

absl::StatusOr<std::unique_ptr<DB>> OpenHeldLevelDbTables(
    const std::string& path, std::shared_ptr<const HeldLevelDb> held,
    const DbOptions& options) {
  auto db =
      std::make_unique<LevelDbTables>(path, options, nullptr, std::move(held));
  JG_RETURN_IF_ERROR(db->Open());
  return std::unique_ptr<DB>(std::move(db));
}

}  // namespace jobgraph

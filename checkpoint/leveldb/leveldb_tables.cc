#include "checkpoint/leveldb/leveldb_tables.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "leveldb/comparator.h"
#include "leveldb/env.h"
#include "leveldb/iterator.h"
#include "leveldb/options.h"
#include "leveldb/table.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using leveldb_format::GetLengthPrefixed;
using leveldb_format::GetVarint64;
using leveldb_format::InternalKey;
using leveldb_format::kBlockTrailerSize;
using leveldb_format::kFirst;
using leveldb_format::kFull;
using leveldb_format::kLast;
using leveldb_format::kLogBlockSize;
using leveldb_format::kLogHeaderSize;
using leveldb_format::kMaxSequenceNumber;
using leveldb_format::kMiddle;
using leveldb_format::kTableFooterSize;
using leveldb_format::kTrailerSize;
using leveldb_format::kTypeDeletion;
using leveldb_format::kZeroType;
using leveldb_format::LoadLE32;
using leveldb_format::LoadLE64;
using leveldb_format::UnmaskCrc;

// The records of a LevelDB log file (the MANIFEST-* file is one), each
// checked against its CRC. Any damage, a truncated record included, is
// DataLoss naming `path`.
absl::StatusOr<std::vector<std::string>> ReadLogRecords(
    const std::string& path, absl::string_view file) {
  auto damaged = [&](size_t offset, absl::string_view what) {
    return absl::DataLossError(absl::StrCat(
        "LevelDB file ", path, " is damaged at offset ", offset, ": ", what));
  };
  std::vector<std::string> records;
  std::string pending;
  bool in_record = false;
  size_t offset = 0;
  while (offset < file.size()) {
    const size_t left_in_block = kLogBlockSize - offset % kLogBlockSize;
    if (left_in_block < kLogHeaderSize) {
      offset += left_in_block;  // the block's zero-filled trailer
      continue;
    }
    if (file.size() - offset < kLogHeaderSize) {
      return damaged(offset, "a truncated record header");
    }
    const char* header = file.data() + offset;
    const uint32_t length = static_cast<uint8_t>(header[4]) |
                            (uint32_t{static_cast<uint8_t>(header[5])} << 8);
    const uint8_t type = static_cast<uint8_t>(header[6]);
    if (type == kZeroType && length == 0) {
      // Preallocated space, never written.
      offset += left_in_block;
      continue;
    }
    if (kLogHeaderSize + length > left_in_block ||
        offset + kLogHeaderSize + length > file.size()) {
      return damaged(offset, "a record that overruns its block or the file");
    }
    const char* payload = header + kLogHeaderSize;
    const uint32_t expected = UnmaskCrc(LoadLE32(header));
    const uint32_t actual =
        crc32c::Extend(Crc32c(header + 6, 1), payload, length);
    if (expected != actual) return damaged(offset, "a record fails its CRC");
    switch (type) {
      case kFull:
        if (in_record) return damaged(offset, "an unfinished record");
        records.emplace_back(payload, length);
        break;
      case kFirst:
        if (in_record) return damaged(offset, "an unfinished record");
        pending.assign(payload, length);
        in_record = true;
        break;
      case kMiddle:
      case kLast:
        if (!in_record) return damaged(offset, "a record without its start");
        pending.append(payload, length);
        if (type == kLast) {
          records.push_back(std::move(pending));
          pending.clear();
          in_record = false;
        }
        break;
      default:
        return damaged(offset, absl::StrCat("unknown record type ", type));
    }
    offset += kLogHeaderSize + length;
  }
  if (in_record) return damaged(offset, "the last record is cut off");
  return records;
}

// A live table as the descriptor records it.
struct TableMeta {
  uint64_t size = 0;
  std::string smallest;  // internal keys
  std::string largest;
};

// The live table files of a database, from its MANIFEST-* records
// (LevelDB's VersionEdit encoding), by file number.
absl::StatusOr<std::map<uint64_t, TableMeta>> LiveTables(
    const std::string& path, const std::vector<std::string>& records) {
  std::map<uint64_t, TableMeta> live;
  for (size_t r = 0; r < records.size(); ++r) {
    absl::string_view in = records[r];
    auto damaged = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB file ", path, " is damaged: record ", r, " ", what));
    };
    while (!in.empty()) {
      uint64_t tag = 0, level = 0, number = 0, size = 0, unused = 0;
      absl::string_view bytes;
      if (!GetVarint64(&in, &tag)) return damaged("has a broken tag");
      switch (tag) {
        case leveldb_format::kTagComparator:
          if (!GetLengthPrefixed(&in, &bytes)) return damaged("is cut off");
          if (bytes != leveldb_format::kBytewiseComparatorName) {
            return absl::FailedPreconditionError(absl::StrCat(
                "LevelDB database of ", path, " uses comparator '", bytes,
                "'; checkpoints use leveldb.BytewiseComparator"));
          }
          break;
        case leveldb_format::kTagLogNumber:
        case leveldb_format::kTagNextFileNumber:
        case leveldb_format::kTagLastSequence:
        case leveldb_format::kTagPrevLogNumber:
          if (!GetVarint64(&in, &unused)) return damaged("is cut off");
          break;
        case leveldb_format::kTagCompactPointer:  // level, internal key
          if (!GetVarint64(&in, &level) || !GetLengthPrefixed(&in, &bytes)) {
            return damaged("is cut off");
          }
          break;
        case leveldb_format::kTagDeletedFile:  // level, number
          if (!GetVarint64(&in, &level) || !GetVarint64(&in, &number)) {
            return damaged("is cut off");
          }
          live.erase(number);
          break;
        case leveldb_format::kTagNewFile: {
          // level, number, size, smallest, largest
          absl::string_view largest;
          if (!GetVarint64(&in, &level) || !GetVarint64(&in, &number) ||
              !GetVarint64(&in, &size) || !GetLengthPrefixed(&in, &bytes) ||
              !GetLengthPrefixed(&in, &largest)) {
            return damaged("is cut off");
          }
          live[number] =
              TableMeta{size, std::string(bytes), std::string(largest)};
          break;
        }
        default:
          return damaged(absl::StrCat("has unknown tag ", tag));
      }
    }
  }
  return live;
}

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

absl::Status TableError(const leveldb::Status& status,
                        const std::string& path) {
  return absl::DataLossError(
      absl::StrCat("read LevelDB database ", path, ": ", status.ToString()));
}

// LevelDB's GetVarint32Ptr: at most five bytes, bits past 32 dropped, so
// the values are the ones LevelDB's block reader will see.
const char* DecodeVarint32(const char* p, const char* limit, uint32_t* value) {
  uint32_t result = 0;
  for (uint32_t shift = 0; shift <= 28 && p < limit; shift += 7) {
    const uint32_t byte = static_cast<uint8_t>(*p++);
    result |= (byte & 0x7fu) << shift;
    if ((byte & 0x80u) == 0) {
      *value = result;
      return p;
    }
  }
  return nullptr;
}

// Whether a table block (its contents, without the 5-byte trailer) holds
// entries that LevelDB's block reader can walk safely: a chain of entries
// from offset 0 that ends exactly at the restart array, each sharing no more
// than the previous key and fitting in the block, and restart points at
// entries that share nothing. LevelDB itself adds an entry's two 32-bit
// lengths without checking for overflow, so a damaged entry makes it copy
// gigabytes from past the block (found by ckpt_fuzzer), and it checks a
// block's CRC only when asked to.
bool BlockIsWellFormed(absl::string_view block) {
  const uint64_t n = block.size();
  if (n < 4) return false;
  const char* const base = block.data();
  const uint32_t num_restarts = LoadLE32(base + n - 4);
  if (num_restarts > (n - 4) / 4) return false;
  const uint64_t restarts = n - 4 - 4 * uint64_t{num_restarts};
  const char* const limit = base + restarts;
  // Offsets of the entries that share nothing with the previous key.
  std::vector<uint64_t> unshared;
  uint64_t key_size = 0;
  for (const char* p = base; p < limit;) {
    uint32_t shared = 0, non_shared = 0, value_length = 0;
    const char* q = DecodeVarint32(p, limit, &shared);
    if (q != nullptr) q = DecodeVarint32(q, limit, &non_shared);
    if (q != nullptr) q = DecodeVarint32(q, limit, &value_length);
    if (q == nullptr || shared > key_size ||
        uint64_t{non_shared} + value_length >
            static_cast<uint64_t>(limit - q)) {
      return false;
    }
    if (shared == 0) unshared.push_back(static_cast<uint64_t>(p - base));
    key_size = uint64_t{shared} + non_shared;
    p = q + non_shared + value_length;
  }
  for (uint32_t i = 0; i < num_restarts; ++i) {
    const uint32_t restart = LoadLE32(limit + 4 * uint64_t{i});
    if (restart == restarts) continue;  // the end: no entry to read
    if (!std::binary_search(unshared.begin(), unshared.end(),
                            uint64_t{restart})) {
      return false;
    }
  }
  return true;
}

// A table file that checks every block LevelDB reads from it
// (BlockIsWellFormed) before LevelDB parses it; the footer, the one other
// thing LevelDB reads, has its own check (CheckTableFooter).
class BlockCheckingFile final : public leveldb::RandomAccessFile {
 public:
  BlockCheckingFile(std::unique_ptr<leveldb::RandomAccessFile> file,
                    uint64_t size, std::string name)
      : file_(std::move(file)), size_(size), name_(std::move(name)) {}

  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    leveldb::Status s = file_->Read(offset, n, result, scratch);
    if (!s.ok()) return s;
    const bool footer = size_ >= kTableFooterSize &&
                        offset == size_ - kTableFooterSize &&
                        n == kTableFooterSize;
    if (footer || result->size() < kBlockTrailerSize) return s;
    if (!BlockIsWellFormed(absl::string_view(
            result->data(), result->size() - kBlockTrailerSize))) {
      return leveldb::Status::Corruption(
          absl::StrCat("malformed entries in the block at offset ", offset),
          name_);
    }
    return s;
  }

 private:
  const std::unique_ptr<leveldb::RandomAccessFile> file_;
  const uint64_t size_;
  const std::string name_;
};

// The default Env, except that table files are read through
// BlockCheckingFile.
class BlockCheckingEnv final : public leveldb::EnvWrapper {
 public:
  BlockCheckingEnv() : EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status NewRandomAccessFile(
      const std::string& name, leveldb::RandomAccessFile** result) override {
    leveldb::RandomAccessFile* file = nullptr;
    leveldb::Status s = target()->NewRandomAccessFile(name, &file);
    if (!s.ok() ||
        !(absl::EndsWith(name, ".ldb") || absl::EndsWith(name, ".sst"))) {
      *result = file;
      return s;
    }
    std::unique_ptr<leveldb::RandomAccessFile> owned(file);
    uint64_t size = 0;
    s = target()->GetFileSize(name, &size);
    if (!s.ok()) return s;
    *result = new BlockCheckingFile(std::move(owned), size, name);
    return leveldb::Status::OK();
  }
};

// LevelDB's Table::Open allocates the index block, of the size the table's
// footer records, before it reads it, and the footer has no checksum: a
// damaged one makes it allocate up to 2^64 bytes (std::bad_alloc, which
// nothing catches). So both block handles of the footer must lie within the
// file before the table is opened. A footer that does not decode is left to
// Table::Open to report.
absl::Status CheckTableFooter(leveldb::RandomAccessFile* file, uint64_t size,
                              const std::string& db_path,
                              const std::string& table_path) {
  constexpr size_t kFooterSize = kTableFooterSize;
  if (size < kFooterSize) return absl::OkStatus();
  char scratch[kFooterSize];
  leveldb::Slice footer;
  const leveldb::Status s =
      file->Read(size - kFooterSize, kFooterSize, &footer, scratch);
  if (!s.ok()) return TableError(s, db_path);
  absl::string_view in(footer.data(), footer.size());
  const uint64_t blocks_end = size - kFooterSize;
  for (const char* block : {"metaindex", "index"}) {
    uint64_t offset = 0;
    uint64_t length = 0;
    if (!GetVarint64(&in, &offset) || !GetVarint64(&in, &length)) {
      return absl::OkStatus();
    }
    if (offset > blocks_end || length > blocks_end - offset ||
        kBlockTrailerSize > blocks_end - offset - length) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB database ", db_path, " is damaged: the footer of table ",
          table_path, " places its ", block, " block (", length,
          " bytes at offset ", offset, ") past the end of its ", size,
          " bytes"));
    }
  }
  return absl::OkStatus();
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
      if (!it->status().ok()) return TableError(it->status(), *path_);
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

class LevelDbTables final : public DB {
 public:
  LevelDbTables(const std::string& path, const DbOptions& options,
                std::function<void()> on_release)
      : DB(path, DbMode::kRead),
        options_(options),
        on_release_(std::move(on_release)) {}
  ~LevelDbTables() override { Release(); }

  absl::Status Open() {
    JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path()));
    // CURRENT names the descriptor.
    const std::string current_path = JoinPath(path(), kLevelDbCurrentFile);
    JG_ASSIGN_OR_RETURN(std::string current, ReadFileToString(current_path));
    absl::string_view manifest_name = current;
    if (!absl::ConsumeSuffix(&manifest_name, "\n") ||
        !absl::StartsWith(manifest_name, kLevelDbManifestPrefix) ||
        manifest_name.find('/') != absl::string_view::npos) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB file ", current_path, " is damaged: it does not name a ",
          kLevelDbManifestPrefix, "* file"));
    }
    const std::string manifest_path = JoinPath(path(), manifest_name);
    JG_ASSIGN_OR_RETURN(bool manifest_exists, PathExists(manifest_path));
    if (!manifest_exists) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB database ", path(), " is damaged: ", kLevelDbCurrentFile,
          " names ", manifest_name, ", which does not exist"));
    }
    JG_ASSIGN_OR_RETURN(std::string manifest, ReadFileToString(manifest_path));
    JG_ASSIGN_OR_RETURN(std::vector<std::string> records,
                        ReadLogRecords(manifest_path, manifest));
    JG_ASSIGN_OR_RETURN(auto live, LiveTables(manifest_path, records));

    // Files on disk by number: tables and logs.
    std::map<uint64_t, std::string> tables;
    for (const std::string& name : names) {
      absl::string_view stem = name;
      uint64_t number = 0;
      const std::string file = JoinPath(path(), name);
      if (absl::ConsumeSuffix(&stem, ".log") &&
          absl::SimpleAtoi(stem, &number)) {
        struct stat st;
        if (::stat(file.c_str(), &st) == 0 && st.st_size > 0) {
          // Data that only LevelDB's recovery can read.
          return absl::UnimplementedError(absl::StrCat(
              "LevelDB database ", path(), " has a non-empty log ", name));
        }
      } else if ((absl::ConsumeSuffix(&stem, ".ldb") ||
                  absl::ConsumeSuffix(&stem, ".sst")) &&
                 absl::SimpleAtoi(stem, &number)) {
        tables[number] = file;
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
      struct stat st;
      if (::stat(found->second.c_str(), &st) != 0 ||
          static_cast<uint64_t>(st.st_size) != size) {
        return absl::DataLossError(absl::StrCat(
            "LevelDB database ", path(), " is damaged: table ", found->second,
            " has ", st.st_size, " bytes, its descriptor records ", size));
      }
      leveldb::RandomAccessFile* file = nullptr;
      leveldb::Status s =
          BlockCheckingTableEnv()->NewRandomAccessFile(found->second, &file);
      if (!s.ok()) return TableError(s, path());
      files_.emplace_back(file);
      JG_RETURN_IF_ERROR(CheckTableFooter(file, size, path(), found->second));
      leveldb::Table* table = nullptr;
      s = leveldb::Table::Open(table_options, file, size, &table);
      if (!s.ok()) return TableError(s, path());
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
      if (!it->status().ok()) return TableError(it->status(), path());
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
    return VerifyLevelDbFileList(path(), check);
  }

 private:
  void Release() {
    tables_.clear();
    files_.clear();
    if (on_release_) std::exchange(on_release_, nullptr)();
  }

  const DbOptions options_;
  std::function<void()> on_release_;
  std::vector<std::unique_ptr<leveldb::RandomAccessFile>> files_;
  std::vector<std::unique_ptr<leveldb::Table>> tables_;  // before files_ dies
  // The internal keys of each table's first and last entries, from the
  // descriptor.
  std::vector<std::pair<std::string, std::string>> ranges_;
};

}  // namespace

absl::Status VerifyLevelDbFileList(const std::string& path,
                                   const DB::FileCheck& check) {
  const std::string list_path = JoinPath(path, kDbFileListName);
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(list_path));
  if (!exists) {
    if (!check.record_required) return absl::OkStatus();
    return absl::DataLossError(
        absl::StrCat("LevelDB database ", path, " is damaged: its file list ",
                     kDbFileListName,
                     " is missing (its blob index says the list was written)"));
  }
  JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(list_path));
  JG_ASSIGN_OR_RETURN(
      Unframed unframed,
      UnframeChecksummed(bytes, absl::StrCat("file list ", list_path)));
  DbFileList list;
  if (!list.ParseFromString(unframed.payload)) {
    return absl::DataLossError(
        absl::StrCat("file list ", list_path, " does not parse"));
  }
  // A log or table the database was not written with would be read too
  // (LevelDB's recovery replays every log it finds).
  std::set<std::string> listed;
  for (const DbFile& file : list.file()) listed.insert(file.name());
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    absl::string_view stem = name;
    uint64_t number = 0;
    const bool leveldb_data = (absl::ConsumeSuffix(&stem, ".log") ||
                               absl::ConsumeSuffix(&stem, ".ldb") ||
                               absl::ConsumeSuffix(&stem, ".sst")) &&
                              absl::SimpleAtoi(stem, &number);
    if (leveldb_data && listed.count(name) == 0) {
      return absl::DataLossError(
          absl::StrCat("LevelDB database ", path, " is damaged: it holds ",
                       name, ", which it was not written with (",
                       kDbFileListName, " does not list it)"));
    }
  }
  for (const DbFile& file : list.file()) {
    const std::string file_path = JoinPath(path, file.name());
    struct stat st;
    if (file.name().find('/') != std::string::npos ||
        ::stat(file_path.c_str(), &st) != 0) {
      return absl::DataLossError(absl::StrCat("LevelDB database ", path,
                                              " is damaged: its file ",
                                              file.name(), " is missing"));
    }
    if (st.st_size != file.size()) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB database ", path, " is damaged: ", file_path, " has ",
          st.st_size, " bytes, ", file.size(), " were written"));
    }
    if (!check.read_contents) continue;
    JG_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(file_path));
    const uint32_t crc = Crc32c(contents);
    if (crc != file.crc32c()) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB database ", path, " is damaged: ", file_path,
          " has CRC-32C ", absl::Hex(crc, absl::kZeroPad8), ", ",
          absl::Hex(file.crc32c(), absl::kZeroPad8), " was written"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteLevelDbFileList(
    const std::string& path,
    const std::function<std::optional<WrittenFile>(const std::string&)>&
        recorded) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  DbFileList list;
  for (const std::string& name : names) {
    if (name == kDbFileListName) continue;
    const std::string file = JoinPath(path, name);
    std::optional<WrittenFile> written = recorded(file);
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("stat ", file));
    }
    if (!written.has_value() ||
        written->size != static_cast<uint64_t>(st.st_size)) {
      JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(file));
      written = WrittenFile{bytes.size(), Crc32c(bytes)};
    }
    DbFile* entry = list.add_file();
    entry->set_name(name);
    entry->set_size(static_cast<int64_t>(written->size));
    entry->set_crc32c(written->crc);
  }
  return WriteFileAtomically(JoinPath(path, kDbFileListName),
                             FrameChecksummed(list.SerializeAsString()));
}

leveldb::Env* BlockCheckingTableEnv() {
  static BlockCheckingEnv* const env = new BlockCheckingEnv();
  return env;
}

absl::Status CheckLevelDbTableFooters(const std::string& path) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, ".ldb") && !absl::EndsWith(name, ".sst")) {
      continue;
    }
    const std::string table_path = JoinPath(path, name);
    leveldb::RandomAccessFile* raw = nullptr;
    leveldb::Status s =
        leveldb::Env::Default()->NewRandomAccessFile(table_path, &raw);
    if (!s.ok()) return TableError(s, path);
    std::unique_ptr<leveldb::RandomAccessFile> file(raw);
    uint64_t size = 0;
    s = leveldb::Env::Default()->GetFileSize(table_path, &size);
    if (!s.ok()) return TableError(s, path);
    JG_RETURN_IF_ERROR(CheckTableFooter(file.get(), size, path, table_path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DB>> OpenLevelDbTables(
    const std::string& path, const DbOptions& options,
    std::function<void()> on_release) {
  auto db =
      std::make_unique<LevelDbTables>(path, options, std::move(on_release));
  JG_RETURN_IF_ERROR(db->Open());
  return std::unique_ptr<DB>(std::move(db));
}

}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_table_checks.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/leveldb_format.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "leveldb/env.h"
#include "leveldb/slice.h"
#include "leveldb/status.h"

namespace jobgraph {
namespace {

using leveldb_format::GetVarint64;
using leveldb_format::kBlockTrailerSize;
using leveldb_format::kTableFooterSize;
using leveldb_format::LoadLE32;

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

}  // namespace

absl::Status LevelDbTableError(const leveldb::Status& status,
                               const std::string& path) {
  return absl::DataLossError(
      absl::StrCat("read LevelDB database ", path, ": ", status.ToString()));
}

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
  if (!s.ok()) return LevelDbTableError(s, db_path);
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

std::unique_ptr<leveldb::RandomAccessFile> NewBlockCheckingFile(
    std::unique_ptr<leveldb::RandomAccessFile> file, uint64_t size,
    std::string name) {
  return std::make_unique<BlockCheckingFile>(std::move(file), size,
                                             std::move(name));
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
    if (!s.ok()) return LevelDbTableError(s, path);
    std::unique_ptr<leveldb::RandomAccessFile> file(raw);
    uint64_t size = 0;
    s = leveldb::Env::Default()->GetFileSize(table_path, &size);
    if (!s.ok()) return LevelDbTableError(s, path);
    JG_RETURN_IF_ERROR(CheckTableFooter(file.get(), size, path, table_path));
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

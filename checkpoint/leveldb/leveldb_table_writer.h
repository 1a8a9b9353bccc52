// The file writers of the direct LevelDB writer (leveldb_direct.h): a table
// file in LevelDB's table format and a one-record log file (a MANIFEST-*
// file), over an output file that records the size and CRC-32C of what it
// wrote. Internal to the LevelDB adapter.
//
// Thread-compatible: each object is used by one thread at a time.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_WRITER_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/staged_direct_writer.h"

namespace jobgraph {

// A new file being written: with `direct_io`, through a StagedDirectWriter
// (past the page cache) where the file system allows it; otherwise small
// appends gathered into one write(2) and large ones written from the
// caller's memory. The size and CRC-32C of everything appended are kept for
// JOBGRAPH_FILES. The create, every write and the close pass through
// io_faults. Not synced. Errors name the path.
class OutputFile {
 public:
  // Creates `path`, which must not exist. `large_direct_writes`: see
  // StagedDirectWriter::Start's `large`.
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(
      const std::string& path, bool direct_io = false,
      bool large_direct_writes = false);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Closes the file if Close() did not; what was gathered is lost.
  ~OutputFile();

  absl::Status Append(absl::string_view data);
  // Append(data) for a caller that has the CRC-32C of `data` already.
  absl::Status AppendWithCrc(absl::string_view data, uint32_t data_crc);
  // AppendWithCrc(data, data_crc) whose `data` is borrowed until Close()
  // returns or the file is destroyed: a direct file writes what it can of it
  // from the caller's memory (StagedDirectWriter::AppendBorrowed).
  absl::Status AppendBorrowed(absl::string_view data, uint32_t data_crc);
  // Bytes to append before `prefix_bytes` more and then AppendBorrowed(data)
  // so that `data` is written from the caller's memory; 0 unless direct().
  size_t PaddingToBorrow(size_t prefix_bytes, absl::string_view data) const;
  absl::Status Close();

  const std::string& path() const { return path_; }
  // Writes past the page cache, by threads of its own (until Close).
  bool direct() const { return direct_ != nullptr; }
  uint64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }

 private:
  OutputFile(std::string path, int fd);
  absl::Status WriteGathered();
  absl::Status Write(absl::string_view data);

  const std::string path_;
  int fd_;
  std::unique_ptr<StagedDirectWriter> direct_;  // null: through the cache
  std::string gathered_;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

// One table file (LevelDB's TableBuilder, without filters or compression).
// Keys are internal keys, added in increasing order. A value of at least
// `block_size` gets a block of its own, written from the caller's memory and
// checksummed once.
class TableWriter {
 public:
  TableWriter(std::unique_ptr<OutputFile> file, uint64_t number,
              size_t block_size);
  ~TableWriter();

  // `value_crc`, when given, is the CRC-32C of `value`; a value with a block
  // of its own is then not read to checksum it.
  absl::Status Add(absl::string_view key, absl::string_view value,
                   std::optional<uint32_t> value_crc = std::nullopt);
  // Add of the value `head` + `body`, `body_crc` the CRC-32C of `body`. A
  // value with a block of its own has its body written from the caller's
  // memory, past the page cache where the file allows (then the block starts
  // after up to 4 KiB of padding, which no block handle covers and LevelDB
  // never reads), so `body` must stay valid and unchanged until Close()
  // returns or the table is destroyed.
  absl::Status AddBorrowed(absl::string_view key, absl::string_view head,
                           absl::string_view body, uint32_t body_crc);
  // Writes the last data block, the (empty) metaindex block, the index
  // block and the footer; the file is complete once Close() succeeds. Not
  // synced. Nothing is added after it.
  absl::Status FinishBlocks();
  // Waits for the file's writes and closes it. May run on another thread
  // than the one that added to the table, after FinishBlocks.
  absl::Status Close();
  // FinishBlocks(), then Close().
  absl::Status Finish();

  const OutputFile& file() const { return *file_; }
  uint64_t number() const { return number_; }
  // The first and last keys added.
  const std::string& smallest() const { return smallest_; }
  const std::string& largest() const { return largest_; }

 private:
  class BlockBuilder;
  struct BlockHandle;

  // A block of its own for the value `head` + `body`; `borrow`: `body` may
  // be written after this returns (AddBorrowed).
  absl::Status AddOwnBlock(absl::string_view key, absl::string_view head,
                           absl::string_view body, uint32_t body_crc,
                           bool borrow);
  absl::StatusOr<BlockHandle> WriteBlock(absl::string_view contents);
  absl::Status FlushDataBlock();
  void AddIndexEntry(absl::string_view key, const BlockHandle& handle);

  const std::unique_ptr<OutputFile> file_;
  const uint64_t number_;
  const size_t block_size_;
  const std::unique_ptr<BlockBuilder> data_block_;
  const std::unique_ptr<BlockBuilder> index_block_;
  std::string smallest_;
  std::string largest_;
};

// The bytes of a LevelDB log file holding the one record `record`,
// fragmented over 32 KiB blocks as LevelDB's log writer does.
std::string LogFileWithRecord(absl::string_view record);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_WRITER_H_

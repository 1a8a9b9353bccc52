// Checks of LevelDB table files that LevelDB's own table reader leaves out,
// made before it parses the bytes: it trusts the lengths in a block's
// entries (their 32-bit sum can overflow, and a damaged block makes it copy
// gigabytes from past the block) and the block handles of a table's footer
// (it allocates whatever size the footer names). Both were found by
// ckpt_fuzzer. Used by every reader of finished databases: the read-only
// reader (leveldb_tables.cc) and LevelDB's DB::Open on a copy
// (leveldb_native.cc, leveldb_db.cc). Internal to the LevelDB adapter.
//
// BlockCheckingTableEnv is one Env for the whole process, never destroyed,
// and thread-safe, as LevelDB requires of an Env; the files it opens belong
// to the caller, as leveldb::Env says. The functions are thread-safe.

#ifndef JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_CHECKS_H_
#define JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_CHECKS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "leveldb/env.h"
#include "leveldb/status.h"

namespace jobgraph {

// An Env that reads table files (*.ldb, *.sst) checking the structure of
// every block before LevelDB parses it, whose own block reader trusts
// damaged entries with out-of-bounds copies; the default Env otherwise.
// Lives for the whole process; thread-safe.
leveldb::Env* BlockCheckingTableEnv();

// `file`, a table file of `size` bytes named `name`, read with the checks
// BlockCheckingTableEnv's table files make.
std::unique_ptr<leveldb::RandomAccessFile> NewBlockCheckingFile(
    std::unique_ptr<leveldb::RandomAccessFile> file, uint64_t size,
    std::string name);

// DataLoss naming the table when the footer of the table file `file`
// (`size` bytes, at `table_path` in the database at `db_path`) places a
// block past the end of the file, which LevelDB's Table::Open would trust
// with an allocation of that size. A footer that does not decode is left to
// Table::Open to report.
absl::Status CheckTableFooter(leveldb::RandomAccessFile* file, uint64_t size,
                              const std::string& db_path,
                              const std::string& table_path);

// CheckTableFooter for every table file of the directory `path`.
absl::Status CheckLevelDbTableFooters(const std::string& path);

// A failed read of a finished database's tables (`status` not OK) as
// DataLoss naming the database at `path`: its files cannot be read back.
absl::Status LevelDbTableError(const leveldb::Status& status,
                               const std::string& path);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_LEVELDB_LEVELDB_TABLE_CHECKS_H_

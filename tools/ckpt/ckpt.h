// `ckpt`: inspects, verifies and cleans jobgraph checkpoint directories
// (format: checkpoint/FORMAT.md).
//
//   ckpt list DIR [--format=json] [--local=DIR[,DIR...]]
//                                          every epoch: committed, uncommitted
//                                          or incomplete, nodes, blobs, bytes;
//                                          with --local, which tiers hold it
//   ckpt show DB [--format=json] [--keys]  the blobs of one database
//   ckpt dump DB BLOB [--max_elements=N]   one blob's values
//   ckpt verify DIR [--epoch=N] [--format=json]
//                                          every value's CRC-32C
//   ckpt diff DB1 DB2                      blobs added, removed, changed
//   ckpt gc DIR --keep_last=N [--keep_every=K] [--dry_run] [--force]
//                                          retention and leftover temporaries
//   ckpt recover DIR [--dry_run]           rebuilds a deleted or damaged
//                                          commit log from the databases
//   ckpt flush LOCAL SHARED [--epoch=N]    copies a committed epoch of a
//                                          local tier to the shared directory
//   --db_type=T overrides the database type (default: the commit log's, else
//   kDefaultDbType).
//
// Incremental saves (checkpoint/FORMAT.md 4.7) list some blobs by
// reference: the database of the same node for an earlier epoch holds
// their values. Every command follows references: `show` and `list` say
// which epochs hold what (a column and fields that appear only when some
// database references another, so the output for other checkpoints is as
// it was), `verify` and `recover` check what an epoch reads from other
// databases as part of it, `dump` and `diff` read values through their
// references, and `gc` keeps every epoch that a kept epoch's databases
// reference, by the commit log and by the blob indexes.
//
// Local tiers (CheckpointOptions::local_directory) are checkpoint
// directories of the same format, so every command works on them. `flush`
// and `list --local` also judge a local tier against its shared directory
// as a resume does (MergeTierLogs, checkpoint/tier/tier_log.h): the job is
// the one that the local commit log's newest entry lists, and its local
// epochs count only where they continue the shared history.
//
// Exit codes: kExitOk; kExitProblem when verification finds damage (or a
// committed database is missing), diff finds a difference, or a flush finds
// a damaged local copy; kExitUsage for bad usage, for input that cannot be
// read (a missing directory, one that is not a checkpoint, a database
// without a blob index) and for a flush refused (a job runs, or the epoch
// does not continue the shared history or is older than its newest).
//
// Every command is a function that writes its report to `out` and errors to
// `err` and returns the exit code, so tests run them in-process. RunCkpt
// parses a command line into them.
//
// Reading a database writes nothing into it (for LevelDB databases whose data
// is all in tables, as jobgraph's saves leave them; leveldb_db.h). `recover`,
// `gc` and `flush` are the only commands that change a directory.
//
// Thread-compatible: commands share no state, but two commands must not open
// the same database at once (a path may be open through one DB at a time,
// db.h).

#ifndef JOBGRAPH_TOOLS_CKPT_CKPT_H_
#define JOBGRAPH_TOOLS_CKPT_CKPT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint/db/db_registry.h"

namespace jobgraph {
namespace ckpt {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;

enum class OutputFormat { kText, kJson };

struct ListOptions {
  std::string dir;
  OutputFormat format = OutputFormat::kText;
  std::string db_type;  // empty: the commit log's, else kDefaultDbType
  // Local tiers whose shared directory `dir` is. When set, every epoch also
  // says which tiers hold a committed copy of it (a TIERS column; "tiers"
  // in JSON): "shared", and each local tier that holds the same commit.
  // Epochs that only a local tier holds, committed there and continuing
  // the shared history, are listed as committed with only that tier; the
  // local epochs that a resume ignores are named after the table, with
  // why. Empty: the output is that of a directory without tiers.
  std::vector<std::string> local_dirs;
};
int List(const ListOptions& options, std::ostream& out, std::ostream& err);

struct ShowOptions {
  std::string db;
  OutputFormat format = OutputFormat::kText;
  // Text: also one row per database key with its size and CRC-32C (JSON
  // always lists them).
  bool keys = false;
  std::string db_type = kDefaultDbType;
};
int Show(const ShowOptions& options, std::ostream& out, std::ostream& err);

struct DumpOptions {
  std::string db;
  std::string blob;
  // Tensor elements (and, for strings, 8 times as many bytes) printed.
  int64_t max_elements = 20;
  std::string db_type = kDefaultDbType;
};
int Dump(const DumpOptions& options, std::ostream& out, std::ostream& err);

struct VerifyOptions {
  std::string dir;
  std::optional<int64_t> epoch;  // unset: every committed epoch
  OutputFormat format = OutputFormat::kText;
  std::string db_type;  // empty: the commit log's, else kDefaultDbType
};
int Verify(const VerifyOptions& options, std::ostream& out, std::ostream& err);

struct DiffOptions {
  std::string db1;
  std::string db2;
  std::string db_type = kDefaultDbType;
};
int Diff(const DiffOptions& options, std::ostream& out, std::ostream& err);

struct GcOptions {
  std::string dir;
  // Retention (checkpoint/commit/retention.h): keep the newest keep_last
  // committed epochs (0: all) and every epoch divisible by keep_every (0: none
  // extra).
  int keep_last = 0;
  int keep_every = 0;
  // Print what would be removed; remove nothing.
  bool dry_run = false;
  // Remove temporaries even when their process looks alive (TempInUse).
  bool force = false;
};
int Gc(const GcOptions& options, std::ostream& out, std::ostream& err);

struct RecoverOptions {
  std::string dir;
  // Print the commit log that would be written; write nothing.
  bool dry_run = false;
  std::string db_type;  // empty: the commit log's, else kDefaultDbType
};
// Rebuilds the commit log of a directory whose log is deleted or damaged: an
// epoch is listed when every node seen in the directory has a database of
// it that verifies (with the values it holds by reference) and every epoch
// it references is listed too; its entry's references are the union of its
// databases'. An intact log is never touched; a damaged one is kept as
// "MANIFEST.jobgraph.damaged". kExitProblem when no epoch can be recovered.
int Recover(const RecoverOptions& options, std::ostream& out,
            std::ostream& err);

struct FlushOptions {
  // The local tier and the shared directory (created if missing).
  std::string local;
  std::string shared;
  // Unset: the newest epoch that the local tier holds and that continues
  // the shared history.
  std::optional<int64_t> epoch;
  std::string db_type;  // empty: the local commit log's, else kDefaultDbType
};
// Flushes one committed epoch of a local tier to its shared directory
// (FlushEpoch, checkpoint/tier/flush.h), for a job that died before its
// flush, or to publish a local epoch; no retention is applied. It first
// takes every node's NodeLock in both directories, and refuses (kExitUsage,
// naming the holder) while a job holds one. An epoch already in SHARED as
// the same commit is not copied (a mark of a run preempted after its last
// epoch is carried over). A requested epoch that does not continue the
// shared history is refused: committing it would rewrite that history.
// kExitProblem when a local database does not match its record (nothing
// reaches SHARED's commit log).
int Flush(const FlushOptions& options, std::ostream& out, std::ostream& err);

// Runs the command line `args` (without the program name). Relative paths
// are resolved against `working_dir` when it is not empty (`bazel run` starts
// the tool in its runfiles; main passes BUILD_WORKING_DIRECTORY).
int RunCkpt(const std::vector<std::string>& args,
            const std::string& working_dir, std::ostream& out,
            std::ostream& err);

// The usage message listing every command.
std::string Usage();

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_CKPT_H_

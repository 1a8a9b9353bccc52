// Command-line parsing of `ckpt`; the commands live in the *_command.cc
// files and db_commands.cc.

#include "tools/ckpt/ckpt.h"

#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace ckpt {
namespace {

// One command's arguments: positionals in order and --name[=value] flags.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::optional<std::string>> flags;
};

// Flags may come anywhere after the command; "--" ends them, so a blob
// whose name starts with "--" can still be named. `tier_flags` are known
// flags that matter only with local tiers; an error names them apart.
absl::StatusOr<Args> SplitArgs(const std::vector<std::string>& args,
                               const std::set<std::string>& known,
                               const std::set<std::string>& tier_flags = {}) {
  Args result;
  bool flags_done = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || !absl::StartsWith(arg, "--")) {
      result.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    const size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? eq : eq - 2);
    if (known.count(name) == 0 && tier_flags.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", name, " for `", args[0], "`",
          known.empty() ? " (it takes none)"
                        : absl::StrCat(" (it takes --",
                                       absl::StrJoin(known, ", --"), ")"),
          tier_flags.empty()
              ? ""
              : absl::StrCat(" and, for local tiers, --",
                             absl::StrJoin(tier_flags, ", --"))));
    }
    if (result.flags.count(name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " is given twice"));
    }
    result.flags[name] = eq == std::string::npos
                             ? std::nullopt
                             : std::optional<std::string>(arg.substr(eq + 1));
  }
  return result;
}

absl::Status CheckPositional(const Args& args, const std::string& command,
                             const std::vector<std::string>& names) {
  if (args.positional.size() == names.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "`", command, "` takes ", names.size(), " argument",
      names.size() == 1 ? "" : "s", " (", absl::StrJoin(names, " "), "), got ",
      args.positional.size()));
}

absl::StatusOr<std::optional<std::string>> StringFlag(const Args& args,
                                                      const std::string& name) {
  auto it = args.flags.find(name);
  if (it == args.flags.end()) return std::optional<std::string>();
  if (!it->second.has_value() || it->second->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", name, " needs a value: --", name, "=..."));
  }
  return it->second;
}

absl::StatusOr<std::optional<int64_t>> IntFlag(const Args& args,
                                               const std::string& name,
                                               int64_t min, int64_t max) {
  JG_ASSIGN_OR_RETURN(std::optional<std::string> text, StringFlag(args, name));
  if (!text.has_value()) return std::optional<int64_t>();
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", name, "=", *text,
                                                   " must be an integer in [",
                                                   min, ", ", max, "]"));
  }
  return std::optional<int64_t>(value);
}

absl::StatusOr<bool> BoolFlag(const Args& args, const std::string& name) {
  auto it = args.flags.find(name);
  if (it == args.flags.end()) return false;
  if (!it->second.has_value() || *it->second == "true" || *it->second == "1") {
    return true;
  }
  if (*it->second == "false" || *it->second == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "flag --", name, "=", *it->second, " must be true or false"));
}

absl::StatusOr<OutputFormat> FormatFlag(const Args& args) {
  JG_ASSIGN_OR_RETURN(std::optional<std::string> format,
                      StringFlag(args, "format"));
  if (!format.has_value() || *format == "text") return OutputFormat::kText;
  if (*format == "json") return OutputFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("flag --format=", *format, " must be text or json"));
}

// --db_type, or `fallback` when absent.
absl::StatusOr<std::string> DbTypeFlag(const Args& args,
                                       const std::string& fallback) {
  JG_ASSIGN_OR_RETURN(std::optional<std::string> type,
                      StringFlag(args, "db_type"));
  return type.value_or(fallback);
}

// Parses the command line and runs the command; a parse error is returned
// as InvalidArgument.
absl::StatusOr<int> Dispatch(const std::vector<std::string>& args,
                             const std::string& working_dir, std::ostream& out,
                             std::ostream& err) {
  const std::string& command = args[0];
  auto path = [&](const std::string& p) {
    if (working_dir.empty() || absl::StartsWith(p, "/")) return p;
    return JoinPath(working_dir, p);
  };
  if (command == "list") {
    JG_ASSIGN_OR_RETURN(Args a,
                        SplitArgs(args, {"format", "db_type"}, {"local"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DIR"}));
    ListOptions options;
    options.dir = path(a.positional[0]);
    JG_ASSIGN_OR_RETURN(options.format, FormatFlag(a));
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, ""));
    JG_ASSIGN_OR_RETURN(std::optional<std::string> local,
                        StringFlag(a, "local"));
    if (local.has_value()) {
      for (absl::string_view dir :
           absl::StrSplit(*local, ',', absl::SkipEmpty())) {
        options.local_dirs.push_back(path(std::string(dir)));
      }
      if (options.local_dirs.empty()) {
        return absl::InvalidArgumentError(
            "flag --local needs a value: --local=DIR[,DIR...]");
      }
    }
    return List(options, out, err);
  }
  if (command == "show") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"format", "keys", "db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DB"}));
    ShowOptions options;
    options.db = path(a.positional[0]);
    JG_ASSIGN_OR_RETURN(options.format, FormatFlag(a));
    JG_ASSIGN_OR_RETURN(options.keys, BoolFlag(a, "keys"));
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, options.db_type));
    return Show(options, out, err);
  }
  if (command == "dump") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"max_elements", "db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DB", "BLOB"}));
    DumpOptions options;
    options.db = path(a.positional[0]);
    options.blob = a.positional[1];
    JG_ASSIGN_OR_RETURN(
        std::optional<int64_t> max_elements,
        IntFlag(a, "max_elements", 0, std::numeric_limits<int64_t>::max() / 8));
    options.max_elements = max_elements.value_or(options.max_elements);
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, options.db_type));
    return Dump(options, out, err);
  }
  if (command == "verify") {
    JG_ASSIGN_OR_RETURN(Args a,
                        SplitArgs(args, {"epoch", "format", "db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DIR"}));
    VerifyOptions options;
    options.dir = path(a.positional[0]);
    JG_ASSIGN_OR_RETURN(
        options.epoch,
        IntFlag(a, "epoch", 0, std::numeric_limits<int64_t>::max()));
    JG_ASSIGN_OR_RETURN(options.format, FormatFlag(a));
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, ""));
    return Verify(options, out, err);
  }
  if (command == "diff") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DB1", "DB2"}));
    DiffOptions options;
    options.db1 = path(a.positional[0]);
    options.db2 = path(a.positional[1]);
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, options.db_type));
    return Diff(options, out, err);
  }
  if (command == "gc") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"keep_last", "keep_every",
                                                 "dry_run", "force"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DIR"}));
    GcOptions options;
    options.dir = path(a.positional[0]);
    constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
    JG_ASSIGN_OR_RETURN(std::optional<int64_t> keep_last,
                        IntFlag(a, "keep_last", 0, kMaxInt));
    if (!keep_last.has_value()) {
      // Deleting checkpoints should never rest on a default.
      return absl::InvalidArgumentError(
          "`gc` needs --keep_last=N (the newest N committed epochs are kept; "
          "0 keeps every committed epoch and only removes leftovers)");
    }
    options.keep_last = static_cast<int>(*keep_last);
    JG_ASSIGN_OR_RETURN(std::optional<int64_t> keep_every,
                        IntFlag(a, "keep_every", 0, kMaxInt));
    options.keep_every = static_cast<int>(keep_every.value_or(0));
    JG_ASSIGN_OR_RETURN(options.dry_run, BoolFlag(a, "dry_run"));
    JG_ASSIGN_OR_RETURN(options.force, BoolFlag(a, "force"));
    return Gc(options, out, err);
  }
  if (command == "recover") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"dry_run", "db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"DIR"}));
    RecoverOptions options;
    options.dir = path(a.positional[0]);
    JG_ASSIGN_OR_RETURN(options.dry_run, BoolFlag(a, "dry_run"));
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, ""));
    return Recover(options, out, err);
  }
  if (command == "flush") {
    JG_ASSIGN_OR_RETURN(Args a, SplitArgs(args, {"epoch", "db_type"}));
    JG_RETURN_IF_ERROR(CheckPositional(a, command, {"LOCAL", "SHARED"}));
    FlushOptions options;
    options.local = path(a.positional[0]);
    options.shared = path(a.positional[1]);
    JG_ASSIGN_OR_RETURN(
        options.epoch,
        IntFlag(a, "epoch", 0, std::numeric_limits<int64_t>::max()));
    JG_ASSIGN_OR_RETURN(options.db_type, DbTypeFlag(a, ""));
    return Flush(options, out, err);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown command '", command, "'"));
}

}  // namespace

std::string Usage() {
  return absl::StrCat(R"(usage: ckpt <command> [arguments] [flags]

Inspects, verifies, cleans and flushes jobgraph checkpoints
(checkpoint/FORMAT.md).

commands:
  list DIR [--format=json] [--local=DIR[,DIR...]]
      Every epoch in checkpoint directory DIR: "committed" (listed in
      MANIFEST.jobgraph; for a preemption checkpoint, where the run stopped
      and the signal, e.g. preempted mid-epoch (SIGTERM)), "uncommitted" (a <node>.<epoch> database that
      is not listed) or "incomplete" (a save's leftover temporary), with its nodes,
      blob count, value bytes, save time and time. Where some epoch holds
      blobs by reference (incremental saves), WRITTEN gives the bytes its
      save wrote and REFERENCED the bytes held in other epochs' databases
      and those epochs; a reference to a database that is missing, or not
      committed, is a problem. With --local, DIR is the shared directory of
      a job with local tiers (CheckpointOptions::local_directory), and a
      TIERS column says which tiers hold a committed copy of each epoch:
      "shared", and "local:<dir>" for each local tier that holds the same
      commit. Epochs committed only in a local tier (not flushed yet) are
      listed too when they continue the shared history, as a resume counts
      them; a line after the table names the local epochs that do not, and
      why.
  show DB [--format=json] [--keys]
      Every blob of database DB: name, type, dtype, shape, number of values,
      bytes and CRC-32C (of all its values in blob index order; --keys lists
      each value). For a database that holds blobs by reference, a HELD IN
      column names the epoch whose database holds each of those.
  dump DB BLOB [--max_elements=20]
      The values of one blob: tensors (at most --max_elements elements),
      strings, counters and reader cursors. A blob held by reference is read
      from the database that holds it, which a "held in" line names.
  verify DIR [--epoch=N] [--format=json]
      Checks the CRC-32C of every value of every committed epoch (or only
      epoch N) and that every committed database exists; an epoch's values
      held by reference in another epoch's database are checked there, so
      damage there is reported for every epoch that reads from it.
  diff DB1 DB2
      Blobs added, removed and changed (type, shape or any value's CRC-32C)
      from DB1 to DB2. Values held by reference are read from the databases
      that hold them.
  gc DIR --keep_last=N [--keep_every=K] [--dry_run] [--force]
      Deletes committed epochs that retention drops (never the newest, nor
      an epoch whose databases hold blobs that a kept epoch references),
      then leftover temporaries of saves (.<node>.<epoch>.tmp-*) and of commit log
      writes (MANIFEST.jobgraph.tmp-*) whose process is gone (--force: even
      if it seems alive). Touches nothing else. Run it when no job writes to
      DIR.
  recover DIR [--dry_run]
      Rebuilds a deleted or damaged commit log from the databases in DIR: an
      epoch is listed when every node seen in DIR has a database of it that
      verifies (with the values it holds by reference in other databases)
      and every epoch it references is listed too. An epoch whose databases hold a plan position is listed as
      a preemption checkpoint (a resume continues it mid-epoch); the mark of
      a run preempted after its last epoch is not in the databases and is
      lost. A damaged log is kept as MANIFEST.jobgraph.damaged; an intact
      one is never touched. Run it when no job writes to DIR.
  flush LOCAL SHARED [--epoch=N]
      Copies a committed epoch of the local tier LOCAL to the shared
      directory SHARED (created if missing) and commits it there as the
      same commit, as a job's background flush does: for a job that died
      before its flush, or to publish a local epoch. Without --epoch, the
      newest epoch that LOCAL holds and that continues SHARED's history
      (the job is the one LOCAL's newest commit lists); an epoch that
      SHARED holds already is not copied again. An epoch that does not
      continue SHARED's history, or is older than SHARED's newest epoch
      (its commit would unlist the newer ones), is refused. Every file is
      checked against its recorded size and CRC-32C: a damaged one exits
      1, and SHARED's commit log does not list the epoch. No retention
      applies to SHARED.
      Refused while a job holds a node's lock in LOCAL or SHARED: run it
      after the job stops.

flags for every command that opens databases:
  --db_type=T    database type (default: the commit log's, else )",
                      kDefaultDbType, R"()

exit codes: 0 success; 1 damage found (verify, dump, flush), databases
differ (diff) or nothing recoverable (recover); 2 bad usage, input that cannot
be read, or a flush refused (a job holds a lock, or the epoch does not
continue the shared history). verify of a directory with databases but no
commit log exits 1; of one with neither, 2 (not a checkpoint).
)");
}

int RunCkpt(const std::vector<std::string>& args,
            const std::string& working_dir, std::ostream& out,
            std::ostream& err) {
  if (args.empty()) {
    err << Usage();
    return kExitUsage;
  }
  if (args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    out << Usage();
    return kExitOk;
  }
  absl::StatusOr<int> code = Dispatch(args, working_dir, out, err);
  if (code.ok()) return *code;
  err << "ckpt: " << code.status().message() << "\n\n" << Usage();
  return kExitUsage;
}

}  // namespace ckpt
}  // namespace jobgraph

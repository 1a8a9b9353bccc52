// The commands that take a checkpoint directory: list, verify and gc.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/blob_index.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/commit_log.h"
#include "checkpoint/db.h"
#include "checkpoint/db_registry.h"
#include "checkpoint/file_util.h"
#include "checkpoint/retention.h"
#include "checkpoint/verify.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"

namespace jobgraph {
namespace ckpt {
namespace {

// Scans `dir` for a command; on failure prints the error and returns nullopt
// (the command then exits with kExitUsage).
std::optional<CheckpointDir> Scan(const std::string& dir, std::ostream& err) {
  absl::StatusOr<CheckpointDir> scanned = ScanCheckpointDir(dir);
  if (!scanned.ok()) {
    err << "ckpt: " << scanned.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(scanned);
}

std::string DbTypeFor(const CheckpointDir& dir, const std::string& flag) {
  return flag.empty() ? dir.DbType() : flag;
}

// ---------------------------------------------------------------------------
// list

// One row of `list`: an epoch's committed databases, its databases that are
// not committed, or one leftover temporary.
struct EpochRow {
  std::optional<int64_t> epoch;  // unknown for a temporary of another name
  std::string state;             // "committed", "uncommitted", "incomplete"
  std::vector<std::string> nodes;
  std::vector<std::string> paths;
  std::optional<int64_t> blobs;
  std::optional<int64_t> bytes;
  std::optional<int64_t> save_micros;
  std::optional<int64_t> time_unix_micros;
  std::vector<std::string> problems;
};

int StateRank(const std::string& state) {
  if (state == "committed") return 0;
  if (state == "uncommitted") return 1;
  return 2;
}

// Adds the database at `path` (of `node` and `epoch`) to `row`: its blob
// count and bytes from its blob index, or a problem when that cannot be read
// or belongs to another node or epoch. Blob and byte totals of a row become
// unknown once one of its databases cannot be read.
void AddDatabase(const std::string& db_type, const std::string& path,
                 const std::string& node, int64_t epoch, EpochRow* row,
                 std::optional<int64_t>* earliest_created) {
  absl::StatusOr<BlobIndex> index = ReadBlobIndexAt(db_type, path);
  if (!index.ok()) {
    row->problems.push_back(std::string(index.status().message()));
    row->blobs.reset();
    row->bytes.reset();
    return;
  }
  if (index->node() != node || index->epoch() != epoch) {
    row->problems.push_back(absl::StrCat(path, " holds node '", index->node(),
                                         "' epoch ", index->epoch(),
                                         " according to its blob index"));
  }
  if (row->blobs.has_value()) *row->blobs += index->blob_size();
  if (row->bytes.has_value()) *row->bytes += index->total_bytes();
  if (earliest_created != nullptr && index->created_unix_micros() > 0 &&
      (!earliest_created->has_value() ||
       index->created_unix_micros() < **earliest_created)) {
    *earliest_created = index->created_unix_micros();
  }
}

std::vector<EpochRow> ListRows(const CheckpointDir& dir,
                               const std::string& db_type) {
  std::vector<EpochRow> rows;
  if (dir.log_status.ok()) {
    for (const CommittedEpoch& e : dir.commit_log.epoch()) {
      EpochRow row;
      row.epoch = e.epoch();
      row.state = "committed";
      row.blobs = 0;
      row.bytes = 0;
      row.save_micros = e.save_micros();
      row.time_unix_micros = e.committed_unix_micros();
      for (const std::string& node : e.node()) {
        const std::string path = CheckpointDbPath(dir.path, node, e.epoch());
        row.nodes.push_back(node);
        row.paths.push_back(path);
        absl::StatusOr<bool> exists = PathExists(path);
        if (!exists.ok() || !*exists) {
          row.problems.push_back(
              exists.ok() ? absl::StrCat("database ", path, " is missing")
                          : std::string(exists.status().message()));
          row.blobs.reset();
          row.bytes.reset();
          continue;
        }
        AddDatabase(db_type, path, node, e.epoch(), &row, nullptr);
      }
      rows.push_back(std::move(row));
    }
  }
  // Databases the commit log does not list, one row per epoch.
  std::map<int64_t, EpochRow> uncommitted;
  for (const CheckpointDir::Database& db : dir.databases) {
    if (dir.IsCommitted(db.name.node, db.name.epoch)) continue;
    auto [it, inserted] = uncommitted.try_emplace(db.name.epoch);
    EpochRow& row = it->second;
    if (inserted) {
      row.epoch = db.name.epoch;
      row.state = "uncommitted";
      row.blobs = 0;
      row.bytes = 0;
    }
    row.nodes.push_back(db.name.node);
    row.paths.push_back(db.path);
    AddDatabase(db_type, db.path, db.name.node, db.name.epoch, &row,
                &row.time_unix_micros);
  }
  for (auto& [epoch, row] : uncommitted) rows.push_back(std::move(row));
  // Temporaries are not opened: a save may be writing them.
  for (const CheckpointDir::SaveTemp& temp : dir.save_temps) {
    EpochRow row;
    row.state = "incomplete";
    if (temp.parsed.db.has_value()) {
      row.epoch = temp.parsed.db->epoch;
      row.nodes.push_back(temp.parsed.db->node);
    }
    row.paths.push_back(temp.path);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const EpochRow& a, const EpochRow& b) {
                     const int64_t ea =
                         a.epoch.value_or(std::numeric_limits<int64_t>::max());
                     const int64_t eb =
                         b.epoch.value_or(std::numeric_limits<int64_t>::max());
                     if (ea != eb) return ea < eb;
                     return StateRank(a.state) < StateRank(b.state);
                   });
  return rows;
}

std::string OrDash(const std::optional<int64_t>& value) {
  return value.has_value() ? absl::StrCat(*value) : "-";
}

void PrintListText(const CheckpointDir& dir, const std::string& db_type,
                   const std::vector<EpochRow>& rows, std::ostream& out) {
  out << "checkpoint " << dir.path << " (";
  if (dir.log_status.ok()) {
    out << db_type << ", format version " << dir.commit_log.format_version();
  } else {
    out << "no " << kCommitLogFileName << ": nothing is committed";
  }
  out << ")\n";
  TextTable table({"EPOCH", "STATE", "NODES", "BLOBS", "BYTES", "SAVE", "TIME"},
                  {true, false, false, true, true, true, false});
  int committed = 0;
  int uncommitted = 0;
  int incomplete = 0;
  for (const EpochRow& row : rows) {
    if (row.state == "committed") ++committed;
    if (row.state == "uncommitted") ++uncommitted;
    if (row.state == "incomplete") ++incomplete;
    std::vector<std::string> nodes;
    for (const std::string& node : row.nodes) nodes.push_back(Printable(node));
    if (nodes.empty()) nodes.push_back("?");
    const bool unknown = row.state != "incomplete" && !row.blobs.has_value();
    table.AddRow(
        {row.epoch.has_value() ? absl::StrCat(*row.epoch) : "?", row.state,
         absl::StrJoin(nodes, ","), unknown ? "?" : OrDash(row.blobs),
         unknown ? "?" : OrDash(row.bytes),
         row.save_micros.has_value() ? FormatMicros(*row.save_micros) : "-",
         FormatUnixMicros(row.time_unix_micros.value_or(0))});
  }
  if (!table.empty()) table.Print(out);
  std::string summary =
      absl::StrCat(committed, " committed epoch", committed == 1 ? "" : "s");
  if (committed > 0) {
    absl::StrAppend(
        &summary, " (newest ",
        dir.commit_log.epoch(dir.commit_log.epoch_size() - 1).epoch(), ")");
  }
  absl::StrAppend(&summary, ", ", uncommitted, " uncommitted, ", incomplete,
                  " incomplete");
  out << summary << "\n";
  bool header = false;
  for (const EpochRow& row : rows) {
    for (const std::string& problem : row.problems) {
      if (!header) out << "problems:\n";
      header = true;
      out << "  epoch " << OrDash(row.epoch) << " (" << row.state
          << "): " << problem << "\n";
    }
  }
  if (!dir.save_temps.empty() || !dir.commit_log_temps.empty()) {
    out << "leftover temporaries (`ckpt gc` removes them):\n";
    for (const auto& temp : dir.save_temps) {
      out << "  " << Printable(temp.basename) << "\n";
    }
    for (const auto& temp : dir.commit_log_temps) {
      out << "  " << Printable(temp.basename) << "\n";
    }
  }
}

void PrintListJson(const CheckpointDir& dir, const std::string& db_type,
                   const std::vector<EpochRow>& rows, std::ostream& out) {
  JsonWriter json(out);
  json.BeginObject();
  json.Field("dir", dir.path);
  json.Field("commit_log", dir.log_status.ok() ? "ok" : "missing");
  json.Field("format_version",
             dir.log_status.ok()
                 ? std::optional<int64_t>(dir.commit_log.format_version())
                 : std::nullopt);
  json.Field("db_type", db_type);
  json.Key("epochs");
  json.BeginArray();
  for (const EpochRow& row : rows) {
    json.BeginObject();
    json.Field("epoch", row.epoch);
    json.Field("state", row.state);
    json.StringArray("nodes", row.nodes);
    json.StringArray("paths", row.paths);
    json.Field("blobs", row.blobs);
    json.Field("bytes", row.bytes);
    json.Field("save_micros", row.save_micros);
    json.Field("time_unix_micros", row.time_unix_micros);
    json.StringArray("problems", row.problems);
    json.EndObject();
  }
  json.EndArray();
  std::vector<std::string> temps;
  for (const auto& temp : dir.save_temps) temps.push_back(temp.basename);
  for (const auto& temp : dir.commit_log_temps) temps.push_back(temp.basename);
  json.StringArray("leftover_temporaries", temps);
  json.EndObject();
  out << "\n";
}

// ---------------------------------------------------------------------------
// verify

struct DbCheck {
  std::string node;
  std::string path;
  std::string status;  // "ok", "missing", "damaged", "unreadable"
  std::string error;
  int64_t blobs = 0;
  int64_t bytes = 0;
};

DbCheck CheckDb(const std::string& db_type, const std::string& dir,
                const std::string& node, int64_t epoch) {
  DbCheck check;
  check.node = node;
  check.path = CheckpointDbPath(dir, node, epoch);
  absl::StatusOr<bool> exists = PathExists(check.path);
  if (!exists.ok()) {
    check.status = "unreadable";
    check.error = std::string(exists.status().message());
    return check;
  }
  if (!*exists) {
    check.status = "missing";
    check.error =
        absl::StrCat("committed database ", check.path, " does not exist");
    return check;
  }
  absl::StatusOr<BlobIndex> index =
      VerifyCheckpointDb(db_type, check.path, node, epoch);
  if (!index.ok()) {
    // DataLoss is damage; anything else (a lock held by a running job, an
    // I/O error) means the database could not be checked.
    check.status = absl::IsDataLoss(index.status()) ? "damaged" : "unreadable";
    check.error = std::string(index.status().message());
    return check;
  }
  check.status = "ok";
  check.blobs = index->blob_size();
  check.bytes = index->total_bytes();
  return check;
}

}  // namespace

int List(const ListOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = Scan(options.dir, err);
  if (!dir.has_value()) return kExitUsage;
  if (!dir->log_status.ok() && !absl::IsNotFound(dir->log_status)) {
    err << "ckpt: " << dir->log_status.message()
        << " (`ckpt verify` reports damage)\n";
    return kExitUsage;
  }
  const std::string db_type = DbTypeFor(*dir, options.db_type);
  const std::vector<EpochRow> rows = ListRows(*dir, db_type);
  if (options.format == OutputFormat::kJson) {
    PrintListJson(*dir, db_type, rows, out);
  } else {
    PrintListText(*dir, db_type, rows, out);
  }
  return kExitOk;
}

int Verify(const VerifyOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = Scan(options.dir, err);
  if (!dir.has_value()) return kExitUsage;
  const absl::Status& log_status = dir->log_status;
  const bool log_damaged = absl::IsDataLoss(log_status);
  if (!log_status.ok() && !absl::IsNotFound(log_status) && !log_damaged) {
    err << "ckpt: " << log_status.message() << "\n";
    return kExitUsage;
  }
  if (options.epoch.has_value() && !log_damaged) {
    bool found = false;
    if (log_status.ok()) {
      for (const CommittedEpoch& e : dir->commit_log.epoch()) {
        found = found || e.epoch() == *options.epoch;
      }
    }
    if (!found) {
      err << "ckpt: epoch " << *options.epoch << " is not committed in "
          << dir->path << " (committed epochs: "
          << (log_status.ok() ? CommittedEpochList(dir->commit_log) : "none")
          << ")\n";
      return kExitUsage;
    }
  }

  const std::string db_type = DbTypeFor(*dir, options.db_type);
  std::vector<std::pair<int64_t, std::vector<DbCheck>>> epochs;
  int databases = 0;
  std::map<std::string, int> counts;  // by status
  if (log_status.ok()) {
    for (const CommittedEpoch& e : dir->commit_log.epoch()) {
      if (options.epoch.has_value() && e.epoch() != *options.epoch) continue;
      std::vector<DbCheck> checks;
      for (const std::string& node : e.node()) {
        checks.push_back(CheckDb(db_type, dir->path, node, e.epoch()));
        ++counts[checks.back().status];
        ++databases;
      }
      epochs.emplace_back(e.epoch(), std::move(checks));
    }
  }
  const int failures = databases - counts["ok"];
  const bool ok = failures == 0 && !log_damaged;

  if (options.format == OutputFormat::kJson) {
    JsonWriter json(out);
    json.BeginObject();
    json.Field("dir", dir->path);
    json.Field("ok", ok);
    json.Field("commit_log", log_status.ok() ? "ok"
                             : log_damaged   ? "damaged"
                                             : "missing");
    json.Key("commit_log_error");
    if (log_damaged) {
      json.String(log_status.message());
    } else {
      json.Null();
    }
    json.Key("epochs");
    json.BeginArray();
    for (const auto& [epoch, checks] : epochs) {
      json.BeginObject();
      json.Field("epoch", epoch);
      json.Key("nodes");
      json.BeginArray();
      for (const DbCheck& check : checks) {
        json.BeginObject();
        json.Field("node", check.node);
        json.Field("path", check.path);
        json.Field("status", check.status);
        const bool good = check.status == "ok";
        json.Field("blobs",
                   good ? std::optional<int64_t>(check.blobs) : std::nullopt);
        json.Field("bytes",
                   good ? std::optional<int64_t>(check.bytes) : std::nullopt);
        json.Key("error");
        if (good) {
          json.Null();
        } else {
          json.String(check.error);
        }
        json.EndObject();
      }
      json.EndArray();
      json.EndObject();
    }
    json.EndArray();
    json.Field("databases", databases);
    json.Field("damaged", counts["damaged"]);
    json.Field("missing", counts["missing"]);
    json.Field("unreadable", counts["unreadable"]);
    json.EndObject();
    out << "\n";
    return ok ? kExitOk : kExitProblem;
  }

  if (log_damaged) {
    out << "DAMAGED commit log: " << log_status.message() << "\n";
    out << "FAILED: the committed epochs of " << dir->path
        << " cannot be known\n";
    return kExitProblem;
  }
  if (absl::IsNotFound(log_status)) {
    out << dir->path << " has no committed epoch (no " << kCommitLogFileName
        << "); nothing to verify\n";
    return kExitOk;
  }
  for (const auto& [epoch, checks] : epochs) {
    for (const DbCheck& check : checks) {
      out << "epoch " << epoch << " " << Printable(check.node) << ": ";
      if (check.status == "ok") {
        out << "ok (" << check.blobs << " blobs, " << check.bytes
            << " bytes)\n";
      } else {
        std::string label = check.status;
        for (char& c : label) c = static_cast<char>(std::toupper(c));
        out << label << ": " << check.error << "\n";
      }
    }
  }
  const std::string scope = absl::StrCat(
      databases, " database", databases == 1 ? "" : "s", " of ", epochs.size(),
      " committed epoch", epochs.size() == 1 ? "" : "s", " in ", dir->path);
  if (ok) {
    out << "OK: verified " << scope << "\n";
    return kExitOk;
  }
  out << "FAILED: " << failures << " of " << scope << " failed ("
      << counts["damaged"] << " damaged, " << counts["missing"] << " missing, "
      << counts["unreadable"] << " unreadable)\n";
  return kExitProblem;
}

int Gc(const GcOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = Scan(options.dir, err);
  if (!dir.has_value()) return kExitUsage;
  if (!dir->log_status.ok() && !absl::IsNotFound(dir->log_status)) {
    // Without the list of committed epochs nothing can be judged garbage.
    err << "ckpt: " << dir->log_status.message() << "; gc removes nothing\n";
    return kExitUsage;
  }
  // Save temporaries are databases of the directory's type, which knows
  // whether one is open and how to delete it.
  absl::StatusOr<const DbType*> db_type =
      DbRegistry::Global().Find(dir->DbType());
  if (!db_type.ok()) {
    err << "ckpt: " << dir->path << ": " << db_type.status().message()
        << "; gc removes nothing\n";
    return kExitUsage;
  }
  const absl::string_view verb = options.dry_run ? "would remove" : "removed";
  int removed = 0;
  int64_t removed_bytes = 0;
  auto bytes_of = [](const std::string& path) {
    absl::StatusOr<int64_t> bytes = DiskBytes(path);
    return bytes.ok() ? *bytes : 0;
  };

  // 1. Retention, exactly as ApplyRetention decides it.
  if (!dir->log_status.ok() && options.keep_last > 0) {
    out << "no " << kCommitLogFileName
        << ": nothing is committed, so retention removes nothing\n";
  }
  if (dir->log_status.ok() && options.keep_last > 0) {
    const CommitLog& log = dir->commit_log;
    const int n = log.epoch_size();
    std::vector<const CommittedEpoch*> dropped;
    for (int i = 0; i < n; ++i) {
      const CommittedEpoch& e = log.epoch(i);
      const bool newest = i == n - 1;
      const bool recent = i >= n - options.keep_last;
      const bool milestone =
          options.keep_every > 0 && e.epoch() % options.keep_every == 0;
      if (!newest && !recent && !milestone) dropped.push_back(&e);
    }
    // What is on disk now, for the report; ApplyRetention deletes the same.
    std::vector<std::pair<int64_t, std::vector<std::string>>> paths;
    for (const CommittedEpoch* e : dropped) {
      std::vector<std::string> existing;
      for (const std::string& node : e->node()) {
        const std::string path = CheckpointDbPath(dir->path, node, e->epoch());
        absl::StatusOr<bool> exists = PathExists(path);
        if (exists.ok() && *exists) {
          removed_bytes += bytes_of(path);
          existing.push_back(path);
        }
      }
      paths.emplace_back(e->epoch(), std::move(existing));
    }
    if (!options.dry_run && !dropped.empty()) {
      RetentionOptions retention;
      retention.keep_last = options.keep_last;
      retention.keep_every = options.keep_every;
      absl::StatusOr<std::vector<int64_t>> applied =
          ApplyRetention(dir->path, retention, /*background=*/false);
      if (!applied.ok()) {
        err << "ckpt: applying retention to " << dir->path << ": "
            << applied.status().message() << "\n";
        return kExitUsage;
      }
    }
    for (const auto& [epoch, existing] : paths) {
      out << verb << " committed epoch " << epoch;
      if (existing.empty()) {
        out << " (no database left on disk)";
      } else {
        out << ": " << absl::StrJoin(existing, " ");
      }
      out << "\n";
      ++removed;
    }
    std::vector<int64_t> kept;
    for (const CommittedEpoch& e : log.epoch()) {
      if (std::none_of(dropped.begin(), dropped.end(),
                       [&](const CommittedEpoch* d) { return d == &e; })) {
        kept.push_back(e.epoch());
      }
    }
    out << (options.dry_run ? "would keep" : "kept") << " committed epochs: "
        << (kept.empty() ? "none" : absl::StrJoin(kept, ", ")) << "\n";
  }

  // 2. Leftover temporaries: jobgraph's own names only.
  int skipped = 0;
  // `temp_type` is the DB type of a temporary database, null for a file.
  auto remove_temp = [&](const std::string& path, const std::string& basename,
                         std::optional<int64_t> pid, const DbType* temp_type,
                         absl::string_view what) -> bool {
    if (!options.force) {
      if (std::optional<std::string> busy = TempInUse(path, pid, temp_type)) {
        out << "kept " << what << " " << Printable(basename) << ": " << *busy
            << " (--force removes it anyway)\n";
        ++skipped;
        return true;
      }
    }
    const int64_t bytes = bytes_of(path);
    if (!options.dry_run) {
      absl::Status status = temp_type != nullptr ? temp_type->Remove(path)
                                                 : RemoveRecursively(path);
      if (!status.ok() && !absl::IsNotFound(status)) {
        err << "ckpt: " << status.message() << "\n";
        return false;
      }
    }
    out << verb << " " << what << " " << path << " (" << bytes << " bytes)\n";
    removed_bytes += bytes;
    ++removed;
    return true;
  };
  for (const CheckpointDir::SaveTemp& temp : dir->save_temps) {
    if (!remove_temp(temp.path, temp.basename, temp.parsed.pid, *db_type,
                     "temporary database")) {
      return kExitUsage;
    }
  }
  for (const CheckpointDir::CommitLogTemp& temp : dir->commit_log_temps) {
    if (!remove_temp(temp.path, temp.basename, temp.pid,
                     /*temp_type=*/nullptr, "temporary commit log")) {
      return kExitUsage;
    }
  }

  int uncommitted = 0;
  for (const CheckpointDir::Database& db : dir->databases) {
    if (!dir->IsCommitted(db.name.node, db.name.epoch)) ++uncommitted;
  }
  if (removed == 0) {
    out << "nothing to remove in " << dir->path << "\n";
  } else {
    out << verb << " " << removed << " item" << (removed == 1 ? "" : "s")
        << ", " << removed_bytes << " bytes, in " << dir->path << "\n";
  }
  if (skipped > 0) {
    out << "kept " << skipped << " temporar" << (skipped == 1 ? "y" : "ies")
        << " that may be in use\n";
  }
  if (uncommitted > 0) {
    out << "left alone: " << uncommitted << " uncommitted database"
        << (uncommitted == 1 ? "" : "s")
        << " (not listed in the commit log; see `ckpt list`)\n";
  }
  return kExitOk;
}

}  // namespace ckpt
}  // namespace jobgraph

// `ckpt list`: the epochs of a checkpoint directory and their state.

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/tier/tier_log.h"
#include "checkpoint/util/file_util.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/references.h"
#include "tools/ckpt/tiers.h"

namespace jobgraph {
namespace ckpt {
namespace {

// ---------------------------------------------------------------------------
// list

// A tier that holds a committed copy of an epoch.
struct TierCopy {
  std::string tier;  // "shared" or "local"
  std::string dir;
  // A host's local tier of a job on several hosts: the nodes whose
  // databases it holds (CommittedEpoch.held_node; empty: all), and the
  // host (CommittedEpoch.host).
  std::vector<std::string> held;
  std::string host;
};

// One row of `list`: an epoch's committed databases, its databases that are
// not committed, or one leftover temporary.
struct EpochRow {
  std::optional<int64_t> epoch;  // unknown for a temporary of another name
  std::string state;             // "committed", "uncommitted", "incomplete"
  std::vector<std::string> nodes;
  std::vector<std::string> paths;
  std::optional<int64_t> blobs;
  std::optional<int64_t> bytes;
  // Of `bytes`, those held by reference in other epochs' databases, and
  // those epochs (from the blob indexes).
  std::optional<int64_t> referenced_bytes;
  std::set<int64_t> referenced_epochs;
  std::optional<int64_t> save_micros;
  std::optional<int64_t> time_unix_micros;
  std::vector<std::string> problems;
  // A committed preemption checkpoint (or mark): where the run stopped.
  std::optional<Preemption> preemption;
  // A committed row's commit log entry: in the listed directory's log, or
  // in a local tier's for an epoch that only local tiers hold.
  const CommittedEpoch* entry = nullptr;
  bool local_only = false;
  // With local tiers: the tiers that hold a committed copy.
  std::vector<TierCopy> tiers;
};

// The STATE column: "committed", or for a preemption checkpoint where the
// run stopped and what a resume from it does.
std::string StateText(const EpochRow& row) {
  if (!row.preemption.has_value()) return row.state;
  const JobGroup group = row.preemption->group();
  const std::string where = group == JOB_GROUP_INIT    ? "mid-init"
                            : group == JOB_GROUP_EPOCH ? "mid-epoch"
                                                       : "after last epoch";
  return absl::StrCat(
      "preempted ", where, " (",
      row.preemption->signal().empty() ? "?" : row.preemption->signal(), ")");
}

int StateRank(const std::string& state) {
  if (state == "committed") return 0;
  if (state == "uncommitted") return 1;
  return 2;
}

// The totals of a row that one of its databases leaves unknown.
void Unknown(EpochRow* row) {
  row->blobs.reset();
  row->bytes.reset();
  row->referenced_bytes.reset();
}

// Problems of the references of the database at `path` (blob index
// `index`): a database it reads blobs from that is missing or, for a
// committed epoch, not committed (a save or retention may replace or delete
// it any time).
void CheckReferences(const CheckpointDir& dir, const std::string& path,
                     const BlobIndex& index, bool committed, EpochRow* row) {
  std::map<int64_t, std::vector<std::string>> by_epoch;  // blob names
  for (const CheckpointBlobInfo& blob : index.blob()) {
    if (blob.has_stored_in_epoch()) {
      by_epoch[blob.stored_in_epoch()].push_back(blob.name());
    }
  }
  for (const auto& [epoch, names] : by_epoch) {
    const std::string holder = ReferencedDbPath(path, index.node(), epoch);
    std::string why;
    absl::StatusOr<bool> exists = PathExists(holder);
    if (!exists.ok()) {
      why = absl::StrCat("cannot be checked: ", exists.status().message());
    } else if (!*exists) {
      why = "is missing";
    } else if (committed && !dir.IsCommitted(index.node(), epoch)) {
      why = "is not committed";
    } else {
      continue;
    }
    row->problems.push_back(absl::StrCat("database ", path, " refers to ",
                                         BlobNames(names), " in ", holder,
                                         " (epoch ", epoch, "), which ", why));
  }
}

// Adds the database at `path` (of `node` and `epoch`) to `row`: its blob
// count and bytes from its blob index, or a problem when that cannot be read
// or belongs to another node or epoch, or when a database it references is
// missing (CheckReferences). Blob and byte totals of a row become unknown
// once one of its databases cannot be read.
void AddDatabase(const CheckpointDir& dir, const std::string& db_type,
                 const std::string& path, const std::string& node,
                 int64_t epoch, bool committed, EpochRow* row,
                 std::optional<int64_t>* earliest_created) {
  absl::StatusOr<BlobIndex> index = ReadBlobIndexAt(db_type, path);
  if (!index.ok()) {
    row->problems.push_back(std::string(index.status().message()));
    Unknown(row);
    return;
  }
  if (index->node() != node || index->epoch() != epoch) {
    row->problems.push_back(absl::StrCat(path, " holds node '", index->node(),
                                         "' epoch ", index->epoch(),
                                         " according to its blob index"));
  }
  if (row->blobs.has_value()) *row->blobs += index->blob_size();
  if (row->bytes.has_value()) *row->bytes += index->total_bytes();
  if (row->referenced_bytes.has_value()) {
    *row->referenced_bytes += index->referenced_bytes();
  }
  row->referenced_epochs.insert(index->referenced_epoch().begin(),
                                index->referenced_epoch().end());
  CheckReferences(dir, path, *index, committed, row);
  if (earliest_created != nullptr && index->created_unix_micros() > 0 &&
      (!earliest_created->has_value() ||
       index->created_unix_micros() < **earliest_created)) {
    *earliest_created = index->created_unix_micros();
  }
}

// A problem when the databases of committed epoch `e` reference an epoch
// that its commit log entry does not list: retention, which goes by the
// log, would not keep that epoch for it.
void CheckLoggedReferences(const CommittedEpoch& e, EpochRow* row) {
  for (int64_t epoch : row->referenced_epochs) {
    if (std::find(e.referenced_epoch().begin(), e.referenced_epoch().end(),
                  epoch) == e.referenced_epoch().end()) {
      row->problems.push_back(absl::StrCat(
          "its databases refer to blobs in epoch ", epoch,
          ", which its commit log entry does not list among the epochs it "
          "references: retention may delete epoch ",
          epoch, " while it is needed"));
    }
  }
}

// The row of committed epoch `e` of `dir`'s commit log.
EpochRow CommittedRow(const CheckpointDir& dir, const std::string& db_type,
                      const CommittedEpoch& e) {
  EpochRow row;
  row.epoch = e.epoch();
  row.state = "committed";
  row.blobs = 0;
  row.bytes = 0;
  row.referenced_bytes = 0;
  row.save_micros = e.save_micros();
  row.time_unix_micros = e.committed_unix_micros();
  if (e.has_preemption()) row.preemption = e.preemption();
  row.entry = &e;
  // A host's local tier holds some of the epoch's databases (HeldNodes).
  for (const std::string& node : HeldNodes(e)) {
    const std::string path = CheckpointDbPath(dir.path, node, e.epoch());
    row.nodes.push_back(node);
    row.paths.push_back(path);
    absl::StatusOr<bool> exists = PathExists(path);
    if (!exists.ok() || !*exists) {
      row.problems.push_back(
          exists.ok() ? absl::StrCat("database ", path, " is missing")
                      : std::string(exists.status().message()));
      Unknown(&row);
      continue;
    }
    AddDatabase(dir, db_type, path, node, e.epoch(), /*committed=*/true, &row,
                nullptr);
  }
  CheckLoggedReferences(e, &row);
  return row;
}

// Increasing epochs; of one epoch, committed rows first, then uncommitted,
// then incomplete; rows of unknown epoch last.
void SortRows(std::vector<EpochRow>* rows) {
  std::stable_sort(rows->begin(), rows->end(),
                   [](const EpochRow& a, const EpochRow& b) {
                     const int64_t ea =
                         a.epoch.value_or(std::numeric_limits<int64_t>::max());
                     const int64_t eb =
                         b.epoch.value_or(std::numeric_limits<int64_t>::max());
                     if (ea != eb) return ea < eb;
                     return StateRank(a.state) < StateRank(b.state);
                   });
}

// The rows of `dir`, sorted (SortRows).
std::vector<EpochRow> ListRows(const CheckpointDir& dir,
                               const std::string& db_type) {
  std::vector<EpochRow> rows;
  if (dir.log_status.ok()) {
    for (const CommittedEpoch& e : dir.commit_log.epoch()) {
      rows.push_back(CommittedRow(dir, db_type, e));
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
      row.referenced_bytes = 0;
    }
    row.nodes.push_back(db.name.node);
    row.paths.push_back(db.path);
    AddDatabase(dir, db_type, db.path, db.name.node, db.name.epoch,
                /*committed=*/false, &row, &row.time_unix_micros);
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
  SortRows(&rows);
  return rows;
}

// A local tier given to `list --local`.
struct LocalTier {
  CheckpointDir dir;
  std::string db_type;
  // The job whose epochs it holds (LocalTierJob).
  std::vector<std::string> nodes;
  LocalTierView view;
};

// A tier's commit log as MergeTierLogs takes it.
TierLogRead TierLogOf(const CheckpointDir& dir) {
  TierLogRead read{dir.path, std::nullopt};
  if (dir.log_status.ok()) {
    read.read = CommitLogRead{dir.commit_log, dir.log_damage};
  }
  return read;
}

// Says which tiers hold the committed rows of `shared`, and adds a
// committed row for each epoch that only local tiers hold (committed there,
// not flushed, and continuing the shared history). `rows` are unsorted
// afterwards.
void AddTiers(const CheckpointDir& shared, std::vector<LocalTier>& tiers,
              std::vector<EpochRow>* rows) {
  for (EpochRow& row : *rows) {
    if (row.entry != nullptr) row.tiers.push_back({"shared", shared.path});
  }
  const TierLogRead shared_log = TierLogOf(shared);
  for (LocalTier& tier : tiers) {
    tier.nodes = LocalTierJob(tier.dir.commit_log);
    if (tier.nodes.empty()) continue;
    tier.view = ViewLocalTier(TierLogOf(tier.dir), shared_log, tier.nodes);
    const JobNodes own(tier.nodes);
    std::set<int64_t> in_shared;  // the job's epochs that `shared` lists
    for (EpochRow& row : *rows) {
      if (row.entry == nullptr || row.local_only || !own.Owns(*row.entry)) {
        continue;
      }
      in_shared.insert(row.entry->epoch());
      const CommittedEpoch* copy = FindCommittedEpoch(
          tier.dir.commit_log, row.entry->epoch(), tier.nodes);
      if (copy != nullptr &&
          (tier.view.Holds(copy->epoch()) ||
           tier.view.host_parts.count(copy->epoch()) > 0) &&
          SameCommit(*copy, *row.entry)) {
        row.tiers.push_back(
            {"local",
             tier.dir.path,
             {copy->held_node().begin(), copy->held_node().end()},
             copy->host()});
      }
    }
    // Whole copies and hosts' parts, in epoch order.
    std::set<int64_t> local_epochs = tier.view.host_parts;
    for (const auto& [epoch, dirs] : tier.view.merged.copies) {
      if (tier.view.Holds(epoch)) local_epochs.insert(epoch);
    }
    for (int64_t epoch : local_epochs) {
      if (in_shared.count(epoch) > 0) continue;
      const CommittedEpoch* entry =
          FindCommittedEpoch(tier.dir.commit_log, epoch, tier.nodes);
      if (entry == nullptr) continue;
      // The same commit in an earlier local tier: one row.
      auto same =
          std::find_if(rows->begin(), rows->end(), [&](const EpochRow& row) {
            return row.local_only && SameCommit(*row.entry, *entry);
          });
      const std::vector<std::string> held(entry->held_node().begin(),
                                          entry->held_node().end());
      if (same != rows->end()) {
        same->tiers.push_back({"local", tier.dir.path, held, entry->host()});
        continue;
      }
      EpochRow row = CommittedRow(tier.dir, tier.db_type, *entry);
      row.local_only = true;
      row.tiers.push_back({"local", tier.dir.path, held, entry->host()});
      rows->push_back(std::move(row));
    }
  }
}

// The TIERS cell: "shared,local:/dev/shm/ckpt", or "-"; a host's tier
// of a job on several hosts with its host and the nodes it holds:
// "local:/dev/shm/ckpt@h1[trainer_0,trainer_3]".
std::string TiersCell(const EpochRow& row) {
  if (row.tiers.empty()) return "-";
  std::vector<std::string> names;
  for (const TierCopy& copy : row.tiers) {
    std::string name = copy.tier == "shared"
                           ? copy.tier
                           : absl::StrCat(copy.tier, ":", Printable(copy.dir));
    if (!copy.host.empty()) absl::StrAppend(&name, "@", Printable(copy.host));
    if (!copy.held.empty()) {
      std::vector<std::string> held;
      for (const std::string& node : copy.held) held.push_back(Printable(node));
      absl::StrAppend(&name, "[", absl::StrJoin(held, ","), "]");
    }
    names.push_back(std::move(name));
  }
  return absl::StrJoin(names, ",");
}

std::string OrDash(const std::optional<int64_t>& value) {
  return value.has_value() ? absl::StrCat(*value) : "-";
}

// Whether any epoch references another, by its databases or its commit log
// entry.
bool HasReferences(const CheckpointDir& dir,
                   const std::vector<EpochRow>& rows) {
  for (const EpochRow& row : rows) {
    if (!row.referenced_epochs.empty()) return true;
  }
  if (!dir.log_status.ok()) return false;
  for (const CommittedEpoch& e : dir.commit_log.epoch()) {
    if (e.referenced_epoch_size() > 0) return true;
  }
  return false;
}

// "108 (epoch 0)": the bytes a row's databases hold by reference and the
// epochs that hold them; "-" for none.
std::string ReferencedCell(const EpochRow& row) {
  if (!row.referenced_bytes.has_value()) return "-";
  if (row.referenced_epochs.empty() && *row.referenced_bytes == 0) return "-";
  const std::vector<int64_t> epochs(row.referenced_epochs.begin(),
                                    row.referenced_epochs.end());
  return absl::StrCat(*row.referenced_bytes, " (", EpochsText(epochs), ")");
}

// The bytes a row's save wrote: its bytes without those it references.
std::string WrittenCell(const EpochRow& row) {
  if (!row.bytes.has_value()) return "-";
  return absl::StrCat(*row.bytes - row.referenced_bytes.value_or(0));
}

void PrintListText(const CheckpointDir& dir, const std::string& db_type,
                   const std::vector<EpochRow>& rows,
                   const std::vector<LocalTier>& tiers, std::ostream& out) {
  out << "checkpoint " << dir.path << " (";
  if (dir.log_status.ok()) {
    out << db_type << ", format version " << dir.commit_log.format_version();
  } else {
    out << "no " << kCommitLogFileName << ": nothing is committed";
  }
  out << ")\n";
  // The WRITTEN and REFERENCED columns only where some epoch references
  // others, so that other directories print as they did before references
  // existed. BYTES is everything the epoch restores; WRITTEN what its save
  // wrote.
  const bool references = HasReferences(dir, rows);
  std::vector<std::string> headers = {"EPOCH", "STATE", "NODES", "BLOBS",
                                      "BYTES"};
  std::vector<bool> right_aligned = {true, false, false, true, true};
  if (references) {
    headers.insert(headers.end(), {"WRITTEN", "REFERENCED"});
    right_aligned.insert(right_aligned.end(), {true, false});
  }
  headers.insert(headers.end(), {"SAVE", "TIME"});
  right_aligned.insert(right_aligned.end(), {true, false});
  // The TIERS column only with local tiers, likewise.
  if (!tiers.empty()) {
    headers.push_back("TIERS");
    right_aligned.push_back(false);
  }
  TextTable table(std::move(headers), std::move(right_aligned));
  int committed = 0;
  int uncommitted = 0;
  int incomplete = 0;
  int local_only = 0;
  std::optional<int64_t> newest;
  if (dir.log_status.ok() && dir.commit_log.epoch_size() > 0) {
    newest = dir.commit_log.epoch(dir.commit_log.epoch_size() - 1).epoch();
  }
  for (const EpochRow& row : rows) {
    if (row.local_only) {
      ++local_only;
      newest = std::max(newest.value_or(*row.epoch), *row.epoch);
    }
    if (row.state == "committed") ++committed;
    if (row.state == "uncommitted") ++uncommitted;
    if (row.state == "incomplete") ++incomplete;
    std::vector<std::string> nodes;
    for (const std::string& node : row.nodes) nodes.push_back(Printable(node));
    if (nodes.empty()) nodes.push_back("?");
    const bool unknown = row.state != "incomplete" && !row.blobs.has_value();
    std::vector<std::string> cells = {
        row.epoch.has_value() ? absl::StrCat(*row.epoch) : "?", StateText(row),
        absl::StrJoin(nodes, ","), unknown ? "?" : OrDash(row.blobs),
        unknown ? "?" : OrDash(row.bytes)};
    if (references) {
      cells.push_back(unknown ? "?" : WrittenCell(row));
      cells.push_back(unknown ? "?" : ReferencedCell(row));
    }
    cells.push_back(row.save_micros.has_value() ? FormatMicros(*row.save_micros)
                                                : "-");
    cells.push_back(FormatUnixMicros(row.time_unix_micros.value_or(0)));
    if (!tiers.empty()) cells.push_back(TiersCell(row));
    table.AddRow(std::move(cells));
  }
  if (!table.empty()) table.Print(out);
  std::string summary =
      absl::StrCat(committed, " committed epoch", committed == 1 ? "" : "s");
  if (committed > 0 && newest.has_value()) {
    absl::StrAppend(&summary, " (newest ", *newest);
    if (local_only > 0) {
      absl::StrAppend(&summary, ", ", local_only, " only in a local tier");
    }
    absl::StrAppend(&summary, ")");
  }
  absl::StrAppend(&summary, ", ", uncommitted, " uncommitted, ", incomplete,
                  " incomplete");
  out << summary << "\n";
  for (const LocalTier& tier : tiers) {
    if (tier.view.ignored.empty()) continue;
    out << "local tier " << tier.dir.path << ": " << IgnoredText(tier.view)
        << "\n";
  }
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
                   const std::vector<EpochRow>& rows,
                   const std::vector<LocalTier>& tiers, std::ostream& out) {
  JsonWriter json(out);
  json.BeginObject();
  json.Field("dir", dir.path);
  json.Field("commit_log", dir.log_status.ok() ? "ok" : "missing");
  json.Field("format_version",
             dir.log_status.ok()
                 ? std::optional<int64_t>(dir.commit_log.format_version())
                 : std::nullopt);
  json.Field("db_type", db_type);
  const bool references = HasReferences(dir, rows);
  json.Key("epochs");
  json.BeginArray();
  for (const EpochRow& row : rows) {
    json.BeginObject();
    json.Field("epoch", row.epoch);
    json.Field("state", row.state);
    if (row.preemption.has_value()) {
      json.Field("preempted_in", row.preemption->group());
      json.Field("preempted_by", row.preemption->signal());
    }
    json.StringArray("nodes", row.nodes);
    json.StringArray("paths", row.paths);
    json.Field("blobs", row.blobs);
    json.Field("bytes", row.bytes);
    if (references) {
      json.Field("referenced_bytes", row.referenced_bytes);
      json.IntArray("referenced_epochs",
                    std::vector<int64_t>(row.referenced_epochs.begin(),
                                         row.referenced_epochs.end()));
    }
    json.Field("save_micros", row.save_micros);
    json.Field("time_unix_micros", row.time_unix_micros);
    if (!tiers.empty()) {
      json.Key("tiers");
      json.BeginArray();
      for (const TierCopy& copy : row.tiers) {
        json.BeginObject();
        json.Field("tier", copy.tier);
        json.Field("dir", copy.dir);
        if (!copy.held.empty()) json.StringArray("held_nodes", copy.held);
        if (!copy.host.empty()) json.Field("host", copy.host);
        json.EndObject();
      }
      json.EndArray();
    }
    json.StringArray("problems", row.problems);
    json.EndObject();
  }
  json.EndArray();
  std::vector<std::string> temps;
  for (const auto& temp : dir.save_temps) temps.push_back(temp.basename);
  for (const auto& temp : dir.commit_log_temps) temps.push_back(temp.basename);
  json.StringArray("leftover_temporaries", temps);
  if (!tiers.empty()) {
    json.Key("local_tiers");
    json.BeginArray();
    for (const LocalTier& tier : tiers) {
      json.BeginObject();
      json.Field("dir", tier.dir.path);
      json.StringArray("nodes", tier.nodes);
      json.Key("ignored");
      json.BeginArray();
      for (const LocalTierView::Ignored& group : tier.view.ignored) {
        json.BeginObject();
        json.IntArray("epochs", group.epochs);
        json.Field("reason", group.reason);
        json.EndObject();
      }
      json.EndArray();
      json.EndObject();
    }
    json.EndArray();
  }
  json.EndObject();
  out << "\n";
}

}  // namespace

int List(const ListOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = ScanOrReport(options.dir, err);
  if (!dir.has_value()) return kExitUsage;
  if (!dir->log_status.ok() && !absl::IsNotFound(dir->log_status)) {
    err << "ckpt: " << dir->log_status.message()
        << " (`ckpt verify` reports damage)\n";
    return kExitUsage;
  }
  const std::string db_type = DbTypeFor(*dir, options.db_type);
  std::vector<EpochRow> rows = ListRows(*dir, db_type);
  // Rows point into the tiers' commit logs: the vector is not resized once
  // they do.
  std::vector<LocalTier> tiers;
  tiers.reserve(options.local_dirs.size());
  for (const std::string& local : options.local_dirs) {
    std::optional<CheckpointDir> scanned = ScanOrReport(local, err);
    if (!scanned.has_value()) return kExitUsage;
    if (absl::IsNotFound(scanned->log_status)) {
      err << "ckpt: " << local << " is not a checkpoint directory (no "
          << kCommitLogFileName << ")\n";
      return kExitUsage;
    }
    if (!scanned->log_status.ok()) {
      err << "ckpt: " << scanned->log_status.message()
          << " (`ckpt verify` reports damage)\n";
      return kExitUsage;
    }
    LocalTier tier;
    tier.db_type = DbTypeFor(*scanned, options.db_type);
    tier.dir = *std::move(scanned);
    tiers.push_back(std::move(tier));
  }
  if (!tiers.empty()) {
    AddTiers(*dir, tiers, &rows);
    SortRows(&rows);
  }
  if (options.format == OutputFormat::kJson) {
    PrintListJson(*dir, db_type, rows, tiers, out);
  } else {
    PrintListText(*dir, db_type, rows, tiers, out);
  }
  return kExitOk;
}

}  // namespace ckpt
}  // namespace jobgraph

// `ckpt gc`: retention and the removal of leftover temporaries.

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
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/references.h"

namespace jobgraph {
namespace ckpt {

namespace {

// The lock of the commit log of `dir`, saying on `err` when it must wait.
absl::StatusOr<CommitLogLock> LockCommitLog(const std::string& dir,
                                            std::ostream& err) {
  JG_ASSIGN_OR_RETURN(std::optional<CommitLogLock> free,
                      CommitLogLock::TryAcquire(dir));
  if (free.has_value()) return *std::move(free);
  err << "ckpt: waiting for the commit log of " << dir
      << " (a job is committing or saving into it)\n";
  return CommitLogLock::Acquire(dir);
}

// What retention does to a directory's commit log.
struct RetentionPlan {
  // The entries it takes out of the log, whose databases go.
  std::vector<CommittedEpoch> dropped;
  // The epochs left listed, in the log's order.
  std::vector<int64_t> kept;
  // Epochs kept because the databases of kept epochs reference them,
  // although their commit log entries do not say so (RetireEpochs keeps
  // those that the entries list itself).
  std::vector<int64_t> pinned;
  // The epochs that retention alone would drop but references keep, each
  // with the kept epochs that reference it directly.
  std::map<int64_t, std::vector<int64_t>> kept_for;
};

// The epochs that the databases of committed epoch `e` reference, by their
// blob indexes. A database whose index cannot be read references what the
// commit log entry says; `ckpt verify` reports it.
std::set<int64_t> ReferencedByDatabases(const CheckpointDir& dir,
                                        const std::string& db_type,
                                        const CommittedEpoch& e) {
  std::set<int64_t> referenced(e.referenced_epoch().begin(),
                               e.referenced_epoch().end());
  for (const std::string& node : e.node()) {
    const std::string path = CheckpointDbPath(dir.path, node, e.epoch());
    if (!PathExists(path).value_or(false)) continue;
    absl::StatusOr<BlobIndex> index = ReadBlobIndexAt(db_type, path);
    if (!index.ok()) continue;
    referenced.insert(index->referenced_epoch().begin(),
                      index->referenced_epoch().end());
  }
  return referenced;
}

// RetireEpochs on a copy of the log, with every epoch that a kept epoch's
// databases reference pinned, so that no database a committed epoch reads
// from is deleted even where the log does not list the reference.
RetentionPlan PlanRetention(const CheckpointDir& dir,
                            const RetentionOptions& retention) {
  const std::string db_type = dir.DbType();
  std::map<int64_t, std::set<int64_t>> referenced;  // read once per epoch
  auto references_of = [&](const CommittedEpoch& e) -> std::set<int64_t>& {
    auto it = referenced.find(e.epoch());
    if (it == referenced.end()) {
      it = referenced.emplace(e.epoch(), ReferencedByDatabases(dir, db_type, e))
               .first;
    }
    return it->second;
  };
  RetentionPlan plan;
  CommitLog kept;
  std::set<int64_t> pinned;
  // Each round pins more epochs, so it ends within as many rounds as there
  // are epochs.
  while (true) {
    kept = dir.commit_log;
    plan.dropped =
        RetireEpochs(kept, retention, /*nodes=*/{},
                     std::vector<int64_t>(pinned.begin(), pinned.end()));
    std::set<int64_t> listed;
    for (const CommittedEpoch& e : kept.epoch()) listed.insert(e.epoch());
    bool more = false;
    for (const CommittedEpoch& e : kept.epoch()) {
      for (int64_t r : references_of(e)) {
        if (listed.count(r) == 0 && pinned.insert(r).second) more = true;
      }
    }
    if (!more) break;
  }
  plan.pinned.assign(pinned.begin(), pinned.end());

  // What retention alone keeps, for the report.
  CommitLog unreferenced = dir.commit_log;
  for (CommittedEpoch& e : *unreferenced.mutable_epoch()) {
    e.clear_referenced_epoch();
  }
  RetireEpochs(unreferenced, retention, /*nodes=*/{});
  std::set<int64_t> plain;
  for (const CommittedEpoch& e : unreferenced.epoch()) plain.insert(e.epoch());
  std::set<int64_t> listed;
  for (const CommittedEpoch& e : kept.epoch()) {
    listed.insert(e.epoch());
    plan.kept.push_back(e.epoch());
  }
  for (const CommittedEpoch& e : kept.epoch()) {
    for (int64_t r : references_of(e)) {
      if (plain.count(r) == 0 && listed.count(r) > 0) {
        plan.kept_for[r].push_back(e.epoch());
      }
    }
  }
  return plan;
}

// Applies `retention` to the commit log of `dir` with `pinned` kept, then
// deletes the databases of the epochs it drops: ApplyRetention, with the
// epochs that PlanRetention found referenced.
absl::Status ApplyPlan(const std::string& dir,
                       const RetentionOptions& retention,
                       const std::vector<int64_t>& pinned) {
  std::vector<CommittedEpoch> retired;
  JG_RETURN_IF_ERROR(UpdateCommitLog(
      dir, /*is_commit=*/false, [&](CommitLog& log) -> absl::StatusOr<bool> {
        retired = RetireEpochs(log, retention, /*nodes=*/{}, pinned);
        return !retired.empty();
      }));
  return DeleteRetired(dir, retired, /*background=*/false).status();
}

}  // namespace

int Gc(const GcOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = ScanOrReport(options.dir, err);
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
    RetentionOptions retention;
    retention.keep_last = options.keep_last;
    retention.keep_every = options.keep_every;
    const RetentionPlan plan = PlanRetention(*dir, retention);
    const std::vector<CommittedEpoch>& dropped = plan.dropped;
    // What is on disk now, for the report; the same is deleted below.
    std::vector<std::pair<int64_t, std::vector<std::string>>> paths;
    for (const CommittedEpoch& e : dropped) {
      std::vector<std::string> existing;
      for (const std::string& node : e.node()) {
        const std::string path = CheckpointDbPath(dir->path, node, e.epoch());
        absl::StatusOr<bool> exists = PathExists(path);
        if (exists.ok() && *exists) {
          removed_bytes += bytes_of(path);
          existing.push_back(path);
        }
      }
      paths.emplace_back(e.epoch(), std::move(existing));
    }
    if (!options.dry_run && !dropped.empty()) {
      absl::Status applied = ApplyPlan(dir->path, retention, plan.pinned);
      if (!applied.ok()) {
        err << "ckpt: applying retention to " << dir->path << ": "
            << applied.message() << "\n";
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
    for (const auto& [epoch, referrers] : plan.kept_for) {
      out << (options.dry_run ? "would keep" : "kept") << " committed epoch "
          << epoch << ": " << EpochsText(referrers) << " refer"
          << (referrers.size() == 1 ? "s" : "") << " to blobs in it\n";
    }
    const std::vector<int64_t>& kept = plan.kept;
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
  // A writer of the commit log holds the directory's lock for as long as
  // its temporary file exists (an MPI job's rank 0 through its whole save):
  // under the lock, a temporary log still there was left by a crash, even
  // one made on another host, where its pid says nothing. A dry run takes
  // no lock and goes by the pid.
  std::optional<CommitLogLock> log_lock;
  if (!dir->commit_log_temps.empty() && !options.dry_run) {
    absl::StatusOr<CommitLogLock> lock = LockCommitLog(dir->path, err);
    if (!lock.ok()) {
      err << "ckpt: " << lock.status().message() << "\n";
      return kExitUsage;
    }
    log_lock.emplace(*std::move(lock));
  }
  for (const CheckpointDir::CommitLogTemp& temp : dir->commit_log_temps) {
    // Gone while gc waited for the lock: a live writer's, renamed or
    // removed by it.
    if (!PathExists(temp.path).value_or(true)) continue;
    // Under the lock its pid is no question: no writer has it open.
    const std::optional<int64_t> pid =
        log_lock.has_value() ? std::nullopt : std::optional<int64_t>(temp.pid);
    if (!remove_temp(temp.path, temp.basename, pid,
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

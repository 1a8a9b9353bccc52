// `ckpt verify`: checks every committed database of a checkpoint directory.

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
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/file_util.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/references.h"

namespace jobgraph {
namespace ckpt {
namespace {

// ---------------------------------------------------------------------------
// verify

struct DbCheck {
  std::string node;
  std::string path;
  std::string status;  // "ok", "missing", "damaged", "unreadable"
  std::string error;
  int64_t blobs = 0;
  int64_t bytes = 0;
  // Of `bytes`, those held by reference, and the epochs that hold them.
  int64_t referenced_bytes = 0;
  std::vector<int64_t> referenced_epochs;
};

DbCheck CheckDb(DbVerifier& verifier, const std::string& dir,
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
  // Also what it references: damage in a holder is damage of every epoch
  // that reads blobs from it.
  absl::StatusOr<CompactBlobIndex> index =
      verifier.Verify(check.path, node, epoch);
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
  check.referenced_bytes = index->referenced_bytes();
  check.referenced_epochs = index->referenced_epochs();
  return check;
}

}  // namespace

int Verify(const VerifyOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<CheckpointDir> dir = ScanOrReport(options.dir, err);
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

  DbVerifier verifier(DbTypeFor(*dir, options.db_type));
  std::vector<std::pair<int64_t, std::vector<DbCheck>>> epochs;
  int databases = 0;
  std::map<std::string, int> counts;  // by status
  if (log_status.ok()) {
    for (const CommittedEpoch& e : dir->commit_log.epoch()) {
      if (options.epoch.has_value() && e.epoch() != *options.epoch) continue;
      std::vector<DbCheck> checks;
      // A host's local tier holds some of the epoch's databases.
      for (const std::string& node : HeldNodes(e)) {
        checks.push_back(CheckDb(verifier, dir->path, node, e.epoch()));
        ++counts[checks.back().status];
        ++databases;
      }
      epochs.emplace_back(e.epoch(), std::move(checks));
    }
  }
  const int failures = databases - counts["ok"];
  // Databases but no commit log: the log was deleted (jobgraph writes one
  // before its first database), and what is committed cannot be known.
  const bool databases_without_log =
      absl::IsNotFound(log_status) && !dir->databases.empty();
  const bool ok = failures == 0 && !log_damaged && dir->log_damage.ok() &&
                  !databases_without_log;

  if (options.format == OutputFormat::kJson) {
    JsonWriter json(out);
    json.BeginObject();
    json.Field("dir", dir->path);
    json.Field("ok", ok);
    json.Field("commit_log", !dir->log_damage.ok() ? "previous_copy"
                             : log_status.ok()     ? "ok"
                             : log_damaged         ? "damaged"
                                                   : "missing");
    json.Key("commit_log_error");
    if (log_damaged) {
      json.String(log_status.message());
    } else if (!dir->log_damage.ok()) {
      json.String(dir->log_damage.message());
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
        // Only for a database with references, as in `show`.
        if (!check.referenced_epochs.empty()) {
          json.Field("referenced_bytes", check.referenced_bytes);
          json.IntArray("referenced_epochs", check.referenced_epochs);
        }
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
  if (databases_without_log) {
    out << "DAMAGED: " << dir->path << " holds " << dir->databases.size()
        << " database(s) but no commit log (" << kCommitLogFileName
        << "), so what is committed cannot be known; `ckpt recover "
        << dir->path << "` rebuilds it from the databases that verify\n";
    return kExitProblem;
  }
  if (absl::IsNotFound(log_status)) {
    out << dir->path << " has no committed epoch (no " << kCommitLogFileName
        << "); nothing to verify\n";
    return kExitOk;
  }
  if (!dir->log_damage.ok()) {
    out << "DAMAGED commit log: " << dir->log_damage.message()
        << "; checking the epochs its previous copy lists\n";
  }
  for (const auto& [epoch, checks] : epochs) {
    for (const DbCheck& check : checks) {
      out << "epoch " << epoch << " " << Printable(check.node) << ": ";
      if (check.status == "ok") {
        out << "ok (" << check.blobs << " blobs, " << check.bytes << " bytes";
        if (!check.referenced_epochs.empty()) {
          out << ", "
              << ReferencedText(check.referenced_bytes,
                                check.referenced_epochs);
        }
        out << ")\n";
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
  if (failures == 0) {
    out << "FAILED: the commit log is damaged; the " << scope
        << " that its previous copy lists verified\n";
    return kExitProblem;
  }
  out << "FAILED: " << failures << " of " << scope << " failed ("
      << counts["damaged"] << " damaged, " << counts["missing"] << " missing, "
      << counts["unreadable"] << " unreadable)\n";
  return kExitProblem;
}

}  // namespace ckpt
}  // namespace jobgraph

// `ckpt recover`: rebuilds a deleted or damaged commit log from the
// databases that verify.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/util/file_util.h"
#include "engine/session.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/checkpoint_dir.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/references.h"

namespace jobgraph {
namespace ckpt {
namespace {

// What a database that verifies contributes to its epoch's entry.
struct Verified {
  int64_t bytes = 0;
  int64_t referenced_bytes = 0;
  std::vector<int64_t> referenced_epochs;
};

}  // namespace

int Recover(const RecoverOptions& options, std::ostream& out,
            std::ostream& err) {
  std::optional<CheckpointDir> dir = ScanOrReport(options.dir, err);
  if (!dir.has_value()) return kExitUsage;
  const std::string log_path = JoinPath(dir->path, kCommitLogFileName);
  if (dir->log_status.ok() && dir->log_damage.ok()) {
    out << "nothing to recover: " << log_path << " is intact\n";
    return kExitOk;
  }
  if (!dir->log_status.ok() && !absl::IsNotFound(dir->log_status) &&
      !absl::IsDataLoss(dir->log_status)) {
    err << "ckpt: " << dir->log_status.message() << "\n";
    return kExitUsage;
  }
  const std::string db_type = DbTypeFor(*dir, options.db_type);

  // Which databases verify, per epoch; every node seen makes up the job.
  std::set<std::string> nodes;
  std::map<int64_t, std::map<std::string, Verified>> good;  // epoch, node
  // Epochs whose databases hold a plan position: preemption checkpoints.
  std::set<int64_t> preempted;
  std::map<int64_t, std::vector<std::string>> problems;
  // Following references: a database whose holders are missing or damaged
  // does not verify.
  DbVerifier verifier(db_type);
  for (const CheckpointDir::Database& db : dir->databases) {
    nodes.insert(db.name.node);
    absl::StatusOr<CompactBlobIndex> index =
        verifier.Verify(db.path, db.name.node, db.name.epoch);
    if (index.ok()) {
      good[db.name.epoch][db.name.node] = {index->total_bytes(),
                                           index->referenced_bytes(),
                                           index->referenced_epochs()};
      for (int b = 0; b < index->blob_size(); ++b) {
        if (index->name(b) == kPlanPositionBlob) {
          preempted.insert(db.name.epoch);
        }
      }
    } else {
      problems[db.name.epoch].push_back(std::string(index.status().message()));
    }
  }

  CommitLog log;
  log.set_db_type(db_type);
  std::set<int64_t> epochs;
  for (const auto& [epoch, unused] : good) epochs.insert(epoch);
  for (const auto& [epoch, unused] : problems) epochs.insert(epoch);
  const int64_t now = absl::ToUnixMicros(absl::Now());
  std::set<int64_t> recovered;
  for (int64_t epoch : epochs) {
    const std::map<std::string, Verified>& have = good[epoch];
    std::vector<std::string> missing;
    for (const std::string& node : nodes) {
      if (have.count(node) == 0) missing.push_back(node);
    }
    if (!missing.empty()) {
      out << "skipped epoch " << epoch << ": no database that verifies for "
          << Printable(absl::StrJoin(missing, ", "));
      for (const std::string& problem : problems[epoch]) {
        out << "; " << Printable(problem);
      }
      out << "\n";
      continue;
    }
    int64_t bytes = 0;
    int64_t referenced_bytes = 0;
    std::set<int64_t> referenced;  // the union over the nodes, as a commit
    for (const std::string& node : nodes) {
      const Verified& v = have.at(node);
      bytes += v.bytes;
      referenced_bytes += v.referenced_bytes;
      referenced.insert(v.referenced_epochs.begin(), v.referenced_epochs.end());
    }
    // Databases that verify are not enough: the log must not list an epoch
    // without the epochs it reads from (retention keeps those only while
    // they are listed). Epochs are taken in increasing order and reference
    // only earlier ones, so those are decided already.
    std::vector<std::string> unlisted;
    for (int64_t r : referenced) {
      if (recovered.count(r) == 0) unlisted.push_back(absl::StrCat(r));
    }
    if (!unlisted.empty()) {
      out << "skipped epoch " << epoch << ": its databases refer to blobs in "
          << (unlisted.size() == 1 ? "epoch " : "epochs ")
          << absl::StrJoin(unlisted, ", ") << ", which "
          << (unlisted.size() == 1 ? "is" : "are") << " not recovered\n";
      continue;
    }
    recovered.insert(epoch);
    CommittedEpoch* entry = log.add_epoch();
    entry->set_epoch(epoch);
    for (const std::string& node : nodes) entry->add_node(node);
    entry->set_total_bytes(bytes);
    entry->set_committed_unix_micros(now);
    entry->set_referenced_bytes(referenced_bytes);
    for (int64_t r : referenced) entry->add_referenced_epoch(r);
    if (preempted.count(epoch) > 0) {
      // A resume must continue it mid-group, not run the next epoch. The
      // signal is not recorded in the databases.
      Preemption* preemption = entry->mutable_preemption();
      preemption->set_group(epoch == 0 ? JOB_GROUP_INIT : JOB_GROUP_EPOCH);
      preemption->set_signal("unknown (recovered)");
    }
    out << "recovered epoch " << epoch << ": "
        << Printable(absl::StrJoin(nodes, ", ")) << " (" << bytes << " bytes";
    if (!referenced.empty()) {
      out << ", "
          << ReferencedText(
                 referenced_bytes,
                 std::vector<int64_t>(referenced.begin(), referenced.end()));
    }
    out << (preempted.count(epoch) > 0 ? ", preempted mid-epoch" : "") << ")\n";
  }
  // Version 1 unless an entry references other epochs, as a commit writes.
  log.set_format_version(CommitLogVersionFor(log));
  if (log.epoch_size() == 0) {
    out << "FAILED: no epoch of " << dir->path
        << " has a database that verifies for every node; nothing written\n";
    return kExitProblem;
  }
  const std::string list = CommittedEpochList(log);
  if (options.dry_run) {
    out << "would write " << log_path << " listing epochs " << list << "\n";
    return kExitOk;
  }
  // As every writer of the log: a job committing meanwhile waits, and
  // `ckpt gc` never takes this write's temporary file for a leftover.
  absl::StatusOr<CommitLogLock> lock = CommitLogLock::Acquire(dir->path);
  if (!lock.ok()) {
    err << "ckpt: " << lock.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<bool> damaged_exists = PathExists(log_path);
  if (damaged_exists.ok() && *damaged_exists) {
    // Kept for a person to look at: recovery destroys nothing.
    const std::string kept = absl::StrCat(log_path, ".damaged");
    absl::Status moved = RenameAndSync(log_path, kept);
    if (!moved.ok()) {
      err << "ckpt: " << moved.message() << "\n";
      return kExitUsage;
    }
    out << "kept the damaged commit log as " << kept << "\n";
  }
  absl::Status written = WriteCommitLog(dir->path, log, /*is_commit=*/false);
  if (!written.ok()) {
    err << "ckpt: writing " << log_path << ": " << written.message() << "\n";
    return kExitUsage;
  }
  out << "wrote " << log_path << " listing epochs " << list << "\n";
  return kExitOk;
}

}  // namespace ckpt
}  // namespace jobgraph

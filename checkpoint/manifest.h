// The checkpoint directory's manifest and the metadata handler that keeps it.
//
// An epoch is committed exactly when the directory manifest,
// "<dir>/MANIFEST.jobgraph" (a CheckpointManifest proto), lists it. Each
// node's database is moved into place under its final name before the
// manifest is touched, and the manifest itself is replaced atomically (temp
// file, fsync, rename, fsync of the directory), so a crash at any instant
// leaves either the old or the new list of committed epochs, and every epoch
// listed has all of its databases in place. See checkpoint/FORMAT.md.
//
// CheckpointMetadataHandler is Caffe2's metadata-handler interface
// (set_params / last_epoch / cp_accessible / write / report) as a C++ base
// class. ManifestHandler is the built-in one. Handlers are used by one
// thread at a time (the JobRunner's).

#ifndef JOBGRAPH_CHECKPOINT_MANIFEST_H_
#define JOBGRAPH_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// The file name of the directory manifest.
inline constexpr absl::string_view kManifestFileName = "MANIFEST.jobgraph";
// The version written into manifests; readers reject newer ones.
inline constexpr int kCheckpointFormatVersion = 1;

// What the user asked to resume from: nothing, an epoch, or the newest
// committed epoch that verifies.
struct ResumeFrom {
  enum class Kind { kScratch, kEpoch, kLatest };
  Kind kind = Kind::kScratch;
  int64_t epoch = 0;

  // "" (from scratch), "latest", or a non-negative epoch number. Anything
  // else is InvalidArgument with the accepted forms.
  static absl::StatusOr<ResumeFrom> Parse(absl::string_view text);
  std::string ToString() const;
};

// "<dir>/<node>.<epoch>": where a node's database for an epoch lives.
std::string CheckpointDbPath(absl::string_view dir, absl::string_view node,
                             int64_t epoch);

// Node names become file names: only letters, digits, '_', '-' and '.', not
// starting with '.', at most 200 characters. InvalidArgument naming the node
// and the rule otherwise.
absl::Status ValidateNodeName(absl::string_view node);

// The directory manifest; NotFound if the directory has none yet,
// DataLoss if it cannot be parsed, FailedPrecondition for a newer format.
absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir);
// Replaces the directory manifest atomically (with the commit failpoints).
absl::Status WriteManifest(const std::string& dir,
                           const CheckpointManifest& manifest);

// Reads and checks one node's database: it opens, holds the jobgraph manifest
// for `node` and `epoch` (when given), every key the manifest lists is
// present with the recorded size and CRC-32C. Errors name the database path
// and the damaged key (or, for LevelDB's own checks, the file).
absl::StatusOr<CheckpointDbManifest> VerifyCheckpointDb(
    const std::string& db_type, const std::string& path,
    std::optional<std::string> node = std::nullopt,
    std::optional<int64_t> epoch = std::nullopt);

// Sizes and times of one save or load, by database path.
struct CheckpointStats {
  struct Db {
    std::string node;
    int64_t bytes = 0;
  };
  std::map<std::string, Db> dbs;
  int64_t wall_micros = 0;
  int64_t total_bytes() const;
};

class CheckpointMetadataHandler {
 public:
  virtual ~CheckpointMetadataHandler() = default;

  // Called at the start of every run with the checkpoint directory, the DB
  // type and the nodes whose databases make up an epoch.
  virtual absl::Status SetParams(const std::string& dir,
                                 const std::string& db_type,
                                 const std::vector<std::string>& nodes) = 0;
  // The epoch to resume from (nullopt: start from scratch), given what the
  // user asked for. May refuse with an error naming the epoch.
  virtual absl::StatusOr<std::optional<int64_t>> LastEpoch(
      const ResumeFrom& requested) = 0;
  // Whether checkpoints can be written now (before every save).
  virtual bool CpAccessible(std::optional<int64_t> epoch) = 0;
  // Called after every node's database for `epoch` is in place: commits it.
  virtual absl::Status Write(int64_t epoch, const CheckpointStats& stats) = 0;
  // Called after a save ("checkpoint_save"), load ("checkpoint_load") or
  // partial load ("checkpoint_partial_load").
  virtual void Report(absl::string_view action, const CheckpointStats& stats) {}
};

struct RetentionOptions {
  // Keep only the newest `keep_last` committed epochs; 0 keeps all.
  int keep_last = 0;
  // Also keep every epoch divisible by `keep_every`; 0 keeps none extra.
  int keep_every = 0;
};

// The built-in handler: the directory manifest, `latest` with verification
// and fallback, and retention.
class ManifestHandler : public CheckpointMetadataHandler {
 public:
  explicit ManifestHandler(RetentionOptions retention = {});

  absl::Status SetParams(const std::string& dir, const std::string& db_type,
                         const std::vector<std::string>& nodes) override;
  absl::StatusOr<std::optional<int64_t>> LastEpoch(
      const ResumeFrom& requested) override;
  bool CpAccessible(std::optional<int64_t> epoch) override;
  absl::Status Write(int64_t epoch, const CheckpointStats& stats) override;
  void Report(absl::string_view action, const CheckpointStats& stats) override;

  // Every node's database of `epoch` verifies (VerifyCheckpointDb).
  absl::Status VerifyEpoch(int64_t epoch) const;
  // Deletes committed epochs that retention no longer keeps; never the
  // newest, and only databases listed in the manifest.
  absl::Status ApplyRetention();

 private:
  RetentionOptions retention_;
  std::string dir_;
  std::string db_type_;
  std::vector<std::string> nodes_;
};

// Applies `retention` to the manifest of `dir`: removes the dropped epochs
// from the manifest first, then deletes their databases (in the background
// when `background` is true). Returns the dropped epochs.
absl::StatusOr<std::vector<int64_t>> ApplyRetention(
    const std::string& dir, const RetentionOptions& retention, bool background);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_MANIFEST_H_

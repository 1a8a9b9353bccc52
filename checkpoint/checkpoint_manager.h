// CheckpointManager and MultiNodeCheckpointManager: build the tasks that
// snapshot nodes' root workspaces into "<dir>/<node>.<epoch>" databases and
// load them back, and commit epochs through a metadata handler.
//
// As in Caffe2, the set of checkpointed blobs is fixed by Init(): from
// scratch it is every blob in the node's root workspace once the init group
// has run (GetAllBlobNames, so the list includes its own "blob_names" blob);
// on resume it is the list stored in the checkpoint. Save and Load build
// TaskGroups whose Save/Load ops run on the node that owns the blobs, so the
// managers work on any Session.
//
// A MultiNodeCheckpointManager holds one CheckpointManager per node, saves
// and loads all nodes concurrently, and owns the metadata handler (by default
// a ManifestHandler), which commits an epoch only after every node's database
// is in place. A manager may be reused for several runs of the same job.
//
// Not thread-safe; used by one JobRunner at a time.

#ifndef JOBGRAPH_CHECKPOINT_CHECKPOINT_MANAGER_H_
#define JOBGRAPH_CHECKPOINT_CHECKPOINT_MANAGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/manifest.h"
#include "engine/session.h"
#include "engine/task.h"

namespace jobgraph {

// The blob that holds the list of checkpointed blob names, in every node's
// root workspace and in every checkpoint.
inline constexpr char kBlobNamesBlob[] = "blob_names";
// The blob the save task writes the saved bytes into (not checkpointed: it is
// created after the blob list is fixed).
inline constexpr char kSavedBytesBlob[] = "checkpoint_saved_bytes";

struct CheckpointOptions {
  // Directory that holds the databases and the manifest; created on the
  // first save. Required.
  std::string directory;
  // Database type from the DB registry ("leveldb"; "memory" for tests).
  std::string db_type = "leveldb";
  // CheckpointManager only: the name its database files carry, and the node
  // its tasks run on when Init() is given no node. Empty: the job's node.
  std::string node_name;
  // Tensors are split into database values of at most this many bytes.
  int64_t chunk_bytes = int64_t{64} << 20;
  // Retention for the built-in handler.
  RetentionOptions retention;
  // Replaces the built-in ManifestHandler when set (not owned by the
  // per-node managers of a MultiNodeCheckpointManager).
  std::shared_ptr<CheckpointMetadataHandler> metadata_handler;
};

// What the JobRunner needs from a checkpoint manager.
class CheckpointManagerBase {
 public:
  virtual ~CheckpointManagerBase() = default;

  // Starts a run over `nodes` (the job's nodes to checkpoint).
  virtual absl::Status SetParams(const std::vector<std::string>& nodes) = 0;
  // The epoch to resume from, or nullopt to start from scratch.
  virtual absl::StatusOr<std::optional<int64_t>> GetResumeFromEpochId(
      const ResumeFrom& requested) = 0;
  // Tasks that fix the blob list: from the workspaces (from scratch) or from
  // the checkpoint of `retrieve_from_epoch`. Empty on a reused manager.
  virtual absl::StatusOr<TaskGroup> Init(
      const std::vector<std::string>& nodes,
      std::optional<int64_t> retrieve_from_epoch) = 0;
  // Tasks that save or load every checkpointed blob of every node. They
  // read the blob list from `session` now (Init's tasks must have run).
  virtual absl::StatusOr<TaskGroup> Save(const Session& session,
                                         int64_t epoch) = 0;
  virtual absl::StatusOr<TaskGroup> Load(const Session& session,
                                         int64_t epoch) = 0;
  virtual bool CpAccessible(std::optional<int64_t> epoch = std::nullopt) = 0;
  // Commits `epoch` after a successful save.
  virtual absl::Status WriteCheckpointMetadata(
      int64_t epoch, const CheckpointStats& stats) = 0;
  virtual void ReportCheckpointStats(absl::string_view action,
                                     const CheckpointStats& stats) = 0;
  // Sizes of the databases of `epoch` as the last Save of this manager
  // reported them through `session` (no database is opened).
  virtual CheckpointStats SavedStats(const Session& session,
                                     int64_t epoch) const = 0;
  // Sizes of the databases of `epoch`, read from their manifests (for
  // loads, which open the databases anyway).
  virtual CheckpointStats CollectStats(int64_t epoch) const = 0;
  virtual std::vector<std::string> node_names() const = 0;
  virtual const CheckpointOptions& options() const = 0;
};

class CheckpointManager : public CheckpointManagerBase {
 public:
  explicit CheckpointManager(CheckpointOptions options);

  absl::Status SetParams(const std::vector<std::string>& nodes) override;
  absl::StatusOr<std::optional<int64_t>> GetResumeFromEpochId(
      const ResumeFrom& requested) override;
  absl::StatusOr<TaskGroup> Init(
      const std::vector<std::string>& nodes,
      std::optional<int64_t> retrieve_from_epoch) override;
  absl::StatusOr<TaskGroup> Save(const Session& session,
                                 int64_t epoch) override;
  absl::StatusOr<TaskGroup> Load(const Session& session,
                                 int64_t epoch) override;
  bool CpAccessible(std::optional<int64_t> epoch = std::nullopt) override;
  absl::Status WriteCheckpointMetadata(int64_t epoch,
                                       const CheckpointStats& stats) override;
  void ReportCheckpointStats(absl::string_view action,
                             const CheckpointStats& stats) override;
  CheckpointStats SavedStats(const Session& session,
                             int64_t epoch) const override;
  CheckpointStats CollectStats(int64_t epoch) const override;
  std::vector<std::string> node_names() const override { return {file_node_}; }
  const CheckpointOptions& options() const override { return options_; }

  // "<dir>/<node_name>.<epoch>".
  std::string DbName(int64_t epoch) const;
  // The checkpointed blob names, fetched from the session.
  absl::StatusOr<std::vector<std::string>> BlobList(
      const Session& session) const;
  // Adds to `group` the tasks for this node (for the multi-node manager).
  absl::Status AddInitTask(TaskGroup* group,
                           std::optional<int64_t> retrieve_from_epoch);
  absl::Status AddSaveTask(TaskGroup* group, const Session& session,
                           int64_t epoch);
  absl::Status AddLoadTask(TaskGroup* group, const Session& session,
                           int64_t epoch);
  // Loads `blob_names` that this node's checkpoint holds, leaving the others
  // untouched (allow_incomplete).
  absl::Status AddPartialLoadTask(TaskGroup* group,
                                  const std::vector<std::string>& blob_names,
                                  int64_t epoch);
  // A task whose output says whether this node's database for `epoch`
  // exists and is complete.
  TaskOutput AddCheckDbExistsTask(TaskGroup* group, int64_t epoch);

 private:
  friend class MultiNodeCheckpointManager;
  // For the multi-node manager: runs on `node`, files named after it, no
  // handler of its own.
  CheckpointManager(CheckpointOptions options, std::string node,
                    bool own_handler);

  CheckpointOptions options_;
  std::string file_node_;  // the name in file names
  std::string task_node_;  // where the tasks run
  std::shared_ptr<CheckpointMetadataHandler> handler_;
};

class MultiNodeCheckpointManager : public CheckpointManagerBase {
 public:
  explicit MultiNodeCheckpointManager(CheckpointOptions options);

  absl::Status SetParams(const std::vector<std::string>& nodes) override;
  absl::StatusOr<std::optional<int64_t>> GetResumeFromEpochId(
      const ResumeFrom& requested) override;
  absl::StatusOr<TaskGroup> Init(
      const std::vector<std::string>& nodes,
      std::optional<int64_t> retrieve_from_epoch) override;
  absl::StatusOr<TaskGroup> Save(const Session& session,
                                 int64_t epoch) override;
  absl::StatusOr<TaskGroup> Load(const Session& session,
                                 int64_t epoch) override;
  bool CpAccessible(std::optional<int64_t> epoch = std::nullopt) override;
  absl::Status WriteCheckpointMetadata(int64_t epoch,
                                       const CheckpointStats& stats) override;
  void ReportCheckpointStats(absl::string_view action,
                             const CheckpointStats& stats) override;
  CheckpointStats SavedStats(const Session& session,
                             int64_t epoch) const override;
  CheckpointStats CollectStats(int64_t epoch) const override;
  std::vector<std::string> node_names() const override { return nodes_; }
  const CheckpointOptions& options() const override { return options_; }

  // "<dir>/<node>.<epoch>", or nullopt for a node this manager does not have.
  std::optional<std::string> GetCkptDbName(const std::string& node,
                                           int64_t epoch) const;

  // Loads `blob_names` from each node's checkpoint of `epoch` into that
  // node's root workspace. Checks first that every node's database exists;
  // returns false (loading nothing) if one does not.
  absl::StatusOr<bool> LoadBlobsLocally(
      const std::vector<std::string>& nodes,
      const std::vector<std::string>& blob_names, int64_t epoch,
      Session& session);

 private:
  absl::Status EnsureManagers(const std::vector<std::string>& nodes);

  CheckpointOptions options_;
  std::shared_ptr<CheckpointMetadataHandler> handler_;
  std::vector<std::string> nodes_;
  std::vector<std::unique_ptr<CheckpointManager>> managers_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_CHECKPOINT_MANAGER_H_

#include "checkpoint/checkpoint_manager.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/db_manifest.h"
#include "checkpoint/db_registry.h"
#include "engine/net_builder.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

std::shared_ptr<CheckpointMetadataHandler> DefaultHandler(
    const CheckpointOptions& options) {
  if (options.metadata_handler != nullptr) return options.metadata_handler;
  return std::make_shared<ManifestHandler>(options.retention);
}

absl::Status CheckDirectory(const CheckpointOptions& options) {
  if (options.directory.empty()) {
    return absl::InvalidArgumentError(
        "CheckpointOptions.directory is empty: give the directory that holds "
        "the checkpoints");
  }
  return absl::OkStatus();
}

}  // namespace

CheckpointManager::CheckpointManager(CheckpointOptions options)
    : options_(std::move(options)),
      file_node_(options_.node_name),
      task_node_(options_.node_name),
      handler_(DefaultHandler(options_)) {}

CheckpointManager::CheckpointManager(CheckpointOptions options,
                                     std::string node, bool own_handler)
    : options_(std::move(options)), file_node_(node), task_node_(node) {
  if (own_handler) handler_ = DefaultHandler(options_);
}

absl::Status CheckpointManager::SetParams(
    const std::vector<std::string>& nodes) {
  JG_RETURN_IF_ERROR(CheckDirectory(options_));
  if (nodes.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointManager checkpoints one node, but the job has ",
                     nodes.size(), " (", absl::StrJoin(nodes, ", "),
                     "); use MultiNodeCheckpointManager"));
  }
  // Files carry options.node_name when given (Caffe2's node_name); the
  // tasks run on the job's node, which owns the blobs.
  task_node_ = nodes[0];
  if (file_node_.empty()) file_node_ = nodes[0];
  JG_RETURN_IF_ERROR(ValidateNodeName(file_node_));
  if (handler_ == nullptr) return absl::OkStatus();
  return handler_->SetParams(options_.directory, options_.db_type,
                             {file_node_});
}

absl::StatusOr<std::optional<int64_t>> CheckpointManager::GetResumeFromEpochId(
    const ResumeFrom& requested) {
  if (handler_ == nullptr) {
    if (requested.kind == ResumeFrom::Kind::kLatest) {
      return absl::FailedPreconditionError(
          "resume_from_epoch=latest needs a metadata handler to know which "
          "epochs are committed");
    }
    if (requested.kind == ResumeFrom::Kind::kScratch) return std::nullopt;
    return requested.epoch;
  }
  return handler_->LastEpoch(requested);
}

std::string CheckpointManager::DbName(int64_t epoch) const {
  return CheckpointDbPath(options_.directory, file_node_, epoch);
}

absl::Status CheckpointManager::AddInitTask(
    TaskGroup* group, std::optional<int64_t> retrieve_from_epoch) {
  if (task_node_.empty()) {
    return absl::FailedPreconditionError(
        "CheckpointManager::Init before SetParams: the node is unknown");
  }
  Task& task = group->NewTask(Node(task_node_), {.name = "checkpoint_init"});
  NetBuilder& net = task.net();
  if (retrieve_from_epoch.has_value()) {
    net.Op("Load", {}, {BlobRef(kBlobNamesBlob)},
           {MakeArg("db", DbName(*retrieve_from_epoch)),
            MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1)});
  } else {
    net.Op("GetAllBlobNames", {}, {BlobRef(kBlobNamesBlob)},
           {MakeArg("include_shared", 0)});
  }
  task.AddOutput(BlobRef(kBlobNamesBlob, task_node_));
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> CheckpointManager::Init(
    const std::vector<std::string>& nodes,
    std::optional<int64_t> retrieve_from_epoch) {
  if (!nodes.empty()) {
    if (nodes.size() != 1) {
      return absl::InvalidArgumentError(
          "CheckpointManager::Init takes at most one node");
    }
    task_node_ = nodes[0];
    if (file_node_.empty()) file_node_ = nodes[0];
  }
  TaskGroup group("checkpoint_init", GLOBAL);
  JG_RETURN_IF_ERROR(AddInitTask(&group, retrieve_from_epoch));
  return group;
}

absl::StatusOr<std::vector<std::string>> CheckpointManager::BlobList(
    const Session& session) const {
  absl::StatusOr<Tensor> names = session.FetchBlob(task_node_, kBlobNamesBlob);
  if (!names.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpointed blob list of node '", task_node_,
        "' is not available (run the manager's Init tasks first): ",
        names.status().message()));
  }
  if (names->dtype() != STRING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "blob '", kBlobNamesBlob, "' of node '", task_node_, "' holds ",
        names->DebugString(4), ", not a list of names"));
  }
  std::vector<std::string> blobs;
  for (int64_t i = 0; i < names->numel(); ++i) {
    // The save's own byte count lives in the root workspace once a save has
    // run there; it describes a save and is never part of one.
    if (names->data<std::string>()[i] != kSavedBytesBlob) {
      blobs.push_back(names->data<std::string>()[i]);
    }
  }
  return blobs;
}

absl::Status CheckpointManager::AddSaveTask(TaskGroup* group,
                                            const Session& session,
                                            int64_t epoch) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> blobs, BlobList(session));
  std::vector<BlobRef> inputs(blobs.begin(), blobs.end());
  Task& task = group->NewTask(Node(task_node_), {.name = "checkpoint_save"});
  task.net().Op(
      "Save", inputs, {BlobRef(kSavedBytesBlob)},
      {MakeArg("db", DbName(epoch)), MakeArg("db_type", options_.db_type),
       MakeArg("absolute_path", 1),
       MakeArg("chunk_bytes", options_.chunk_bytes),
       MakeArg("node", file_node_), MakeArg("epoch", epoch)});
  task.AddOutput(BlobRef(kSavedBytesBlob, task_node_));
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> CheckpointManager::Save(const Session& session,
                                                  int64_t epoch) {
  TaskGroup group("checkpoint_save", GLOBAL);
  JG_RETURN_IF_ERROR(AddSaveTask(&group, session, epoch));
  return group;
}

absl::Status CheckpointManager::AddLoadTask(TaskGroup* group,
                                            const Session& session,
                                            int64_t epoch) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> blobs, BlobList(session));
  std::vector<BlobRef> outputs(blobs.begin(), blobs.end());
  Task& task = group->NewTask(Node(task_node_), {.name = "checkpoint_load"});
  task.net().Op(
      "Load", {}, outputs,
      {MakeArg("db", DbName(epoch)), MakeArg("db_type", options_.db_type),
       MakeArg("absolute_path", 1)});
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> CheckpointManager::Load(const Session& session,
                                                  int64_t epoch) {
  TaskGroup group("checkpoint_load", GLOBAL);
  JG_RETURN_IF_ERROR(AddLoadTask(&group, session, epoch));
  return group;
}

absl::Status CheckpointManager::AddPartialLoadTask(
    TaskGroup* group, const std::vector<std::string>& blob_names,
    int64_t epoch) {
  std::vector<BlobRef> outputs(blob_names.begin(), blob_names.end());
  Task& task =
      group->NewTask(Node(task_node_), {.name = "checkpoint_partial_load"});
  task.net().Op(
      "Load", {}, outputs,
      {MakeArg("db", DbName(epoch)), MakeArg("db_type", options_.db_type),
       MakeArg("absolute_path", 1), MakeArg("allow_incomplete", 1)});
  return absl::OkStatus();
}

TaskOutput CheckpointManager::AddCheckDbExistsTask(TaskGroup* group,
                                                   int64_t epoch) {
  Task& task =
      group->NewTask(Node(task_node_), {.name = "checkpoint_db_exists"});
  BlobRef exists(absl::StrCat("checkpoint_db_exists/", file_node_, ".", epoch),
                 task_node_);
  task.net().Op(
      "DBExists", {}, {exists},
      {MakeArg("db_name", DbName(epoch)), MakeArg("db_type", options_.db_type),
       MakeArg("absolute_path", 1)});
  return task.AddOutput(exists);
}

bool CheckpointManager::CpAccessible(std::optional<int64_t> epoch) {
  return handler_ == nullptr || handler_->CpAccessible(epoch);
}

absl::Status CheckpointManager::WriteCheckpointMetadata(
    int64_t epoch, const CheckpointStats& stats) {
  if (handler_ == nullptr) return absl::OkStatus();
  return handler_->Write(epoch, stats);
}

void CheckpointManager::ReportCheckpointStats(absl::string_view action,
                                              const CheckpointStats& stats) {
  if (handler_ != nullptr) handler_->Report(action, stats);
}

CheckpointStats CheckpointManager::SavedStats(const Session& session,
                                              int64_t epoch) const {
  CheckpointStats stats;
  CheckpointStats::Db& db = stats.dbs[DbName(epoch)];
  db.node = file_node_;
  absl::StatusOr<Tensor> bytes = session.FetchBlob(task_node_, kSavedBytesBlob);
  if (bytes.ok() && bytes->dtype() == INT64 && bytes->numel() == 1) {
    db.bytes = bytes->scalar<int64_t>();
  } else {
    LOG(WARNING) << "no size for " << DbName(epoch) << ": "
                 << (bytes.ok() ? bytes->DebugString(4)
                                : bytes.status().ToString());
  }
  return stats;
}

CheckpointStats CheckpointManager::CollectStats(int64_t epoch) const {
  CheckpointStats stats;
  const std::string path = DbName(epoch);
  absl::StatusOr<CheckpointDbManifest> manifest =
      ReadDbManifestAt(options_.db_type, path);
  CheckpointStats::Db& db = stats.dbs[path];
  db.node = file_node_;
  if (manifest.ok()) {
    db.bytes = manifest->total_bytes();
  } else {
    LOG(WARNING) << "no size for " << path << ": " << manifest.status();
  }
  return stats;
}

MultiNodeCheckpointManager::MultiNodeCheckpointManager(
    CheckpointOptions options)
    : options_(std::move(options)), handler_(DefaultHandler(options_)) {}

absl::Status MultiNodeCheckpointManager::SetParams(
    const std::vector<std::string>& nodes) {
  JG_RETURN_IF_ERROR(CheckDirectory(options_));
  if (nodes.empty()) {
    return absl::InvalidArgumentError(
        "the job has no nodes to checkpoint: give the init group a task, or "
        "call Job::SetNodesToCheckpoint");
  }
  for (const std::string& node : nodes)
    JG_RETURN_IF_ERROR(ValidateNodeName(node));
  nodes_ = nodes;
  return handler_->SetParams(options_.directory, options_.db_type, nodes_);
}

absl::StatusOr<std::optional<int64_t>>
MultiNodeCheckpointManager::GetResumeFromEpochId(const ResumeFrom& requested) {
  return handler_->LastEpoch(requested);
}

absl::Status MultiNodeCheckpointManager::EnsureManagers(
    const std::vector<std::string>& nodes) {
  if (!managers_.empty()) {
    std::vector<std::string> have;
    for (const auto& m : managers_) have.push_back(m->file_node_);
    if (have != nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("this MultiNodeCheckpointManager was set up for nodes [",
                       absl::StrJoin(have, ", "), "], not [",
                       absl::StrJoin(nodes, ", "), "]"));
    }
    return absl::OkStatus();
  }
  for (const std::string& node : nodes) {
    JG_RETURN_IF_ERROR(ValidateNodeName(node));
    managers_.push_back(std::unique_ptr<CheckpointManager>(
        new CheckpointManager(options_, node, /*own_handler=*/false)));
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskGroup> MultiNodeCheckpointManager::Init(
    const std::vector<std::string>& nodes,
    std::optional<int64_t> retrieve_from_epoch) {
  TaskGroup group("checkpoint_init", GLOBAL);
  if (!managers_.empty()) {
    // A reused manager keeps the blob lists already in the workspaces.
    JG_RETURN_IF_ERROR(EnsureManagers(nodes));
    return group;
  }
  JG_RETURN_IF_ERROR(EnsureManagers(nodes));
  for (const auto& m : managers_) {
    JG_RETURN_IF_ERROR(m->AddInitTask(&group, retrieve_from_epoch));
  }
  return group;
}

absl::StatusOr<TaskGroup> MultiNodeCheckpointManager::Save(
    const Session& session, int64_t epoch) {
  if (managers_.empty()) {
    return absl::FailedPreconditionError(
        "MultiNodeCheckpointManager::Save before Init");
  }
  TaskGroup group("checkpoint_save", GLOBAL);
  for (const auto& m : managers_) {
    JG_RETURN_IF_ERROR(m->AddSaveTask(&group, session, epoch));
  }
  return group;
}

absl::StatusOr<TaskGroup> MultiNodeCheckpointManager::Load(
    const Session& session, int64_t epoch) {
  if (managers_.empty()) {
    return absl::FailedPreconditionError(
        "MultiNodeCheckpointManager::Load before Init");
  }
  TaskGroup group("checkpoint_load", GLOBAL);
  for (const auto& m : managers_) {
    JG_RETURN_IF_ERROR(m->AddLoadTask(&group, session, epoch));
  }
  return group;
}

bool MultiNodeCheckpointManager::CpAccessible(std::optional<int64_t> epoch) {
  return handler_->CpAccessible(epoch);
}

absl::Status MultiNodeCheckpointManager::WriteCheckpointMetadata(
    int64_t epoch, const CheckpointStats& stats) {
  return handler_->Write(epoch, stats);
}

void MultiNodeCheckpointManager::ReportCheckpointStats(
    absl::string_view action, const CheckpointStats& stats) {
  handler_->Report(action, stats);
}

CheckpointStats MultiNodeCheckpointManager::SavedStats(const Session& session,
                                                       int64_t epoch) const {
  CheckpointStats stats;
  for (const auto& m : managers_) {
    CheckpointStats one = m->SavedStats(session, epoch);
    stats.dbs.insert(one.dbs.begin(), one.dbs.end());
  }
  return stats;
}

CheckpointStats MultiNodeCheckpointManager::CollectStats(int64_t epoch) const {
  CheckpointStats stats;
  for (const auto& m : managers_) {
    CheckpointStats one = m->CollectStats(epoch);
    stats.dbs.insert(one.dbs.begin(), one.dbs.end());
  }
  return stats;
}

std::optional<std::string> MultiNodeCheckpointManager::GetCkptDbName(
    const std::string& node, int64_t epoch) const {
  for (const auto& m : managers_) {
    if (m->file_node_ == node) return m->DbName(epoch);
  }
  return std::nullopt;
}

absl::StatusOr<bool> MultiNodeCheckpointManager::LoadBlobsLocally(
    const std::vector<std::string>& nodes,
    const std::vector<std::string>& blob_names, int64_t epoch,
    Session& session) {
  JG_RETURN_IF_ERROR(EnsureManagers(nodes));
  // Unlike Caffe2, every node's database is checked before anything is
  // loaded, so a missing one leaves every workspace untouched.
  TaskGroup check("checkpoint_db_exists", GLOBAL);
  std::vector<TaskOutput> exists;
  for (const auto& m : managers_) {
    exists.push_back(m->AddCheckDbExistsTask(&check, epoch));
  }
  JG_RETURN_IF_ERROR(session.Run(check));
  for (size_t i = 0; i < managers_.size(); ++i) {
    JG_ASSIGN_OR_RETURN(Tensor present, session.Fetch(exists[i]));
    if (!present.scalar<bool>()) {
      LOG(WARNING) << "checkpoint " << managers_[i]->DbName(epoch)
                   << " does not exist; loading nothing";
      return false;
    }
  }
  TaskGroup load("checkpoint_partial_load", GLOBAL);
  for (const auto& m : managers_) {
    JG_RETURN_IF_ERROR(m->AddPartialLoadTask(&load, blob_names, epoch));
  }
  JG_RETURN_IF_ERROR(session.Run(load));
  return true;
}

}  // namespace jobgraph

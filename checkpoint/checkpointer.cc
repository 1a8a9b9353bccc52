#include "checkpoint/checkpointer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpointer_internal.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/resume_choice.h"
#include "checkpoint/util/file_util.h"
#include "engine/collectives.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace checkpointer_internal {

int64_t MicrosSince(absl::Time start) {
  return absl::ToInt64Microseconds(absl::Now() - start);
}

bool StoppedInInit(const CommittedEpoch* entry) {
  return entry != nullptr && entry->has_preemption() &&
         entry->preemption().group() == "init";
}

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

namespace {

// mkdir -p: the checkpoint directory and any missing parents.
absl::Status CreateDirs(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(dir));
  if (exists) return absl::OkStatus();
  const std::string parent = ParentDir(dir);
  if (!parent.empty() && parent != dir) JG_RETURN_IF_ERROR(CreateDirs(parent));
  absl::Status s = CreateDir(dir);
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

}  // namespace

absl::Status PrepareDirectory(const std::string& dir) {
  absl::Status created = CreateDirs(dir);
  if (!created.ok()) {
    return absl::UnavailableError(
        absl::StrCat("checkpoint directory ", dir,
                     " cannot be created: ", created.message()));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat("checkpoint directory ", dir,
                     " is not writable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace checkpointer_internal

using checkpointer_internal::PrepareDirectory;
using checkpointer_internal::StoppedInInit;

Checkpointer::Checkpointer(CheckpointOptions options)
    : Checkpointer(std::move(options), /*single_node=*/false) {}

Checkpointer::Checkpointer(CheckpointOptions options, bool single_node)
    : options_(std::move(options)), single_node_(single_node) {}

absl::Status Checkpointer::SetNodes(const std::vector<std::string>& nodes) {
  if (options_.directory.empty()) {
    return absl::InvalidArgumentError(
        "CheckpointOptions.directory is empty: give the directory that holds "
        "the checkpoints");
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError(
        "the job has no nodes to checkpoint: give the init group a task, or "
        "call Job::SetNodesToCheckpoint");
  }
  if (single_node_ && nodes.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointManager checkpoints one node, but the job has ",
                     nodes.size(), " (", absl::StrJoin(nodes, ", "),
                     "); use MultiNodeCheckpointManager"));
  }
  if (!options_.node_name.empty() && nodes.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CheckpointOptions.node_name '", options_.node_name,
        "' names the databases of a single node, but the job checkpoints ",
        nodes.size(), " (", absl::StrJoin(nodes, ", "), ")"));
  }
  if (!nodes_.empty()) {
    // A reused Checkpointer keeps its blob lists, which belong to its nodes.
    if (nodes != this->nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("this Checkpointer was set up for nodes [",
                       absl::StrJoin(this->nodes(), ", "), "], not [",
                       absl::StrJoin(nodes, ", "), "]"));
    }
    return absl::OkStatus();
  }
  std::vector<NodeState> states;
  for (const std::string& node : nodes) {
    NodeState state;
    state.node = node;
    state.file_name = options_.node_name.empty() ? node : options_.node_name;
    JG_RETURN_IF_ERROR(ValidateNodeName(state.file_name));
    states.push_back(std::move(state));
  }
  nodes_ = std::move(states);
  return absl::OkStatus();
}

bool Checkpointer::Hosts(const NodeState& state) const {
  return ranks_ == nullptr || ranks_->HostsNode(state.node);
}

absl::Status Checkpointer::OnCommitter(
    const std::function<absl::Status()>& fn) const {
  if (ranks_ == nullptr) return fn();
  return OnRankZero(*ranks_, fn);
}

absl::Status Checkpointer::Agree(const absl::Status& local) const {
  if (ranks_ == nullptr) return local;
  return AgreeOnStatus(*ranks_, local);
}

absl::Status Checkpointer::LockNodes() {
  if (!locks_.empty()) return absl::OkStatus();
  std::vector<std::unique_ptr<NodeLock>> locks;
  for (const NodeState& state : nodes_) {
    if (!Hosts(state)) continue;
    JG_ASSIGN_OR_RETURN(std::unique_ptr<NodeLock> lock,
                        NodeLock::Acquire(options_.directory, state.file_name));
    locks.push_back(std::move(lock));
  }
  locks_ = std::move(locks);
  return absl::OkStatus();
}

Checkpointer::~Checkpointer() { End(); }

void Checkpointer::End() {
  WaitForBackgroundSave();
  // Blobs staged for a Restore that never came stay in their session (which
  // may be gone); the next Stage or CaptureBlobNames there drops them.
  staged_.reset();
  for (const BackgroundSaveResult& r : finished_) {
    // Nobody asked for these; a failure must still not go unnoticed.
    if (!r.stats.ok()) {
      LOG(ERROR) << "the background save of epoch " << r.epoch
                 << " failed: " << r.stats.status().message();
    }
  }
  finished_.clear();
  locks_.clear();
}

void Checkpointer::WaitForBackgroundSave() {
  if (in_flight_.has_value() || pending_commit_.has_value()) {
    SettleRankSaves(/*drain=*/true);
    return;
  }
  if (save_thread_ == nullptr) return;
  std::optional<BackgroundSaveResult> result = save_thread_->Wait();
  if (result.has_value()) finished_.push_back(*std::move(result));
}

std::vector<BackgroundSaveResult> Checkpointer::TakeFinishedSaves() {
  // On several ranks only agreed outcomes are known (SettleRankSaves): a
  // save seen done here may still run on another rank.
  if (save_thread_ != nullptr && !in_flight_.has_value()) {
    std::optional<BackgroundSaveResult> result = save_thread_->TakeIfDone();
    if (result.has_value()) finished_.push_back(*std::move(result));
  }
  return std::exchange(finished_, {});
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    const std::vector<std::string>& nodes, const ResumeFrom& resume) {
  WaitForBackgroundSave();  // on the ranks of the run it belongs to
  ranks_ = nullptr;
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  return ChooseStart(nullptr, resume);
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    Session& session, const std::vector<std::string>& nodes,
    const ResumeFrom& resume) {
  WaitForBackgroundSave();
  ranks_ = session.num_ranks() > 1 ? &session : nullptr;
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  if (ranks_ != nullptr) {
    // Each rank saves the nodes it hosts: a node no rank hosts would be
    // committed without its database. Every rank gets the same sums, so the
    // same error.
    std::vector<int64_t> hosted;
    for (const NodeState& state : nodes_) {
      hosted.push_back(Hosts(state) ? 1 : 0);
    }
    JG_ASSIGN_OR_RETURN(hosted, ranks_->AllReduceSum(std::move(hosted)));
    std::vector<std::string> unhosted;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      CHECK_LE(hosted[i], 1) << "node '" << nodes_[i].node << "' is hosted by "
                             << hosted[i] << " ranks";
      if (hosted[i] == 0) unhosted.push_back(nodes_[i].node);
    }
    if (!unhosted.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot checkpoint node(s) '", absl::StrJoin(unhosted, "', '"),
          "': no rank of the session runs them; checkpoint only the job's "
          "nodes"));
    }
  }
  return ChooseStart(&session, resume);
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::ChooseStart(
    Session* session, const ResumeFrom& resume) {
  staged_.reset();
  listed_bound_.reset();
  absl::Status usable = PrepareDirectory(options_.directory);
  if (usable.ok()) {
    JG_RETURN_IF_ERROR(Agree(LockNodes()));
  } else {
    // Caffe2's rule: a save that cannot happen does not stop the job. Each
    // save will report this, and the first that can save takes the locks.
    LOG(WARNING) << usable.message();
  }
  // On several ranks every rank takes part: rank 0 reads the commit log and
  // sends it to all (so every rank considers the same epochs), and each
  // rank verifies its own nodes' databases of a candidate epoch, the ranks
  // agreeing on the outcome before the next one is tried.
  std::optional<CommitLogRead> log_read;
  ResumeChoiceHooks hooks;
  hooks.read_log = [&]() -> absl::StatusOr<CommitLogRead> {
    absl::StatusOr<CommitLogRead> read;
    if (ranks_ == nullptr) {
      read = ReadCommitLogWithFallback(options_.directory);
    } else {
      // "E<status>", or "L" <damage status> "\n" <serialized log>.
      std::string sent;
      if (ranks_->rank() == 0) {
        read = ReadCommitLogWithFallback(options_.directory);
        sent = read.ok() ? absl::StrCat("L", EncodeStatus(read->damage), "\n",
                                        read->log.SerializeAsString())
                         : absl::StrCat("E", EncodeStatus(read.status()));
      }
      JG_ASSIGN_OR_RETURN(sent, ranks_->Broadcast(std::move(sent), 0));
      absl::string_view in = sent;
      if (absl::ConsumePrefix(&in, "E")) {
        read = DecodeStatus(in);
      } else {
        const size_t newline = in.find('\n');
        CommitLogRead received;
        if (!absl::ConsumePrefix(&in, "L") || newline == in.npos ||
            !received.log.ParseFromString(
                std::string(in.substr(in.find('\n') + 1)))) {
          return absl::InternalError("rank 0 sent a damaged commit log");
        }
        received.damage = DecodeStatus(in.substr(0, in.find('\n')));
        read = std::move(received);
      }
    }
    if (read.ok()) log_read = *read;
    return read;
  };
  if (session != nullptr) {
    // A candidate epoch is checked by loading it, into staged blobs that
    // Restore then commits: a resume reads each database once. Every rank
    // loads its own nodes' databases, and the session agrees on the outcome.
    hooks.verify = [&](int64_t epoch) {
      const CommittedEpoch* entry =
          log_read.has_value()
              ? FindCommittedEpoch(log_read->log, epoch, FileNames())
              : nullptr;
      return Stage(*session, epoch,
                   /*with_blob_lists=*/!StoppedInInit(entry),
                   /*committed=*/true);
    };
  }
  JG_ASSIGN_OR_RETURN(std::optional<int64_t> epoch,
                      ChooseResumeEpoch(options_.directory, options_.db_type,
                                        FileNames(), resume, hooks));
  resumed_preemption_.reset();
  if (epoch.has_value() && log_read.has_value()) {
    const CommittedEpoch* entry =
        FindCommittedEpoch(log_read->log, *epoch, FileNames());
    if (entry != nullptr && entry->has_preemption()) {
      resumed_preemption_ = entry->preemption();
    }
  }
  if (usable.ok() && (ranks_ == nullptr || ranks_->rank() == 0)) {
    // Like a directory that cannot be created: each save tries again.
    absl::Status created =
        CreateCommitLogIfMissing(options_.directory, options_.db_type);
    if (!created.ok()) LOG(WARNING) << created.message();
  }
  return epoch;
}

std::vector<std::string> Checkpointer::FileNames() const {
  std::vector<std::string> names;
  for (const NodeState& state : nodes_) names.push_back(state.file_name);
  return names;
}

std::string Checkpointer::DbPathOf(const NodeState& state,
                                   int64_t epoch) const {
  return CheckpointDbPath(options_.directory, state.file_name, epoch);
}

std::optional<std::string> Checkpointer::DbPath(const std::string& node,
                                                int64_t epoch) const {
  for (const NodeState& state : nodes_) {
    if (state.node == node) return DbPathOf(state, epoch);
  }
  return std::nullopt;
}

std::vector<std::string> Checkpointer::nodes() const {
  std::vector<std::string> names;
  for (const NodeState& state : nodes_) names.push_back(state.node);
  return names;
}

}  // namespace jobgraph

// The Checkpointer's run: its calls, Start and the resume choice, End.

#include "checkpoint/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/resume_choice.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/tier/flush.h"
#include "checkpoint/tier/local_directory.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

// How many outcomes a Checkpointer keeps for a caller that never takes them.
constexpr size_t kMaxUnclaimedOutcomes = 1024;

// `path` without "." and ".." components or a trailing slash, to compare.
std::string NormalizedPath(const std::string& path) {
  std::string normal = std::filesystem::path(path).lexically_normal();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

}  // namespace

Checkpointer::Checkpointer(CheckpointOptions options)
    : Checkpointer(std::move(options), /*single_node=*/false) {}

Checkpointer::Checkpointer(CheckpointOptions options, bool single_node)
    : impl_(std::make_unique<Impl>(std::move(options), single_node)) {}

Checkpointer::~Checkpointer() { End(); }

Checkpointer::Impl::Impl(CheckpointOptions options, bool single_node)
    : options_(std::move(options)),
      pipeline_options_(options_),
      single_node_(single_node) {}

Checkpointer::Impl::~Impl() {
  EndPipeline();
  // Nobody took these; a failure must still not go unnoticed.
  for (const SaveOutcome& outcome : unclaimed_) LogIfFailed(outcome);
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    Session& session, const std::vector<std::string>& nodes,
    const ResumeFrom& resume) {
  impl_->EndPipeline();  // on the ranks of the run it belongs to
  JG_RETURN_IF_ERROR(impl_->SetNodes(nodes));
  impl_->StartPipeline(&session);
  // Each rank saves the nodes it hosts: a node no rank hosts would be
  // committed without its database.
  Coordinator& coordinator = impl_->Pipeline(session).coordinator();
  JG_RETURN_IF_ERROR(coordinator.CheckPlacement(impl_->NodeNames()));
  return impl_->ChooseStart(&session, resume);
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    const std::vector<std::string>& nodes, const ResumeFrom& resume) {
  impl_->EndPipeline();
  JG_RETURN_IF_ERROR(impl_->SetNodes(nodes));
  impl_->StartPipeline(nullptr);
  return impl_->ChooseStart(nullptr, resume);
}

const std::optional<Preemption>& Checkpointer::resumed_preemption() const {
  return impl_->resumed_preemption_;
}

absl::Status Checkpointer::CaptureBlobNames(Session& session) {
  return impl_->CaptureBlobNames(session);
}

absl::StatusOr<CheckpointStats> Checkpointer::Restore(Session& session,
                                                      int64_t epoch) {
  return impl_->Restore(session, epoch);
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpoch(Session& session,
                                                        int64_t epoch,
                                                        bool full) {
  return impl_->SaveEpoch(session, epoch, full);
}

absl::StatusOr<CheckpointStats> Checkpointer::SavePreempted(
    Session& session, int64_t epoch, const Preemption& preemption,
    const TaskGroup& stopped) {
  return impl_->SavePreempted(session, epoch, preemption, stopped);
}

absl::Status Checkpointer::MarkLoopFinished(int64_t epoch,
                                            const Preemption& preemption) {
  return impl_->MarkLoopFinished(epoch, preemption);
}

std::vector<SaveOutcome> Checkpointer::TakeFinishedSaves() {
  return impl_->TakeFinished();
}

void Checkpointer::WaitForBackgroundSave() { impl_->WaitForSaves(); }

absl::Status Checkpointer::FlushToShared() { return impl_->FlushToShared(); }

absl::Status Checkpointer::Impl::FlushToShared() {
  WaitForSaves();
  if (on_hosts()) {
    if (!hosts_committed_.has_value()) return absl::OkStatus();
    return FlushNewestOnHosts();
  }
  if (flusher_ == nullptr || !locked_) return absl::OkStatus();
  return DrainToShared();
}

void Checkpointer::End() {
  impl_->EndPipeline();
  // Blobs staged for a Restore that never came stay in their session (which
  // may be gone); the next Stage or CaptureBlobNames there drops them.
  impl_->staged_.reset();
}

absl::StatusOr<bool> Checkpointer::LoadBlobs(
    Session& session, const std::vector<std::string>& nodes,
    const std::vector<std::string>& blob_names, int64_t epoch) {
  return impl_->LoadBlobs(session, nodes, blob_names, epoch);
}

std::optional<std::string> Checkpointer::DbPath(const std::string& node,
                                                int64_t epoch) const {
  for (const Impl::NodeState& state : impl_->nodes_) {
    if (state.node == node) return impl_->DbPathOf(state, epoch);
  }
  return std::nullopt;
}

std::vector<std::string> Checkpointer::nodes() const {
  return impl_->NodeNames();
}

const CheckpointOptions& Checkpointer::options() const {
  return impl_->options_;
}

absl::Status Checkpointer::Impl::SetNodes(
    const std::vector<std::string>& nodes) {
  if (options_.directory.empty()) {
    return absl::InvalidArgumentError(
        "CheckpointOptions.directory is empty: give the directory that holds "
        "the checkpoints");
  }
  JG_RETURN_IF_ERROR(SetUpTiers());
  if (options_.full_every < 1 || options_.full_every > kMaxFullEvery) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointOptions.full_every is ", options_.full_every,
                     "; give 1 (every save is full) to ", kMaxFullEvery));
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
    if (nodes != NodeNames()) {
      return absl::InvalidArgumentError(
          absl::StrCat("this Checkpointer was set up for nodes [",
                       absl::StrJoin(NodeNames(), ", "), "], not [",
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

void Checkpointer::Impl::StartPipeline(const Session* session) {
  EndPipeline();
  std::vector<PipelineNode> nodes;
  for (const NodeState& state : nodes_) {
    nodes.push_back({state.node, state.file_name});
  }
  hosts_.reset();
  host_tiers_.reset();
  bool background = options_.async;
  if (tiered() && session != nullptr && session->num_ranks() > 1) {
    // Every rank starts a run's pipeline at the same point: collective.
    const absl::Status set_up = SetUpHosts(*session);
    CHECK(set_up.ok()) << set_up;
    background = copies_in_background_;
  }
  if (queue_ == nullptr || queue_->runs_inline() == background) {
    queue_ = background ? NewBackgroundSaveQueue() : NewInlineSaveQueue();
  }
  pipeline_ = std::make_unique<SavePipeline>(
      pipeline_options_, std::move(nodes),
      on_hosts()
          ? NewSessionCoordinator(session, HostCoordinatorOptions(*session))
          : NewSessionCoordinator(session),
      queue_.get());
  if (!tiered()) return;
  if (on_hosts()) {
    // The partner copies run after each write, in the thread that wrote;
    // the flushes after the commit, on the job's thread (for a background
    // save: at the next boundary).
    pipeline_->SetCommitHooks(HostCommitHooks(*session));
    return;
  }
  FlushRequest flush;
  flush.local = local_dir_;
  flush.shared = options_.directory;
  flush.db_type = options_.db_type;
  flush.nodes = FileNames();
  flush.retention = options_.retention;
  flush.pause = &write_pause_;
  flusher_ = std::make_unique<Flusher>(std::move(flush));
  SavePipeline::CommitHooks hooks;
  hooks.write_pause = &write_pause_;
  hooks.committed = [this](const SaveRecord& record) {
    locked_ = true;  // a commit proves the pipeline holds the local locks
    // Until the local tier continues the shared history past the shared
    // log's newest epoch, a crash before a flush would let a resume take
    // the shared log's newest for the history (tier_log.h): a run that
    // resumed further back, or re-saved that epoch, or started from
    // scratch. Its first such commit is flushed before the save returns;
    // after that the shared newest is this run's own.
    const bool sync = first_flush_sync_ || (shared_newest_.has_value() &&
                                            record.epoch <= *shared_newest_);
    flusher_->Committed(record.epoch,
                        /*flush=*/sync || record.kind != SaveKind::kEpoch ||
                            record.epoch % options_.shared_every == 0);
    if (!sync) return;
    absl::Status flushed = flusher_->Drain();
    if (flushed.ok()) {
      first_flush_sync_ = false;
      shared_newest_.reset();
    } else {
      LOG(ERROR) << flushed.message() << "; the next commit tries again";
    }
  };
  hooks.pinned = [this] { return flusher_->Pinned(); };
  pipeline_->SetCommitHooks(std::move(hooks));
}

SavePipeline& Checkpointer::Impl::Pipeline(const Session& session) {
  if (pipeline_ == nullptr) StartPipeline(&session);
  return *pipeline_;
}

void Checkpointer::Impl::EndPipeline() {
  if (pipeline_ == nullptr) return;
  pipeline_->Drain();
  KeepOutcomes();
  if (on_hosts()) {
    // Collective, as the pipeline's Drain: every rank ends the run here.
    absl::Status ended = EndHosts();
    LOG_IF(ERROR, !ended.ok()) << ended.message();
    ForgetHostRun();
    shared_locks_.clear();
    host_session_ = nullptr;  // the run's session may go now
  }
  // A run that never held its nodes' locks (refused at Start: another run
  // holds them) must not touch either directory.
  if (flusher_ != nullptr && locked_) {
    // The end of the run leaves its newest state in the shared directory,
    // and no more than keep_local epochs in the local tier, besides the
    // pinned ones (the newest flushed): those that waited for a flush go
    // now.
    absl::Status drained = DrainToShared();
    if (drained.ok()) drained = RetireLocal();
    LOG_IF(ERROR, !drained.ok()) << drained.message();
  }
  pipeline_.reset();      // releases the locks
  copy_channel_.reset();  // collective, as the rest of the run's end
  flusher_.reset();
  locked_ = false;
}

absl::Status Checkpointer::Impl::RetireLocal() {
  const std::vector<std::string> nodes = FileNames();
  const std::vector<int64_t> pinned = flusher_->Pinned();
  std::vector<CommittedEpoch> retired;
  JG_RETURN_IF_ERROR(UpdateCommitLog(
      local_dir_, /*is_commit=*/false,
      [&](CommitLog& log) -> absl::StatusOr<bool> {
        retired = RetireEpochs(log, pipeline_options_.retention, nodes, pinned);
        return !retired.empty();
      }));
  return DeleteRetired(local_dir_, retired, /*background=*/true).status();
}

absl::Status Checkpointer::Impl::SetUpTiers() {
  if (options_.local_directory.empty()) return absl::OkStatus();
  if (options_.shared_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CheckpointOptions.shared_every is ", options_.shared_every,
        "; give 1 (flush every epoch) or more"));
  }
  if (options_.keep_local < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CheckpointOptions.keep_local is ", options_.keep_local,
                     "; the local tier keeps at least its newest epoch: give 1 "
                     "or more"));
  }
  if (options_.incremental) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CheckpointOptions.local_directory '", options_.local_directory,
        "' is set with incremental saves, which a flush does not copy yet; "
        "drop one of them"));
  }
  JG_ASSIGN_OR_RETURN(
      std::string local,
      ExpandLocalDirectory(options_.local_directory, HostName()));
  if (NormalizedPath(local) == NormalizedPath(options_.directory)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the local checkpoint directory '", local,
        "' is the shared directory itself; give a node-local path"));
  }
  local_dir_ = std::move(local);
  pipeline_options_ = options_;
  pipeline_options_.directory = local_dir_;
  pipeline_options_.retention = RetentionOptions{options_.keep_local, 0};
  return absl::OkStatus();
}

absl::Status Checkpointer::Impl::DrainToShared() {
  flusher_->FlushNewest();
  absl::Status drained = flusher_->Drain();
  if (drained.ok()) return drained;
  return absl::FailedPreconditionError(
      absl::StrCat(drained.message(), "; the local tier ", local_dir_,
                   " keeps the epoch: flush it with `ckpt flush ", local_dir_,
                   " ", options_.directory, "`"));
}

void Checkpointer::Impl::KeepOutcomes() {
  if (pipeline_ != nullptr) {
    for (SaveOutcome& outcome : pipeline_->TakeFinished()) {
      unclaimed_.push_back(std::move(outcome));
    }
  }
  if (unclaimed_.size() <= kMaxUnclaimedOutcomes) return;
  const size_t dropped = unclaimed_.size() - kMaxUnclaimedOutcomes;
  for (size_t i = 0; i < dropped; ++i) LogIfFailed(unclaimed_[i]);
  unclaimed_.erase(unclaimed_.begin(), unclaimed_.begin() + dropped);
}

absl::Status Checkpointer::Impl::Failed(SaveKind kind, int64_t epoch,
                                        absl::Status status) {
  KeepOutcomes();
  unclaimed_.push_back({epoch, kind, /*in_background=*/false, status});
  return status;
}

std::vector<SaveOutcome> Checkpointer::Impl::TakeFinished() {
  KeepOutcomes();
  return std::exchange(unclaimed_, {});
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Impl::ChooseStart(
    Session* session, const ResumeFrom& resume) {
  staged_.reset();
  Coordinator& coordinator = pipeline_->coordinator();
  // Caffe2's rule: a save that cannot happen does not stop the job. Each
  // save will report a directory that cannot be made, and the first that
  // can save takes the locks. Every process agrees on the locks, whatever
  // its own directory said.
  absl::Status usable = PrepareCheckpointDirectory(WriteDir());
  if (usable.ok() && tiered()) {
    usable = PrepareCheckpointDirectory(options_.directory);
  }
  LOG_IF(WARNING, !usable.ok()) << usable.message();
  JG_RETURN_IF_ERROR(
      coordinator.Agree(usable.ok() ? LockNodes() : absl::OkStatus()));
  // The committer reads the commit log and shares it, so that every
  // process considers the same epochs; each verifies its own nodes'
  // databases of a candidate epoch, and they agree before the next one.
  start_log_.reset();
  tiers_.reset();
  ResumeChoiceHooks hooks;
  hooks.read_log = [&]() -> absl::StatusOr<CommitLogRead> {
    absl::StatusOr<CommitLogRead> read =
        on_hosts() ? ReadHostLogs(*session)
                   : coordinator.ShareCommitLog([&] { return ReadStartLog(); });
    if (read.ok() && on_hosts() && resume.kind == ResumeFrom::Kind::kEpoch) {
      // Every rank merged the same logs: the same answer everywhere.
      JG_RETURN_IF_ERROR(CheckHostsHold(resume.epoch));
    }
    if (read.ok()) start_log_ = *read;
    return read;
  };
  // A candidate epoch is checked by loading it, into staged blobs that
  // Restore then commits: a resume reads each database once. The session
  // agrees on the outcome of every node's load.
  hooks.verify = [&](int64_t epoch) -> absl::Status {
    if (session != nullptr) {
      const CommittedEpoch* entry =
          FindCommittedEpoch(*StartLog(), epoch, FileNames());
      return StageFromCopies(*session, epoch,
                             /*with_blob_lists=*/!StoppedInInit(entry),
                             /*committed=*/true);
    }
    absl::Status verified;
    for (const std::string& dir : ReadDirs(epoch)) {
      verified =
          VerifyCommittedEpoch(dir, options_.db_type, FileNames(), epoch);
      if (verified.ok() || !absl::IsDataLoss(verified)) return verified;
      LOG(WARNING) << verified.message();
    }
    return verified;
  };
  JG_ASSIGN_OR_RETURN(std::optional<int64_t> epoch,
                      ChooseResumeEpoch(options_.directory, options_.db_type,
                                        FileNames(), resume, hooks));
  resumed_preemption_.reset();
  if (epoch.has_value() && StartLog() != nullptr) {
    const CommittedEpoch* entry =
        FindCommittedEpoch(*StartLog(), *epoch, FileNames());
    if (entry != nullptr && entry->has_preemption()) {
      resumed_preemption_ = entry->preemption();
    }
  }
  first_flush_sync_ = false;
  shared_newest_.reset();
  if (on_hosts()) {
    JG_RETURN_IF_ERROR(StartOnHosts(*session, usable));
  } else if (tiered() && !tiers_.has_value()) {
    // A start from scratch need not read the logs; the first commit's
    // flush depends on them (the hook in StartPipeline).
    ReadStartLog().IgnoreError();
  }
  if (tiers_.has_value() && usable.ok()) {
    // Local epochs outside the job's history go before this run commits
    // there: a resume must never take them for part of it.
    absl::StatusOr<std::vector<int64_t>> dropped =
        DropIgnoredLocalEpochs(local_dir_, *tiers_, FileNames());
    if (!dropped.ok()) {
      return Annotate(
          dropped.status(),
          absl::StrCat("cannot take the epochs that are not the job's "
                       "history out of the local tier ",
                       local_dir_,
                       " (a later resume could take them for "
                       "it); fix the directory or remove it"));
    }
    if (!dropped->empty()) {
      LOG(INFO) << "dropped " << dropped->size() << " epochs of the local tier "
                << local_dir_ << " that are not the job's history";
    }
  }
  if (tiers_.has_value()) {
    first_flush_sync_ = !tiers_->local_continues;
    // Newest first: the shared log's newest epoch, and the newest epoch
    // both tiers hold, which is what the shared directory has of this
    // history (the local tier keeps it until a newer one is flushed).
    bool anchored = false;
    for (auto it = tiers_->copies.rbegin(); it != tiers_->copies.rend(); ++it) {
      const bool in_shared = std::find(it->second.begin(), it->second.end(),
                                       options_.directory) != it->second.end();
      if (in_shared && !shared_newest_.has_value()) shared_newest_ = it->first;
      if (it->second.size() == 2 && !anchored) {
        flusher_->Flushed(it->first);
        anchored = true;
      }
      if (shared_newest_.has_value() && anchored) break;
    }
  }
  if (usable.ok() && coordinator.commits()) {
    // Like a directory that cannot be created: each save tries again. On
    // several hosts each leader commits its host's log, rank 0 the shared.
    std::vector<std::string> dirs = {WriteDir()};
    if (tiered() && (!on_hosts() || session->rank() == 0)) {
      dirs.push_back(options_.directory);
    }
    for (const std::string& dir : dirs) {
      absl::Status created = CreateCommitLogIfMissing(dir, options_.db_type);
      LOG_IF(WARNING, !created.ok()) << created.message();
    }
  }
  return epoch;
}

absl::Status Checkpointer::Impl::LockNodes() {
  JG_RETURN_IF_ERROR(pipeline_->LockNodes());
  // A flush writes the shared directory: no other run of the job may.
  if (on_hosts()) {
    JG_RETURN_IF_ERROR(LockSharedNodes());
  } else if (tiered()) {
    JG_RETURN_IF_ERROR(flusher_->Lock());
  }
  locked_ = true;
  return absl::OkStatus();
}

absl::StatusOr<CommitLogRead> Checkpointer::Impl::ReadStartLog() {
  if (!tiered()) return ReadCommitLogWithFallback(options_.directory);
  TierLogRead local{local_dir_, std::nullopt};
  TierLogRead shared{options_.directory, std::nullopt};
  for (TierLogRead* tier : {&local, &shared}) {
    absl::StatusOr<CommitLogRead> read = ReadCommitLogWithFallback(tier->dir);
    if (read.ok()) {
      tier->read = *std::move(read);
    } else if (tier == &local && !absl::IsNotFound(read.status())) {
      // The shared directory still holds what was flushed.
      LOG(WARNING) << "ignoring the local tier: " << read.status().message();
    } else if (!absl::IsNotFound(read.status())) {
      return read.status();
    }
  }
  if (!local.read.has_value() && !shared.read.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "neither the local tier ", local_dir_, " nor the shared directory ",
        options_.directory, " has a commit log"));
  }
  tiers_ = MergeTierLogs(local, shared, FileNames());
  return tiers_->log;
}

std::vector<std::string> Checkpointer::Impl::ReadDirs(int64_t epoch) const {
  if (!tiers_.has_value()) return {options_.directory};
  auto it = tiers_->copies.find(epoch);
  if (it == tiers_->copies.end()) return {options_.directory};
  return it->second;
}

const CommitLog* Checkpointer::Impl::StartLog() const {
  return start_log_.has_value() ? &start_log_->log : nullptr;
}

std::string Checkpointer::Impl::DbPathOf(const NodeState& state,
                                         int64_t epoch) const {
  return CheckpointDbPath(WriteDir(), state.file_name, epoch);
}

std::vector<std::string> Checkpointer::Impl::FileNames() const {
  std::vector<std::string> names;
  for (const NodeState& state : nodes_) names.push_back(state.file_name);
  return names;
}

std::vector<std::string> Checkpointer::Impl::NodeNames() const {
  std::vector<std::string> names;
  for (const NodeState& state : nodes_) names.push_back(state.node);
  return names;
}

}  // namespace jobgraph

#include "checkpoint/checkpointer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/commit_log.h"
#include "checkpoint/file_util.h"
#include "checkpoint/resume_choice.h"
#include "checkpoint/save_load_ops.h"
#include "checkpoint/verify.h"
#include "engine/collectives.h"
#include "engine/net_builder.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

int64_t MicrosSince(absl::Time start) {
  return absl::ToInt64Microseconds(absl::Now() - start);
}

// Whether the committed `entry` (may be null) is a preemption checkpoint
// taken in the middle of init, whose blob list is fixed only when init ends.
bool StoppedInInit(const CommittedEpoch* entry) {
  return entry != nullptr && entry->has_preemption() &&
         entry->preemption().group() == "init";
}

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// mkdir -p: the checkpoint directory and any missing parents.
absl::Status CreateDirs(const std::string& dir) {
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(dir));
  if (exists) return absl::OkStatus();
  const std::string parent = ParentDir(dir);
  if (!parent.empty() && parent != dir) JG_RETURN_IF_ERROR(CreateDirs(parent));
  absl::Status s = CreateDir(dir);
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

// The directory exists (created if needed) and this process may create
// databases in it. Unavailable either way, as Caffe2's cp_accessible()
// answers: the save cannot happen now, and a later one may.
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

}  // namespace

namespace checkpointer_internal {

// One thread that runs one save at a time.
class SaveThread {
 public:
  SaveThread() : thread_([this] { Loop(); }) {}
  SaveThread(const SaveThread&) = delete;
  SaveThread& operator=(const SaveThread&) = delete;
  ~SaveThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Starts `save`; the thread must be idle (Wait() returned).
  void Start(std::function<BackgroundSaveResult()> save) {
    std::lock_guard<std::mutex> lock(mu_);
    CHECK(!pending_ && !result_.has_value()) << "a save is already in flight";
    save_ = std::move(save);
    pending_ = true;
    cv_.notify_all();
  }

  // Blocks until no save runs; the result of the one that ran, if any.
  // Called between groups only (see done_).
  std::optional<BackgroundSaveResult> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !pending_; });
    Retire();
    return std::exchange(result_, std::nullopt);
  }

  // The result if the save has finished; does not block. Called between
  // groups only.
  std::optional<BackgroundSaveResult> TakeIfDone() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_) return std::nullopt;
    Retire();
    return std::exchange(result_, std::nullopt);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return quit_ || pending_; });
      if (pending_) {
        std::function<BackgroundSaveResult()> save = std::move(save_);
        // The snapshot of the save before the previous one: retired at a
        // boundary since, so no operator can point into it (see done_).
        std::function<BackgroundSaveResult()> retired = std::move(retired_);
        lock.unlock();
        retired = nullptr;  // frees it here, off the job's threads
        BackgroundSaveResult result = save();
        lock.lock();
        done_ = std::move(save);
        result_ = std::move(result);
        pending_ = false;
        cv_.notify_all();
        continue;
      }
      if (quit_) return;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Moves done_ to retired_, where the next save frees it.
  void Retire() {
    if (done_) retired_ = std::move(done_);
  }

  std::function<BackgroundSaveResult()> save_;
  // The save that ran; its function holds the snapshot. The snapshot must
  // outlive the epoch during which the save ended: an operator of that
  // epoch that made its own copy of a snapshotted tensor (copy-on-write) may
  // still read the snapshot's storage through a pointer taken before the
  // copy (in-place operators). So it is never freed when the save ends, but
  // retired when a job thread takes the result at the next boundary, and
  // freed by this thread at the start of the next save (or with the
  // SaveThread), when no operator can point into it any more.
  std::function<BackgroundSaveResult()> done_;
  std::function<BackgroundSaveResult()> retired_;
  bool pending_ = false;
  bool quit_ = false;
  std::optional<BackgroundSaveResult> result_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace checkpointer_internal

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
  if (save_thread_ == nullptr) return;
  std::optional<BackgroundSaveResult> result = save_thread_->Wait();
  if (result.has_value()) finished_.push_back(*std::move(result));
}

std::vector<BackgroundSaveResult> Checkpointer::TakeFinishedSaves() {
  if (save_thread_ != nullptr) {
    std::optional<BackgroundSaveResult> result = save_thread_->TakeIfDone();
    if (result.has_value()) finished_.push_back(*std::move(result));
  }
  return std::exchange(finished_, {});
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    const std::vector<std::string>& nodes, const ResumeFrom& resume) {
  ranks_ = nullptr;
  WaitForBackgroundSave();
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  return ChooseStart(nullptr, resume);
}

absl::StatusOr<std::optional<int64_t>> Checkpointer::Start(
    Session& session, const std::vector<std::string>& nodes,
    const ResumeFrom& resume) {
  WaitForBackgroundSave();
  ranks_ = session.num_ranks() > 1 ? &session : nullptr;
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  if (options_.async && ranks_ != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "asynchronous checkpoints (CheckpointOptions::async, "
        "--async_checkpoint) are not supported on ",
        session.num_ranks(),
        " MPI ranks yet: save synchronously (drop --async_checkpoint)"));
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

absl::StatusOr<std::vector<std::vector<std::string>>>
Checkpointer::FetchBlobNames(const Session& session,
                             absl::string_view prefix) const {
  const std::string blob = absl::StrCat(prefix, kBlobNamesBlob);
  std::vector<std::vector<std::string>> lists;
  for (const NodeState& state : nodes_) {
    absl::StatusOr<Tensor> names = session.FetchBlob(state.node, blob);
    if (!names.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpointed blob list of node '", state.node,
                       "' is not available: ", names.status().message()));
    }
    if (names->dtype() != STRING) {
      return absl::FailedPreconditionError(absl::StrCat(
          "blob '", kBlobNamesBlob, "' of node '", state.node, "' holds ",
          names->DebugString(4), ", not a list of names"));
    }
    std::vector<std::string>& list = lists.emplace_back();
    for (int64_t i = 0; i < names->numel(); ++i) {
      // A session that already ran a save holds the save's byte count; it
      // describes a save and is never part of one.
      const std::string& name = names->data<std::string>()[i];
      if (name != kSavedBytesBlob) list.push_back(name);
    }
  }
  return lists;
}

absl::Status Checkpointer::CaptureBlobNames(Session& session) {
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::CaptureBlobNames before Start: the nodes are unknown");
  }
  TaskGroup group("checkpoint_init", GLOBAL);
  for (const NodeState& state : nodes_) {
    Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_init"});
    // Blobs staged for a restore that never came are not the job's.
    task.net().Op("DropStagedBlobs", {}, {},
                  {MakeArg("prefix", std::string(kStagedBlobPrefix))});
    if (blobs_fixed_) {
      // Reused: the list of the first run, also in a new session.
      task.net().Op("GivenTensorStringFill", {}, {BlobRef(kBlobNamesBlob)},
                    {MakeArg("values", state.blobs),
                     MakeArg("shape", std::vector<int64_t>{static_cast<int64_t>(
                                          state.blobs.size())})});
    } else {
      task.net().Op("GetAllBlobNames", {}, {BlobRef(kBlobNamesBlob)},
                    {MakeArg("include_shared", 0)});
    }
    task.AddOutput(BlobRef(kBlobNamesBlob, state.node));
  }
  JG_RETURN_IF_ERROR(Annotate(session.Run(group), "checkpoint init"));
  JG_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> lists,
                      FetchBlobNames(session, ""));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].blobs = std::move(lists[i]);
  }
  blobs_fixed_ = true;
  return absl::OkStatus();
}

absl::Status Checkpointer::Stage(Session& session, int64_t epoch,
                                 bool with_blob_lists, bool committed) {
  // Names this load in every workspace it stages into (the marker), so that
  // a Restore commits only blobs of this load, never those an earlier one
  // left in another session; unique in the process.
  static std::atomic<int64_t> loads{0};
  const std::string stage = absl::StrCat("epoch ", epoch, " #", ++loads);
  // Each database holds exactly the blobs that were checkpointed, the list
  // itself included, so one pass over it restores the blobs and the list.
  // The Load ops check what a verification would (values, files, node and
  // epoch); the nodes load in parallel. Whatever an earlier Stage left in
  // this session goes first (in a group of its own: an op of the load's net
  // holds the marker blob from the net's creation on), so only this load
  // can be committed.
  DropStaged(session);
  TaskGroup group("checkpoint_load", GLOBAL);
  for (const NodeState& state : nodes_) {
    Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_load"});
    task.net().Op("Load", {}, {},
                  {MakeArg("db", DbPathOf(state, epoch)),
                   MakeArg("db_type", options_.db_type),
                   MakeArg("absolute_path", 1), MakeArg("load_all", 1),
                   MakeArg("add_prefix", std::string(kStagedBlobPrefix)),
                   MakeArg("expected_node", state.file_name),
                   MakeArg("expected_epoch", epoch)});
    task.net().Op("GivenTensorStringFill", {},
                  {BlobRef(std::string(kStagedBlobPrefix))},
                  {MakeArg("values", std::vector<std::string>{stage}),
                   MakeArg("shape", std::vector<int64_t>{1})});
  }
  absl::Status status = session.Run(group);
  std::vector<std::vector<std::string>> lists;
  if (status.ok() && with_blob_lists) {
    absl::StatusOr<std::vector<std::vector<std::string>>> fetched =
        FetchBlobNames(session, kStagedBlobPrefix);
    if (fetched.ok()) {
      lists = *std::move(fetched);
    } else {
      status = fetched.status();
    }
  }
  if (status.ok()) {
    staged_ = Staged{epoch, stage, std::move(lists)};
    return status;
  }
  DropStaged(session);
  // The commit log lists the epoch, so a database missing from it is
  // damage, as verification reports it.
  if (committed && absl::IsNotFound(status)) {
    return absl::DataLossError(absl::StrCat("committed epoch ", epoch,
                                            " is damaged: ", status.message()));
  }
  return status;
}

absl::Status Checkpointer::RunStagingOp(Session& session, const std::string& op,
                                        std::vector<Argument> args) {
  args.push_back(MakeArg("prefix", std::string(kStagedBlobPrefix)));
  TaskGroup group(absl::StrCat("checkpoint_", op), GLOBAL);
  for (const NodeState& state : nodes_) {
    group.NewTask(Node(state.node), {.name = op}).net().Op(op, {}, {}, args);
  }
  return session.Run(group);
}

void Checkpointer::DropStaged(Session& session) {
  staged_.reset();
  // Removing blobs cannot fail but for a session that cannot run at all;
  // what stays is dropped by the next Stage.
  absl::Status status = RunStagingOp(session, "DropStagedBlobs", {});
  LOG_IF(ERROR, !status.ok())
      << "dropping staged checkpoint blobs: " << status.message();
}

absl::Status Checkpointer::CommitStaged(Session& session, bool check_only) {
  CHECK(staged_.has_value());
  return RunStagingOp(session, "CommitStagedBlobs",
                      {MakeArg("stage", staged_->stage),
                       MakeArg("check_only", check_only ? 1 : 0)});
}

absl::StatusOr<CheckpointStats> Checkpointer::Restore(Session& session,
                                                      int64_t epoch) {
  WaitForBackgroundSave();
  const absl::Time start = absl::Now();
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::Restore before Start: the nodes are unknown");
  }
  const std::string what = absl::StrCat("cannot resume from epoch ", epoch,
                                        " in ", options_.directory);
  absl::StatusOr<CommitLogRead> log =
      ReadCommitLogWithFallback(options_.directory);
  const CommittedEpoch* entry =
      log.ok() ? FindCommittedEpoch(log->log, epoch, FileNames()) : nullptr;
  // What Start(session, ...) staged is used if every node of this session
  // holds it (the staged epoch's session may be another, or gone); checked
  // on every node before any commits, so that none is replaced unless all
  // are. A Stage here puts it on every node, or fails.
  const bool staged_here = staged_.has_value() && staged_->epoch == epoch &&
                           CommitStaged(session, /*check_only=*/true).ok();
  if (!staged_here) {
    JG_RETURN_IF_ERROR(Annotate(Stage(session, epoch, !StoppedInInit(entry),
                                      /*committed=*/entry != nullptr),
                                what));
  }
  absl::Status committed = CommitStaged(session, /*check_only=*/false);
  if (!committed.ok()) {
    DropStaged(session);
    return Annotate(committed, what);
  }
  std::vector<std::vector<std::string>> lists = std::move(staged_->blob_lists);
  staged_.reset();
  if (!lists.empty()) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].blobs = std::move(lists[i]);
    }
    blobs_fixed_ = true;
  }

  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  if (entry != nullptr) stats.bytes = entry->total_bytes();
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::Status Checkpointer::PrepareSave(int64_t epoch, bool* agreed) {
  absl::Status local = PrepareDirectory(options_.directory);
  if (local.ok()) local = LockNodes();
  *agreed = !listed_bound_.has_value() || epoch <= *listed_bound_;
  if (!*agreed) return local;
  const bool committer = ranks_ == nullptr || ranks_->rank() == 0;
  int64_t newest = -1;  // of the job's entries left in the log
  if (local.ok() && committer) {
    // Before any database is in place: databases without a commit log are
    // then always damage, never a crash before the first commit.
    local = CreateCommitLogIfMissing(options_.directory, options_.db_type);
    // The log must never list an epoch over databases being replaced.
    if (local.ok()) {
      absl::StatusOr<int64_t> left =
          ForgetEpoch(options_.directory, epoch, FileNames());
      if (left.ok()) newest = *left;
      local = left.status();
    }
  }
  if (ranks_ != nullptr) {
    // The failures and rank 0's newest epoch in one small all-reduce.
    JG_ASSIGN_OR_RETURN(
        std::vector<int64_t> sums,
        ranks_->AllReduceSum({local.ok() ? 0 : 1, committer ? newest + 1 : 0}));
    if (sums[0] > 0) return Agree(local);
    newest = sums[1] - 1;
  }
  JG_RETURN_IF_ERROR(local);
  listed_bound_ = newest;
  return absl::OkStatus();
}

void Checkpointer::NoteCommitAttempt(int64_t epoch, bool committed) {
  if (!listed_bound_.has_value()) return;
  // A commit drops the job's later entries; a failed one may still have
  // listed the epoch (say, the log was renamed in place and then its
  // directory's fsync failed).
  listed_bound_ = committed ? epoch : std::max(*listed_bound_, epoch);
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpoch(Session& session,
                                                        int64_t epoch) {
  if (!blobs_fixed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot save epoch ", epoch,
        ": the checkpointed blobs are not fixed yet (call CaptureBlobNames "
        "or Restore first)"));
  }
  if (options_.async) return SaveEpochInBackground(session, epoch);
  WaitForBackgroundSave();
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) blobs.push_back(state.blobs);
  return SaveAndCommit(session, epoch, blobs, std::nullopt);
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveEpochInBackground(
    Session& session, int64_t epoch) {
  const absl::Time start = absl::Now();
  WaitForBackgroundSave();
  const int64_t waited = MicrosSince(start);
  bool agreed = false;  // one process: the status is the only one
  JG_RETURN_IF_ERROR(PrepareSave(epoch, &agreed));
  // What the background thread writes: each node's database path and name,
  // and its frozen blobs.
  struct NodeSnapshot {
    std::string path;
    std::string file_name;
    std::vector<BlobSnapshot> blobs;
  };
  std::vector<NodeSnapshot> snapshots;
  for (const NodeState& state : nodes_) {
    JG_ASSIGN_OR_RETURN(std::vector<BlobSnapshot> blobs,
                        session.SnapshotBlobs(state.node, state.blobs));
    snapshots.push_back(
        {DbPathOf(state, epoch), state.file_name, std::move(blobs)});
  }
  const absl::Time snapshot_taken = absl::Now();
  if (save_thread_ == nullptr) {
    save_thread_ = std::make_unique<checkpointer_internal::SaveThread>();
  }
  // std::function needs a copyable callable: the snapshot is shared.
  auto frozen =
      std::make_shared<std::vector<NodeSnapshot>>(std::move(snapshots));
  save_thread_->Start([this, epoch, snapshot_taken,
                       snapshots_ptr =
                           std::move(frozen)]() -> BackgroundSaveResult {
    const std::vector<NodeSnapshot>& snapshots = *snapshots_ptr;
    BackgroundSaveResult result;
    result.epoch = epoch;
    auto save = [&]() -> absl::StatusOr<CheckpointStats> {
      CheckpointStats stats;
      stats.epoch = epoch;
      stats.num_dbs = static_cast<int>(snapshots.size());
      for (const NodeSnapshot& node : snapshots) {
        std::vector<BlobToSave> blobs;
        for (const BlobSnapshot& b : node.blobs) {
          blobs.push_back({b.name, b.blob.get()});
        }
        CheckpointDbOptions db_options;
        db_options.node = node.file_name;
        db_options.epoch = epoch;
        db_options.serialization.chunk_bytes = options_.chunk_bytes;
        JG_ASSIGN_OR_RETURN(
            int64_t bytes,
            WriteCheckpointDb(options_.db_type, node.path, blobs, db_options));
        stats.bytes += bytes;
      }
      absl::Status committed =
          Commit(epoch, stats.bytes, snapshot_taken, std::nullopt);
      NoteCommitAttempt(epoch, committed.ok());
      JG_RETURN_IF_ERROR(committed);
      stats.wall_micros = MicrosSince(snapshot_taken);
      return stats;
    };
    result.stats = save();
    return result;
  });
  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  stats.in_background = true;
  stats.waited_micros = waited;
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::StatusOr<CheckpointStats> Checkpointer::SavePreempted(
    Session& session, int64_t epoch, const Preemption& preemption) {
  WaitForBackgroundSave();
  if (nodes_.empty()) {
    return absl::FailedPreconditionError(
        "Checkpointer::SavePreempted before Start: the nodes are unknown");
  }
  std::vector<std::vector<std::string>> blobs;
  for (const NodeState& state : nodes_) {
    absl::StatusOr<Tensor> value =
        session.FetchBlob(state.node, kPlanPositionBlob);
    PlanPosition position;
    if (!value.ok() || value->dtype() != STRING || value->numel() != 1 ||
        !position.ParseFromString(value->data<std::string>()[0])) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", state.node, "' holds no plan position of a stopped run (",
          value.ok() ? "damaged" : value.status().message(),
          "); only a run stopped on request can be saved mid-epoch"));
    }
    if (!position.cannot_save().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the state of node '", state.node,
          "' at the stop cannot be saved: ", position.cannot_save()));
    }
    std::vector<std::string> names;
    for (const std::string& name : position.root_blob()) {
      // The byte count of an earlier save describes that save only.
      if (name != kSavedBytesBlob) names.push_back(name);
    }
    blobs.push_back(std::move(names));
  }
  return SaveAndCommit(session, epoch, blobs, preemption);
}

absl::Status Checkpointer::MarkLoopFinished(int64_t epoch,
                                            const Preemption& preemption) {
  WaitForBackgroundSave();
  return OnCommitter([&] {
    return MarkEpochLoopFinished(options_.directory, epoch, FileNames(),
                                 preemption);
  });
}

absl::StatusOr<CheckpointStats> Checkpointer::SaveAndCommit(
    Session& session, int64_t epoch,
    const std::vector<std::vector<std::string>>& blobs,
    const std::optional<Preemption>& preemption) {
  const absl::Time start = absl::Now();
  bool agreed = false;
  const absl::Status ready = PrepareSave(epoch, &agreed);
  if (agreed) JG_RETURN_IF_ERROR(ready);
  TaskGroup group("checkpoint_save", GLOBAL);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeState& state = nodes_[i];
    std::vector<BlobRef> inputs(blobs[i].begin(), blobs[i].end());
    Task& task = group.NewTask(Node(state.node), {.name = "checkpoint_save"});
    task.net().Op(
        "Save", inputs, {BlobRef(kSavedBytesBlob)},
        {MakeArg("db", DbPathOf(state, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1),
         MakeArg("chunk_bytes", options_.chunk_bytes),
         MakeArg("node", state.file_name), MakeArg("epoch", epoch)});
    task.AddOutput(BlobRef(kSavedBytesBlob, state.node));
  }
  // Each rank saves its own nodes and adds up their bytes; the ranks then
  // agree once on everything (readiness, saves, bytes) in one exchange.
  auto local_bytes = [&]() -> absl::StatusOr<int64_t> {
    JG_RETURN_IF_ERROR(ready);
    JG_RETURN_IF_ERROR(session.RunHosted(group));
    int64_t total = 0;
    for (const NodeState& state : nodes_) {
      if (!Hosts(state)) continue;
      JG_ASSIGN_OR_RETURN(Tensor bytes,
                          session.FetchHostedBlob(state.node, kSavedBytesBlob));
      if (bytes.dtype() != INT64 || bytes.numel() != 1) {
        return absl::InternalError(absl::StrCat(
            "the save of node '", state.node, "' reported ",
            bytes.DebugString(4), " instead of its size in bytes"));
      }
      total += bytes.scalar<int64_t>();
    }
    return total;
  };
  CheckpointStats stats;
  stats.epoch = epoch;
  stats.num_dbs = static_cast<int>(nodes_.size());
  absl::StatusOr<int64_t> mine = local_bytes();
  const absl::Time written = absl::Now();
  stats.write_micros = absl::ToInt64Microseconds(written - start);
  if (ranks_ == nullptr) {
    JG_ASSIGN_OR_RETURN(stats.bytes, std::move(mine));
  } else {
    // The total and the count of failures in one small all-reduce; the
    // messages only after a failure.
    JG_ASSIGN_OR_RETURN(
        std::vector<int64_t> sums,
        ranks_->AllReduceSum({mine.ok() ? *mine : 0, mine.ok() ? 0 : 1}));
    if (sums[1] > 0) JG_RETURN_IF_ERROR(Agree(mine.status()));
    stats.bytes = sums[0];
  }
  const absl::Time agreed_at = absl::Now();
  stats.agree_micros = absl::ToInt64Microseconds(agreed_at - written);
  // Every rank's databases are durable now (the agreed outcome): the epoch
  // is committed by one rank, for all.
  const absl::Status committed = OnCommitter(
      [&] { return Commit(epoch, stats.bytes, start, preemption); });
  NoteCommitAttempt(epoch, committed.ok());
  JG_RETURN_IF_ERROR(committed);
  stats.commit_micros = MicrosSince(agreed_at);
  stats.wall_micros = MicrosSince(start);
  return stats;
}

absl::Status Checkpointer::Commit(int64_t epoch, int64_t bytes,
                                  absl::Time start,
                                  const std::optional<Preemption>& preemption) {
  EpochCommit commit;
  commit.epoch = epoch;
  commit.nodes = FileNames();
  commit.total_bytes = bytes;
  commit.save_micros = MicrosSince(start);
  commit.preemption = preemption;
  JG_RETURN_IF_ERROR(CommitEpoch(options_.directory, options_.db_type, commit));
  // The epoch is committed now; a failure to drop old epochs must not turn
  // it into a failed save. It is logged, and the next commit tries again.
  absl::Status retention =
      ApplyRetention(options_.directory, options_.retention, commit.nodes,
                     /*background=*/true)
          .status();
  if (!retention.ok()) {
    LOG(ERROR) << "epoch " << epoch << " is committed in " << options_.directory
               << ", but retention failed: " << retention;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Checkpointer::LoadBlobs(
    Session& session, const std::vector<std::string>& nodes,
    const std::vector<std::string>& blob_names, int64_t epoch) {
  WaitForBackgroundSave();
  JG_RETURN_IF_ERROR(SetNodes(nodes));
  // Unlike Caffe2, every node's database is checked before anything is
  // loaded, so a missing one leaves every workspace untouched.
  TaskGroup check("checkpoint_db_exists", GLOBAL);
  std::vector<TaskOutput> exists;
  for (const NodeState& state : nodes_) {
    Task& task =
        check.NewTask(Node(state.node), {.name = "checkpoint_db_exists"});
    BlobRef found(
        absl::StrCat("checkpoint_db_exists/", state.file_name, ".", epoch),
        state.node);
    task.net().Op(
        "DBExists", {}, {found},
        {MakeArg("db_name", DbPathOf(state, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1)});
    exists.push_back(task.AddOutput(found));
  }
  JG_RETURN_IF_ERROR(session.Run(check));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    JG_ASSIGN_OR_RETURN(Tensor present, session.Fetch(exists[i]));
    if (!present.scalar<bool>()) {
      LOG(WARNING) << "checkpoint " << DbPathOf(nodes_[i], epoch)
                   << " does not exist; loading nothing";
      return false;
    }
  }
  TaskGroup load("checkpoint_partial_load", GLOBAL);
  std::vector<BlobRef> outputs(blob_names.begin(), blob_names.end());
  for (const NodeState& state : nodes_) {
    Task& task =
        load.NewTask(Node(state.node), {.name = "checkpoint_partial_load"});
    task.net().Op(
        "Load", {}, outputs,
        {MakeArg("db", DbPathOf(state, epoch)),
         MakeArg("db_type", options_.db_type), MakeArg("absolute_path", 1),
         MakeArg("allow_incomplete", 1)});
  }
  JG_RETURN_IF_ERROR(session.Run(load));
  return true;
}

}  // namespace jobgraph

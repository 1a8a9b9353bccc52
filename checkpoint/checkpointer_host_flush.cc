// The flush of a job's host tiers (checkpointer_hosts.cc) to the shared
// directory. Each rank copies the databases of the nodes it runs from its
// host's tier; rank 0 begins and commits the epoch in the shared log once
// every rank's copies are in place (FlushEpoch's steps, tier/flush.h).
//
// Two ways, both decided alike on every rank:
//   - synchronously, on the job's thread, for the run's first commit, a
//     preemption checkpoint, the mark after the last epoch, and the end of
//     the run (the newest epoch): they return once the shared log lists it;
//   - in the background for every other shared_every-th epoch: a thread of
//     each rank's (HostCopier) copies while the job goes on; at each later
//     save the ranks agree on the newest epoch every rank has copied, and
//     rank 0 commits it. A copier that falls behind copies the newest epoch
//     handed to it, not a backlog.
// The epochs handed to the copiers stay in the hosts' tiers (retention
// pins them) until a newer one is in the shared log.

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>  // NOLINT(build/c++11)
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/retention.h"
#include "checkpoint/tier/flush.h"
#include "engine/collectives.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {

// Copies this rank's nodes' databases of the epochs handed to it, on a
// thread of its own, newest first. Thread-safe.
class Checkpointer::Impl::HostCopier {
 public:
  // `request` without its epoch; `nodes`: this rank's nodes.
  HostCopier(FlushRequest request, std::vector<std::string> nodes)
      : request_(std::move(request)), nodes_(std::move(nodes)) {}
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;
  // Finishes the copy in progress; drops a waiting one.
  ~HostCopier() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      waiting_.reset();
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Copies `epoch` next, in place of one waiting.
  void Copy(int64_t epoch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = epoch;
      if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    }
    changed_.notify_all();
  }

  // Waits until nothing is being copied or waiting.
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return !waiting_ && !copying_; });
  }

  // The epochs whose copies ended since the last call: OK or why not.
  std::map<int64_t, absl::Status> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(ended_, {});
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      changed_.wait(lock, [&] { return stop_ || waiting_.has_value(); });
      if (!waiting_.has_value()) return;  // stopped
      copying_ = std::exchange(waiting_, std::nullopt);
      FlushRequest request = request_;
      request.epoch = *copying_;
      lock.unlock();
      absl::Status copied = CopyFlushedNodes(request, nodes_).status();
      lock.lock();
      ended_[*copying_] = std::move(copied);
      copying_.reset();
      changed_.notify_all();
    }
  }

  const FlushRequest request_;
  const std::vector<std::string> nodes_;
  // std::mutex rather than absl::Mutex: ThreadSanitizer does not see the
  // system Abseil's mutex. Guards the members below but thread_.
  std::mutex mu_;
  std::condition_variable changed_;
  std::optional<int64_t> waiting_;
  std::optional<int64_t> copying_;
  std::map<int64_t, absl::Status> ended_;
  bool stop_ = false;
  std::thread thread_;  // started by the first Copy
};

void Checkpointer::Impl::HostCopierDeleter::operator()(HostCopier* c) const {
  delete c;
}

FlushRequest Checkpointer::Impl::HostFlushRequest(int64_t epoch) const {
  FlushRequest request;
  request.local = local_dir_;
  request.shared = options_.directory;
  request.db_type = options_.db_type;
  request.nodes = FileNames();
  request.epoch = epoch;
  request.retention = options_.retention;
  request.copied_by_hosts = true;
  return request;
}

std::vector<std::string> Checkpointer::Impl::OwnFileNames(
    const Session& session) const {
  std::vector<std::string> mine;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (node_rank_[i] == session.rank()) mine.push_back(nodes_[i].file_name);
  }
  return mine;
}

absl::Status Checkpointer::Impl::FlushHosts(const Session& session,
                                            int64_t epoch) {
  const FlushRequest request = HostFlushRequest(epoch);
  // Rank 0 (host 0's leader, which commits there too) begins: the shared
  // log stops listing the epoch and those after it.
  absl::StatusOr<FlushBegun> begun = absl::UnknownError("not rank 0");
  absl::Status local;
  if (session.rank() == 0) {
    begun = BeginFlush(request);
    local = begun.status();
  }
  JG_ASSIGN_OR_RETURN(int64_t there,
                      pipeline_->coordinator().AgreeWithCommitter(
                          local, begun.ok() && begun->already_there ? 1 : 0));
  if (there == 0) {
    absl::StatusOr<int64_t> copied =
        CopyFlushedNodes(request, OwnFileNames(session));
    JG_RETURN_IF_ERROR(pipeline_->coordinator().Agree(copied.status()));
    JG_RETURN_IF_ERROR(pipeline_->coordinator().Agree(
        session.rank() == 0 ? CommitFlush(request, *begun) : absl::OkStatus()));
    if (session.rank() == 0) {
      LOG(INFO) << "epoch " << epoch << " flushed to " << options_.directory;
    }
  }
  Flushed(epoch);
  return absl::OkStatus();
}

void Checkpointer::Impl::ForgetHostRun() {
  hosts_committed_.reset();
  hosts_flushed_.reset();
  copier_.reset();
  hosts_copying_.clear();
  copied_.clear();
  PublishPins();
}

void Checkpointer::Impl::Flushed(int64_t epoch) {
  hosts_flushed_ = epoch;
  // Older copies in flight can no longer be committed (the shared log
  // would go back): their epochs need not stay in the tiers.
  hosts_copying_.erase(hosts_copying_.begin(),
                       hosts_copying_.upper_bound(epoch));
  copied_.erase(copied_.begin(), copied_.upper_bound(epoch));
  PublishPins();
}

absl::Status Checkpointer::Impl::SettleHostCopies(const Session& session,
                                                  bool wait) {
  if (copier_ == nullptr) return absl::OkStatus();
  // The copies give way to a save's write (write_pause_), which waits for
  // nothing of theirs: this wait ends once that write has.
  if (wait) copier_->Wait();
  // This rank's ended copies; its failures are its own to report.
  bool failed = false;
  for (auto& [epoch, status] : copier_->Take()) {
    if (status.ok()) {
      copied_.insert(epoch);
    } else {
      failed = true;
      LOG(ERROR) << "epoch " << epoch << " cannot be copied to "
                 << options_.directory
                 << " in the background: " << status.message();
    }
  }
  // The newest epoch every rank copied, newer than what the shared log
  // has: every rank learns every rank's copies, and whether a copy failed
  // ("F").
  std::string mine;
  if (failed) AppendPiece(&mine, "F");
  for (int64_t epoch : copied_) AppendPiece(&mine, absl::StrCat(epoch));
  JG_ASSIGN_OR_RETURN(std::vector<std::string> all, session.AllGather(mine));
  std::map<int64_t, int> ranks_done;
  for (const std::string& of_rank : all) {
    absl::string_view in = of_rank;
    absl::string_view piece;
    while (ConsumePiece(&in, &piece)) {
      if (piece == "F") {
        // The next commit is flushed before its save returns: the shared
        // directory does not fall behind unnoticed, and the epochs the
        // failed copies pinned are let go once it is there.
        hosts_flush_next_ = true;
        continue;
      }
      int64_t epoch = 0;
      CHECK(absl::SimpleAtoi(piece, &epoch));
      ++ranks_done[epoch];
    }
  }
  // Every database of these epochs is in place in the shared directory:
  // rank 0 commits them, oldest first (nothing of this job newer than
  // them is listed there, so BeginFlush has nothing to take out).
  for (const auto& [epoch, count] : ranks_done) {
    if (count != session.num_ranks() ||
        (hosts_flushed_.has_value() && epoch <= *hosts_flushed_)) {
      continue;
    }
    absl::Status committed;
    if (session.rank() == 0) {
      const FlushRequest request = HostFlushRequest(epoch);
      absl::StatusOr<FlushBegun> begun = BeginFlush(request);
      committed = begun.ok() && !begun->already_there
                      ? CommitFlush(request, *begun)
                      : begun.status();
    }
    committed = pipeline_->coordinator().Agree(committed);
    if (!committed.ok()) {
      return Annotate(committed,
                      absl::StrCat("cannot commit epoch ", epoch, " in ",
                                   options_.directory, " after its copy"));
    }
    if (session.rank() == 0) {
      LOG(INFO) << "epoch " << epoch << " flushed to " << options_.directory
                << " (copied in the background)";
    }
    Flushed(epoch);
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::Impl::FlushHostsIfDue(const Session& session,
                                                 const SaveRecord& record) {
  hosts_committed_ = record.epoch;
  PublishPins();
  // The run's first commit, a preemption checkpoint and the mark are in
  // the shared log before the save returns.
  const bool now = hosts_flush_next_ || record.kind != SaveKind::kEpoch;
  const bool due = now || record.epoch % options_.shared_every == 0;
  absl::Status settled = SettleHostCopies(session, /*wait=*/now);
  LOG_IF(ERROR, !settled.ok() && session.rank() == 0) << settled.message();
  if (!due) return absl::OkStatus();
  if (!now) {
    if (copier_ == nullptr) {
      // In the background: it gives way to the saves' writes.
      FlushRequest request = HostFlushRequest(0);
      request.pause = &write_pause_;
      copier_.reset(new HostCopier(std::move(request), OwnFileNames(session)));
    }
    hosts_copying_.insert(record.epoch);
    PublishPins();
    copier_->Copy(record.epoch);
    return absl::OkStatus();
  }
  absl::Status flushed = FlushHosts(session, record.epoch);
  if (flushed.ok()) {
    hosts_flush_next_ = false;
    return flushed;
  }
  hosts_flush_next_ = true;
  return absl::FailedPreconditionError(absl::StrCat(
      "epoch ", record.epoch, " is committed in the hosts' local tiers (",
      options_.local_directory, ") but cannot be flushed to ",
      options_.directory, ": ", flushed.message()));
}

absl::Status Checkpointer::Impl::FlushNewestOnHosts() {
  const Session& session = *host_session_;
  absl::Status status = SettleHostCopies(session, /*wait=*/true);
  if (status.ok() && hosts_committed_ != hosts_flushed_) {
    status = FlushHosts(session, *hosts_committed_);
  }
  if (status.ok()) return status;
  return absl::FailedPreconditionError(absl::StrCat(
      "epoch ", *hosts_committed_, " is committed in the hosts' local tiers (",
      options_.local_directory, ") but cannot be flushed to ",
      options_.directory, ": ", status.message(),
      "; the tiers keep it: run the job on its hosts again to flush it"));
}

absl::Status Checkpointer::Impl::EndHosts() {
  // A run that committed nothing has nothing to flush or retire (and its
  // session may be gone).
  if (!hosts_committed_.has_value()) return absl::OkStatus();
  const Session& session = *host_session_;
  const absl::Status status = FlushNewestOnHosts();
  copier_.reset();
  hosts_copying_.clear();
  copied_.clear();
  PublishPins();
  if (hosts_->IsLeader(session.rank())) {
    // keep_local, keeping what the shared directory holds of this history.
    std::vector<int64_t> pinned;
    if (hosts_flushed_.has_value()) pinned.push_back(*hosts_flushed_);
    if (!status.ok()) pinned.push_back(*hosts_committed_);
    std::vector<CommittedEpoch> retired;
    absl::Status retire = UpdateCommitLog(
        local_dir_, /*is_commit=*/false,
        [&](CommitLog& log) -> absl::StatusOr<bool> {
          retired = RetireEpochs(log, pipeline_options_.retention, FileNames(),
                                 pinned);
          return !retired.empty();
        });
    if (retire.ok()) {
      retire = DeleteRetired(local_dir_, retired, /*background=*/true).status();
    }
    LOG_IF(ERROR, !retire.ok()) << retire.message();
  }
  return status;
}

}  // namespace jobgraph

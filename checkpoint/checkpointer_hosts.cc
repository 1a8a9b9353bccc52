// The Checkpointer's local tiers on several hosts (an MpiSession with
// CheckpointOptions::local_directory; tier/host_tiers.h): the hosts' map,
// the save's hooks (the partner copies after each write) and the start of a
// run. The resume from the nearest copy of each node's database is in
// checkpointer_host_restore.cc, the flush to the shared directory in
// checkpointer_host_flush.cc.
//
// Everything here that exchanges runs on the job's thread, at points every
// rank reaches in the same order (for a background save: the boundary
// where the pipeline agrees on its write, or on its commit), but for the
// partner copies, which run in the thread that writes a save (for a
// background save, the queue's, over a SideChannel of their own).

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/tier/flush.h"
#include "checkpoint/tier/local_directory.h"
#include "checkpoint/util/file_util.h"
#include "engine/collectives.h"
#include "engine/status_macros.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
absl::Status Checkpointer::Impl::SetUpHosts(const Session& session) {
  // What each rank says of itself: its host, then the nodes it runs.
  std::string mine;
  AppendPiece(&mine, HostName());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (session.HostsNode(nodes_[i].node))
      AppendPiece(&mine, std::to_string(i));
  }
  JG_ASSIGN_OR_RETURN(std::vector<std::string> all, session.AllGather(mine));
  std::vector<std::string> host_of_rank;
  node_rank_.assign(nodes_.size(), -1);
  for (size_t rank = 0; rank < all.size(); ++rank) {
    absl::string_view in = all[rank];
    absl::string_view piece;
    CHECK(ConsumePiece(&in, &piece)) << "rank " << rank << "'s host";
    host_of_rank.emplace_back(piece);
    while (ConsumePiece(&in, &piece)) {
      const size_t node = std::stoul(std::string(piece));
      CHECK_LT(node, nodes_.size());
      node_rank_[node] = static_cast<int>(rank);
    }
  }
  hosts_ = MakeHostMap(host_of_rank);
  node_host_.clear();
  for (int rank : node_rank_) {
    node_host_.push_back(rank < 0 ? -1 : hosts_->host_of_rank[rank]);
  }
  host_session_ = &session;
  // The partner copies run in the thread that writes: with background
  // saves, over a channel of their own beside the job's collectives.
  copy_channel_.reset();
  copies_in_background_ = false;
  if (options_.async) {
    absl::StatusOr<std::unique_ptr<SideChannel>> opened =
        session.OpenSideChannel();
    if (opened.ok()) {
      copy_channel_ = *std::move(opened);
      copies_in_background_ = true;
      LOG_IF(INFO, session.rank() == 0)
          << "partner copies run in the background, as each save's write "
             "ends, over a channel of their own";
    } else {
      LOG_IF(WARNING, session.rank() == 0)
          << "checkpoints are saved synchronously: the partner copies of a "
             "background save need a side channel of the session, and "
          << opened.status().message();
    }
  }
  if (copy_channel_ == nullptr) copy_channel_ = SessionChannel(session);
  LOG_IF(WARNING, hosts_->num_hosts() < 2 && session.rank() == 0)
      << "the job runs on one host (" << hosts_->hosts[0]
      << "): its local tier has no partner copies on another host, so a "
         "lost host loses what was not flushed to "
      << options_.directory;
  return absl::OkStatus();
}

SessionCoordinatorOptions Checkpointer::Impl::HostCoordinatorOptions(
    const Session& session) const {
  SessionCoordinatorOptions options;
  for (int rank = 0; rank < session.num_ranks(); ++rank) {
    options.committers.push_back(hosts_->IsLeader(rank));
  }
  return options;
}

SavePipeline::CommitHooks Checkpointer::Impl::HostCommitHooks(
    const Session& session) {
  SavePipeline::CommitHooks hooks;
  hooks.after_write = [this](const SaveRecord& record,
                             const absl::Status& written) {
    return CopyToPartner(*copy_channel_, record, written);
  };
  hooks.held_nodes = [this] { return HeldNodes(); };
  hooks.write_pause = &write_pause_;
  hooks.host = hosts_->hosts[hosts_->host_of_rank[session.rank()]];
  // Called in the thread that commits (the queue's, for a background
  // save): a copy the job's thread publishes.
  hooks.pinned = [this] {
    std::lock_guard<std::mutex> lock(pins_mu_);
    return pins_;
  };
  hooks.shared = [this, &session](const SaveRecord& record) {
    // The epoch is committed on two hosts; a flush of an epoch's save that
    // fails is tried again with the next commit, and at the end of the
    // run; a preemption's or the mark's is their call's failure.
    hosts_flush_status_ = FlushHostsIfDue(session, record);
    LOG_IF(ERROR, !hosts_flush_status_.ok() && record.kind == SaveKind::kEpoch)
        << hosts_flush_status_.message();
  };
  return hooks;
}

void Checkpointer::Impl::PublishPins() {
  // What the shared directory holds of this history stays in the local
  // tiers (a resume checks them against it), and so do the newest commit
  // until it is flushed (the end of the run copies it) and the epochs the
  // background copies read.
  std::vector<int64_t> pinned;
  if (hosts_flushed_.has_value()) pinned.push_back(*hosts_flushed_);
  if (hosts_committed_.has_value()) pinned.push_back(*hosts_committed_);
  pinned.insert(pinned.end(), hosts_copying_.begin(), hosts_copying_.end());
  std::lock_guard<std::mutex> lock(pins_mu_);
  pins_ = std::move(pinned);
}

std::vector<std::string> Checkpointer::Impl::HeldNodes() const {
  const int mine = hosts_->host_of_rank[host_session_->rank()];
  const int source = hosts_->PartnerSourceOf(mine);
  std::vector<std::string> held;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (node_host_[i] == mine || node_host_[i] == source) {
      held.push_back(nodes_[i].file_name);
    }
  }
  return held;
}

absl::Status Checkpointer::Impl::CopyToPartner(SideChannel& channel,
                                               const SaveRecord& record,
                                               const absl::Status& written) {
  // The mark writes no database; one host has no partner.
  if (record.kind == SaveKind::kLoopFinished || hosts_->num_hosts() < 2) {
    return absl::OkStatus();
  }
  const int rank = channel.rank();
  const int num_ranks = channel.num_ranks();
  // Each rank sends the databases it wrote, one a round, to a rank of the
  // partner host (that host's ranks take the senders in turn), which
  // installs it in its host's local tier: no rank waits for another's
  // write, and a receiver holds as many packed databases at a time as it
  // has senders (one, with as many ranks on every host).
  std::vector<std::vector<int>> ranks_of_host(hosts_->num_hosts());
  std::vector<int> receiver(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    ranks_of_host[hosts_->host_of_rank[r]].push_back(r);
  }
  for (int r = 0; r < num_ranks; ++r) {
    const int host = hosts_->host_of_rank[r];
    const std::vector<int>& mine = ranks_of_host[host];
    const std::vector<int>& partner = ranks_of_host[hosts_->PartnerOf(host)];
    const size_t index = std::find(mine.begin(), mine.end(), r) - mine.begin();
    receiver[r] = partner[index % partner.size()];
  }
  std::vector<std::vector<size_t>> by_rank(num_ranks);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    // Every node is on a rank (MpiSession places them all).
    CHECK_GE(node_rank_[i], 0) << "node '" << nodes_[i].node << "'";
    by_rank[node_rank_[i]].push_back(i);
  }
  size_t rounds = 0;
  for (const std::vector<size_t>& nodes : by_rank) {
    rounds = std::max(rounds, nodes.size());
  }
  const std::string& partner_host =
      hosts_->hosts[hosts_->PartnerOf(hosts_->host_of_rank[rank])];
  // This rank's first failure; it goes on exchanging. A rank whose write
  // failed sends nothing (its own status fails the save).
  absl::Status status;
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<std::string> to_each(num_ranks);
    if (written.ok() && status.ok() && k < by_rank[rank].size()) {
      // Checked against what its writer recorded as it is read.
      const std::string& name = nodes_[by_rank[rank][k]].file_name;
      absl::StatusOr<std::string> packed = PackCheckpointDb(
          options_.db_type, CheckpointDbPath(local_dir_, name, record.epoch));
      if (packed.ok()) {
        // The whole piece, moved: which node it is, the receiver knows.
        to_each[receiver[rank]] = *std::move(packed);
      } else {
        status = Annotate(packed.status(),
                          absl::StrCat("cannot copy epoch ", record.epoch,
                                       " to the partner host ", partner_host));
      }
    }
    JG_ASSIGN_OR_RETURN(std::vector<std::string> received,
                        channel.AllToAll(std::move(to_each)));
    for (int sender = 0; sender < num_ranks; ++sender) {
      // Nothing when the sender has fewer nodes, or could not read its
      // database (its own status fails the save).
      if (receiver[sender] != rank || k >= by_rank[sender].size() ||
          received[sender].empty() || !status.ok()) {
        continue;
      }
      const std::string& name = nodes_[by_rank[sender][k]].file_name;
      absl::StatusOr<int64_t> installed = InstallPackedCheckpointDb(
          options_.db_type, received[sender],
          CheckpointDbPath(local_dir_, name, record.epoch));
      received[sender].clear();
      received[sender].shrink_to_fit();
      if (!installed.ok()) {
        status =
            Annotate(installed.status(),
                     absl::StrCat("cannot keep host ",
                                  hosts_->hosts[hosts_->host_of_rank[sender]],
                                  "'s copy of node '", name, "' of epoch ",
                                  record.epoch));
      }
    }
  }
  return status;
}

absl::Status Checkpointer::Impl::LockSharedNodes() {
  if (!shared_locks_.empty()) return absl::OkStatus();
  std::vector<std::unique_ptr<NodeLock>> locks;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (node_rank_[i] != host_session_->rank()) continue;
    JG_ASSIGN_OR_RETURN(
        std::unique_ptr<NodeLock> lock,
        NodeLock::Acquire(options_.directory, nodes_[i].file_name));
    locks.push_back(std::move(lock));
  }
  shared_locks_ = std::move(locks);
  return absl::OkStatus();
}

absl::Status Checkpointer::Impl::StartOnHosts(const Session& session,
                                              const absl::Status& usable) {
  // A run's first commit is flushed where its commit is agreed (before its
  // save returns; for a background save, at the next boundary): the shared
  // log then names this run's history, which the hosts' logs are checked
  // against at the next resume (tier/host_tiers.h), whatever epoch it
  // resumed from.
  ForgetHostRun();
  hosts_flush_next_ = true;
  // Every rank takes the same branch: the choice read the logs everywhere
  // or nowhere.
  if (!host_tiers_.has_value()) ReadHostLogs(session).IgnoreError();
  if (!host_tiers_.has_value()) return absl::OkStatus();
  if (!host_tiers_->in_shared.empty()) {
    hosts_flushed_ = host_tiers_->in_shared.back();
    PublishPins();
  }
  absl::Status dropped;
  const int rank = session.rank();
  if (usable.ok() && hosts_->IsLeader(rank)) {
    auto it =
        host_tiers_->ignored.find(hosts_->hosts[hosts_->host_of_rank[rank]]);
    if (it != host_tiers_->ignored.end()) {
      // Never again taken for part of the history (tier/host_tiers.h).
      TieredLog ignored;
      ignored.ignored_local = it->second;
      dropped =
          DropIgnoredLocalEpochs(local_dir_, ignored, FileNames()).status();
      if (dropped.ok()) {
        LOG(INFO) << "dropped epochs " << absl::StrJoin(it->second, ", ")
                  << " of the local tier " << local_dir_
                  << ": not the job's history";
      }
    }
  }
  return Annotate(pipeline_->coordinator().Agree(dropped),
                  "cannot take the epochs that are not the job's history out "
                  "of the hosts' local tiers (a later resume could take them "
                  "for it); fix the directory or remove it");
}

}  // namespace jobgraph

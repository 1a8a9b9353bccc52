// The Checkpointer's local tiers on several hosts (an MpiSession with
// CheckpointOptions::local_directory; tier/host_tiers.h): the hosts' map,
// the partner copies before each commit, and the resume from the nearest
// copy of each node's database. Their flush to the shared directory is in
// checkpointer_host_flush.cc.
//
// Everything here that exchanges runs on the job's thread, at points every
// rank reaches in the same order (for a background save: the boundary
// where the pipeline agrees on its write, or on its commit), but for the
// partner copies, which run in the thread that writes a save (for a
// background save, the queue's, over a SideChannel of their own).

#include <algorithm>
#include <filesystem>
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
namespace {

// The bytes of the files under `path` (a database), 0 if unreadable: for
// the restore's report only.
int64_t FileBytes(const std::string& path) {
  std::error_code error;
  int64_t bytes = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(path, error);
       !error && it != std::filesystem::recursive_directory_iterator();
       it.increment(error)) {
    if (it->is_regular_file(error)) {
      bytes += static_cast<int64_t>(it->file_size(error));
    }
  }
  return bytes;
}

// Where fetched copies of other hosts' databases wait to be loaded, in
// the host's local tier: emptied by the host's leader when the logs are
// read for a resume, and once the resume is restored.
std::string FetchDir(const std::string& local) {
  return JoinPath(local, ".fetched");
}

SharedCommitLog ToProto(const absl::StatusOr<CommitLogRead>& read) {
  SharedCommitLog proto;
  if (read.ok()) {
    *proto.mutable_damage() = StatusToProto(read->damage);
    *proto.mutable_log() = read->log;
  } else {
    *proto.mutable_error() = StatusToProto(read.status());
  }
  return proto;
}

}  // namespace

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

absl::StatusOr<CommitLogRead> Checkpointer::Impl::ReadHostLogs(
    const Session& session) {
  // Each host's leader reads its host's log; rank 0 also the shared one.
  const int rank = session.rank();
  std::string mine;
  if (hosts_->IsLeader(rank)) {
    // What an earlier resume fetched goes before this one fetches (the
    // gather below tells the host's other ranks it is gone).
    DropFetched(session);
    AppendPiece(
        &mine,
        ToProto(ReadCommitLogWithFallback(local_dir_)).SerializeAsString());
  } else {
    AppendPiece(&mine, "");
  }
  if (rank == 0) {
    AppendPiece(&mine, ToProto(ReadCommitLogWithFallback(options_.directory))
                           .SerializeAsString());
  }
  JG_ASSIGN_OR_RETURN(std::vector<std::string> all, session.AllGather(mine));
  std::vector<HostLogRead> hosts;
  TierLogRead shared{options_.directory, std::nullopt};
  absl::Status shared_error;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    absl::string_view in = all[r];
    absl::string_view piece;
    CHECK(ConsumePiece(&in, &piece));
    auto parse = [&](absl::string_view bytes) -> absl::StatusOr<CommitLogRead> {
      SharedCommitLog proto;
      if (!proto.ParseFromString(std::string(bytes))) {
        return absl::DataLossError(
            absl::StrCat("the commit log rank ", r, " read arrived damaged"));
      }
      if (proto.has_error()) return StatusFromProto(proto.error());
      CommitLogRead read;
      read.damage = StatusFromProto(proto.damage());
      read.log = std::move(*proto.mutable_log());
      return read;
    };
    if (hosts_->IsLeader(r)) {
      HostLogRead host{hosts_->hosts[hosts_->host_of_rank[r]], std::nullopt};
      absl::StatusOr<CommitLogRead> read = parse(piece);
      if (read.ok()) {
        host.read = *std::move(read);
      } else if (!absl::IsNotFound(read.status())) {
        // The shared directory and the other hosts still hold the rest.
        LOG_IF(WARNING, rank == 0)
            << "ignoring the local tier of host " << host.host << ": "
            << read.status().message();
      }
      if (host.read.has_value() && !host.read->damage.ok()) {
        LOG_IF(WARNING, rank == 0)
            << "the commit log of host " << host.host
            << "'s local tier is damaged, using its previous copy: "
            << host.read->damage.message();
      }
      hosts.push_back(std::move(host));
    }
    if (r == 0) {
      CHECK(ConsumePiece(&in, &piece));
      absl::StatusOr<CommitLogRead> read = parse(piece);
      if (read.ok()) {
        shared.read = *std::move(read);
      } else if (!absl::IsNotFound(read.status())) {
        shared_error = read.status();
      }
    }
  }
  JG_RETURN_IF_ERROR(shared_error);
  const bool any =
      shared.read.has_value() ||
      std::any_of(hosts.begin(), hosts.end(),
                  [](const HostLogRead& h) { return h.read.has_value(); });
  if (!any) {
    return absl::NotFoundError(absl::StrCat(
        "neither the local tiers of hosts ", absl::StrJoin(hosts_->hosts, ", "),
        " (", options_.local_directory, ") nor the shared directory ",
        options_.directory, " has a commit log"));
  }
  host_tiers_ = MergeHostLogs(hosts, shared, FileNames());
  if (rank == 0) {
    for (const auto& [host, epochs] : host_tiers_->ignored) {
      LOG(WARNING) << "ignoring epochs " << absl::StrJoin(epochs, ", ")
                   << " of host " << host << "'s local tier: not the history "
                   << "of the shared directory " << options_.directory
                   << " (another commit of the epoch, or an older history)";
    }
    for (const auto& [epoch, missing] : host_tiers_->incomplete) {
      LOG(WARNING) << "epoch " << epoch << " cannot be assembled: no host of "
                   << "this run holds the database of node(s) '"
                   << absl::StrJoin(missing, "', '")
                   << "', and the shared directory does not have it";
    }
  }
  return host_tiers_->log;
}

absl::Status Checkpointer::Impl::CheckHostsHold(int64_t epoch) const {
  if (!host_tiers_.has_value()) return absl::OkStatus();
  auto it = host_tiers_->incomplete.find(epoch);
  if (it == host_tiers_->incomplete.end()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot resume from epoch ", epoch,
      ": it is committed in the local tiers (", options_.local_directory,
      ") of hosts that are not all in this run: no host here (",
      absl::StrJoin(hosts_->hosts, ", "), ") holds the database of node(s) '",
      absl::StrJoin(it->second, "', '"), "', and ", options_.directory,
      " does not have the epoch; run on the hosts that hold them too, or "
      "resume from another epoch"));
}

absl::Status Checkpointer::Impl::StageFromHosts(Session& session, int64_t epoch,
                                                bool with_blob_lists,
                                                bool committed) {
  const int rank = session.rank();
  // Each node's sources, nearest first: the local tier of the host that
  // runs it, the other hosts that hold it (from the next host on), the
  // shared directory. -1 stands for the shared directory.
  std::vector<std::vector<int>> sources(nodes_.size());
  std::map<std::string, std::vector<std::string>> holders;
  if (host_tiers_.has_value()) {
    auto it = host_tiers_->holders.find(epoch);
    if (it != host_tiers_->holders.end()) holders = it->second;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const std::vector<std::string>& held = holders[nodes_[i].file_name];
    const int home = node_host_[i];
    for (int k = 0; k < hosts_->num_hosts(); ++k) {
      const int h = (home + k) % hosts_->num_hosts();
      if (std::find(held.begin(), held.end(), hosts_->hosts[h]) != held.end()) {
        sources[i].push_back(h);
      }
    }
    if (!host_tiers_.has_value() || host_tiers_->InShared(epoch) ||
        sources[i].empty()) {
      // An epoch the merge did not list (an explicit resume of one that is
      // not committed) is looked for where a run without tiers would.
      sources[i].push_back(-1);
    }
  }
  // What is fetched from another host is held in memory under a path of
  // this host's tier (never written there) until the load below has read
  // it.
  const std::string fetch_dir = FetchDir(local_dir_);
  std::vector<std::string> held;
  // However this returns (the load below read them, or it failed).
  struct Release {
    const std::string& db_type;
    const std::vector<std::string>& held;
    ~Release() {
      for (const std::string& path : held) {
        ReleaseHeldCheckpointDb(db_type, path);
      }
    }
  } release{options_.db_type, held};
  std::vector<size_t> next(nodes_.size(), 0);
  std::vector<std::string> dirs(nodes_.size());
  // Bytes per node and where from (0 local, 1 another host, 2 shared).
  std::vector<int64_t> bytes(nodes_.size(), 0);
  std::vector<int> tier(nodes_.size(), -1);
  std::vector<bool> done(nodes_.size(), false);
  while (true) {
    // One round: each unresolved node tries its next source. 1 = resolved,
    // 2 = that source failed (a damaged or missing copy), 0 = its turn
    // comes later (a leader sends one database a round, so that it holds
    // one packed database at a time), per node.
    std::vector<int64_t> outcome(nodes_.size(), 0);
    std::vector<std::string> to_each(session.num_ranks());
    std::vector<std::string> errors(nodes_.size());
    // Which node each host's leader sends this round: the first pending
    // one it holds for another host (every rank works it out alike, so a
    // piece needs no header: it is the packed database alone, moved).
    std::vector<int> sends(hosts_->num_hosts(), -1);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const int source = done[i] ? -1 : sources[i][next[i]];
      if (source != -1 && source != node_host_[i] && sends[source] == -1) {
        sends[source] = static_cast<int>(i);
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (done[i]) continue;
      const int source = sources[i][next[i]];
      const std::string& name = nodes_[i].file_name;
      if (source == -1 || source == node_host_[i]) {
        if (node_rank_[i] != rank) continue;
        const std::string dir = source == -1 ? options_.directory : local_dir_;
        const std::string path = CheckpointDbPath(dir, name, epoch);
        absl::Status checked;
        if (source != -1) {
          // A damaged local copy is passed over for the next one; the
          // shared copy, the last, is checked by the load itself.
          checked = VerifyCheckpointDb(options_.db_type, path, name, epoch,
                                       VerifyDepth::kValues)
                        .status();
        }
        if (checked.ok()) {
          dirs[i] = dir;
          bytes[i] = FileBytes(path);
          tier[i] = source == -1 ? 2 : 0;
          outcome[i] = 1;
        } else {
          errors[i] = std::string(checked.message());
          outcome[i] = 2;
        }
      } else if (sends[source] == static_cast<int>(i) &&
                 hosts_->leader[source] == rank) {
        // This host holds another host's node: its leader sends it, packed
        // and checked as it is read (nothing when that fails: the
        // receiver then tries the next copy; the reason is logged here).
        absl::StatusOr<std::string> packed = PackCheckpointDb(
            options_.db_type, CheckpointDbPath(local_dir_, name, epoch));
        if (packed.ok()) {
          to_each[node_rank_[i]] = *std::move(packed);
        } else {
          LOG(WARNING) << "node '" << nodes_[i].node << "' of epoch " << epoch
                       << ": this host's copy cannot be sent: "
                       << packed.status().message();
        }
      }
    }
    JG_ASSIGN_OR_RETURN(std::vector<std::string> received,
                        session.AllToAll(std::move(to_each)));
    for (int h = 0; h < hosts_->num_hosts(); ++h) {
      const int i = sends[h];
      if (i < 0 || node_rank_[i] != rank) continue;
      std::string& body = received[hosts_->leader[h]];
      const int64_t size = static_cast<int64_t>(body.size());
      const std::string path =
          CheckpointDbPath(fetch_dir, nodes_[i].file_name, epoch);
      absl::Status kept =
          body.empty()
              ? absl::DataLossError(
                    absl::StrCat("host ", hosts_->hosts[h],
                                 " could not read its copy (its log says why)"))
              : HoldPackedCheckpointDb(options_.db_type, std::move(body), path)
                    .status();
      if (kept.ok()) {
        held.push_back(path);
        dirs[i] = fetch_dir;
        bytes[i] = size;
        tier[i] = 1;
        outcome[i] = 1;
      } else {
        errors[i] = std::string(kept.message());
        outcome[i] = 2;
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!errors[i].empty()) {
        const int source = sources[i][next[i]];
        LOG(WARNING) << "node '" << nodes_[i].node << "' of epoch " << epoch
                     << ": the copy in "
                     << (source == -1 ? options_.directory
                                      : "the local tier of host " +
                                            hosts_->hosts[source])
                     << " cannot be used, trying the next: " << errors[i];
      }
    }
    JG_ASSIGN_OR_RETURN(std::vector<int64_t> agreed,
                        session.AllReduceSum(std::move(outcome)));
    bool pending = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (done[i]) continue;
      if (agreed[i] == 1) {
        done[i] = true;
        continue;
      }
      if (agreed[i] == 0) {  // not sent yet
        pending = true;
        continue;
      }
      CHECK_EQ(agreed[i], 2)
          << "node '" << nodes_[i].node << "' had two outcomes";
      if (++next[i] == sources[i].size()) {
        return absl::DataLossError(absl::StrCat(
            "committed epoch ", epoch,
            " is damaged: no copy of the database "
            "of node '",
            nodes_[i].node, "' verifies (the local tiers of hosts ",
            absl::StrJoin(holders[nodes_[i].file_name], ", "),
            host_tiers_.has_value() && host_tiers_->InShared(epoch)
                ? absl::StrCat(" and ", options_.directory)
                : std::string(),
            ")"));
      }
      pending = true;
    }
    if (!pending) break;
  }
  // Where each node's database came from, told by rank 0 for all.
  CheckpointStats::TierBytes sum;
  std::string lines;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (node_rank_[i] != rank) continue;
    const std::string host = hosts_->hosts[hosts_->host_of_rank[rank]];
    const std::string from =
        tier[i] == 0 ? absl::StrCat("its own host's local tier ", dirs[i])
        : tier[i] == 1
            ? absl::StrCat("host ", hosts_->hosts[sources[i][next[i]]],
                           "'s local tier, over MPI")
            : absl::StrCat("the shared directory ", dirs[i]);
    AppendPiece(&lines, absl::StrCat("node '", nodes_[i].node, "' (rank ", rank,
                                     ", host ", host, ") of epoch ", epoch,
                                     ": ", bytes[i], " bytes from ", from));
    (tier[i] == 0   ? sum.local
     : tier[i] == 1 ? sum.partner
                    : sum.shared) += bytes[i];
  }
  JG_ASSIGN_OR_RETURN(std::vector<std::string> told, session.AllGather(lines));
  if (rank == 0) {
    for (const std::string& of_rank : told) {
      absl::string_view in = of_rank;
      absl::string_view line;
      while (ConsumePiece(&in, &line)) LOG(INFO) << line;
    }
  }
  JG_ASSIGN_OR_RETURN(
      std::vector<int64_t> totals,
      session.AllReduceSum({sum.local, sum.partner, sum.shared}));
  absl::Status staged = Stage(session, epoch, with_blob_lists, committed, dirs);
  if (!staged.ok()) return staged;
  staged_tier_bytes_ = {totals[0], totals[1], totals[2]};
  return absl::OkStatus();
}

void Checkpointer::Impl::DropFetched(const Session& session) {
  if (!hosts_->IsLeader(session.rank())) return;
  absl::Status removed = RemoveRecursively(FetchDir(local_dir_));
  LOG_IF(WARNING, !removed.ok() && !absl::IsNotFound(removed))
      << removed.message();
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

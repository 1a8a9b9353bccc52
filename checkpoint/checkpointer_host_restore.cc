// The resume of a job on several hosts with local tiers (see
// checkpointer_hosts.cc): every host's commit log and the shared one,
// merged, and each node's database staged from its nearest verified copy:
// the tier of the host that runs it, another host's over MPI, the shared
// directory. Everything here is collective, on the job's thread.

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/checkpointer_impl.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/commit/verify.h"
#include "checkpoint/ops/save_load_ops.h"
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

// Where copies of other hosts' databases fetched for a resume are held in
// memory until they are loaded (the paths name them; nothing is written
// there).
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

absl::StatusOr<CommitLogRead> Checkpointer::Impl::ReadHostLogs(
    const Session& session) {
  // Each host's leader reads its host's log; rank 0 also the shared one.
  const int rank = session.rank();
  std::string mine;
  if (hosts_->IsLeader(rank)) {
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

}  // namespace jobgraph

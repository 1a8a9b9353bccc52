#include "checkpoint/pipeline/coordinator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/collectives.h"
#include "engine/session.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

class LocalCoordinator : public Coordinator {
 public:
  bool commits() const override { return true; }
  bool spans_processes() const override { return false; }
  bool Hosts(absl::string_view node) const override { return true; }
  absl::Status CheckPlacement(const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
  absl::Status Agree(const absl::Status& local) override { return local; }
  absl::StatusOr<int64_t> AgreeWithCommitter(const absl::Status& local,
                                             int64_t value) override {
    if (!local.ok()) return local;
    return value;
  }
  absl::StatusOr<CommitLogRead> ShareCommitLog(
      const std::function<absl::StatusOr<CommitLogRead>()>& read) override {
    return read();
  }
  Settled Settle(const SettleRound& round) override {
    Settled settled;
    if (round.write.has_value()) {
      if (round.write->status.ok()) {
        settled.write = WriteTotals{round.write->bytes, round.write->tallies};
      } else {
        settled.write = round.write->status;
      }
    }
    settled.commit = round.commit;
    return settled;
  }
  CommitRound AgreeAndCommit(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals&)>& commit) override {
    const absl::Time agreed_at = absl::Now();
    if (!write.status.ok()) return {write.status, absl::OkStatus(), agreed_at};
    WriteTotals totals{write.bytes, write.tallies};
    absl::Status committed = commit(totals);
    return {std::move(totals), std::move(committed), agreed_at};
  }
};

// The exchanges run over the session's own collectives. An error of those
// would leave the ranks on different paths (and Open MPI's errors are fatal
// anyway), so it is a CHECK failure, never a status.
class SessionCoordinator : public Coordinator {
 public:
  SessionCoordinator(const Session* session, SessionCoordinatorOptions options)
      : session_(*session), committers_(std::move(options.committers)) {
    if (committers_.empty()) {
      committers_.assign(session_.num_ranks(), false);
      committers_[kCommitter] = true;
    }
    CHECK_EQ(committers_.size(), static_cast<size_t>(session_.num_ranks()));
    CHECK(committers_[kCommitter]) << "rank 0 must commit";
    several_ = std::count(committers_.begin(), committers_.end(), true) > 1;
  }

  bool commits() const override { return committers_[session_.rank()]; }
  bool spans_processes() const override { return true; }
  bool several_commit() const override { return several_; }
  bool Hosts(absl::string_view node) const override {
    return session_.HostsNode(node);
  }

  absl::Status CheckPlacement(const std::vector<std::string>& nodes) override {
    std::vector<int64_t> hosted;
    for (const std::string& node : nodes) hosted.push_back(Hosts(node) ? 1 : 0);
    hosted = Sum(std::move(hosted), "the placement of the nodes");
    std::vector<std::string> unhosted;
    for (size_t i = 0; i < nodes.size(); ++i) {
      CHECK_LE(hosted[i], 1)
          << "node '" << nodes[i] << "' is hosted by " << hosted[i] << " ranks";
      if (hosted[i] == 0) unhosted.push_back(nodes[i]);
    }
    if (unhosted.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot checkpoint node(s) '", absl::StrJoin(unhosted, "', '"),
        "': no rank of the session runs them; checkpoint only the job's "
        "nodes"));
  }

  absl::Status Agree(const absl::Status& local) override {
    absl::Status agreed = AgreeOnStatus(session_, local);
    return agreed;
  }

  absl::StatusOr<int64_t> AgreeWithCommitter(const absl::Status& local,
                                             int64_t value) override {
    if (several_) {
      // The largest of the committers' values: each slot is one rank's.
      std::vector<int64_t> values(1 + session_.num_ranks(), 0);
      values[0] = local.ok() ? 0 : 1;
      values[1 + session_.rank()] = value;
      const std::vector<int64_t> sums = Sum(std::move(values), "an agreement");
      if (sums[0] > 0) return FirstFailure(local);
      std::optional<int64_t> largest;
      for (int r = 0; r < session_.num_ranks(); ++r) {
        if (committers_[r])
          largest = std::max(largest.value_or(sums[1 + r]), sums[1 + r]);
      }
      return *largest;
    }
    return AgreeWithRankZero(local, value);
  }

  absl::StatusOr<CommitLogRead> ShareCommitLog(
      const std::function<absl::StatusOr<CommitLogRead>()>& read) override {
    SharedCommitLog shared;
    if (commits()) {
      absl::StatusOr<CommitLogRead> mine = read();
      if (mine.ok()) {
        *shared.mutable_damage() = StatusToProto(mine->damage);
        *shared.mutable_log() = std::move(mine->log);
      } else {
        *shared.mutable_error() = StatusToProto(mine.status());
      }
    }
    absl::StatusOr<std::string> sent =
        session_.Broadcast(shared.SerializeAsString(), kCommitter);
    CHECK(sent.ok()) << "sharing the commit log: " << sent.status();
    SharedCommitLog received;
    if (!received.ParseFromString(*sent)) {
      // Every rank received these bytes: every rank returns this.
      return absl::DataLossError(
          absl::StrCat("the commit log that rank ", kCommitter,
                       " read reached the other ranks damaged"));
    }
    if (received.has_error()) return StatusFromProto(received.error());
    CommitLogRead read_log;
    read_log.damage = StatusFromProto(received.damage());
    read_log.log = std::move(*received.mutable_log());
    return read_log;
  }

  Settled Settle(const SettleRound& round) override {
    const bool write_failed =
        round.write.has_value() && !round.write->status.ok();
    const absl::Status commit = commits() && round.commit.has_value()
                                    ? *round.commit
                                    : absl::OkStatus();
    // In one all-reduce: the failed writes, the bytes written, the
    // committer's code, and the writes' tallies. The messages travel only
    // after a failure.
    std::vector<int64_t> values = {
        write_failed ? 1 : 0,
        round.write.has_value() && !write_failed ? round.write->bytes : 0,
        commit.raw_code()};
    if (round.write.has_value()) AppendTallies(*round.write, &values);
    const std::vector<int64_t> sums =
        Sum(std::move(values), "a checkpoint's outcome");
    Settled settled;
    if (round.write.has_value()) {
      if (sums[0] > 0) {
        settled.write = FirstFailure(round.write->status);
      } else {
        settled.write = WriteTotals{
            sums[1], std::vector<int64_t>(sums.begin() + 3, sums.end())};
      }
    }
    if (round.commit.has_value()) {
      settled.commit =
          several_ ? AgreeCommits(commit) : CommitterStatus(sums[2], commit);
    }
    return settled;
  }

  CommitRound AgreeAndCommit(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals&)>& commit) override {
    if (several_) return AgreeAndCommitEverywhere(write, commit);
    // The failures, the bytes and the tallies reach the committer alone; it
    // commits if no process failed, and its outcome (the failed writes, the
    // totals, its commit's code) reaches every process.
    std::vector<int64_t> values = {write.status.ok() ? 0 : 1,
                                   write.status.ok() ? write.bytes : 0};
    AppendTallies(write, &values);
    absl::StatusOr<std::vector<int64_t>> reduced =
        session_.ReduceSumToRoot(std::move(values), kCommitter);
    CHECK(reduced.ok()) << "agreeing on a checkpoint's writes: "
                        << reduced.status();
    const absl::Time agreed_at = absl::Now();
    // [failed, bytes, code, tallies...]
    std::vector<int64_t> outcome(3 + write.tallies.size(), 0);
    absl::Status committed;
    if (commits()) {
      outcome[0] = (*reduced)[0];
      outcome[1] = (*reduced)[1];
      std::copy(reduced->begin() + 2, reduced->end(), outcome.begin() + 3);
      if (outcome[0] == 0) {
        committed = commit(WriteTotals{
            outcome[1],
            std::vector<int64_t>(outcome.begin() + 3, outcome.end())});
        outcome[2] = committed.raw_code();
      }
    }
    absl::StatusOr<std::vector<int64_t>> shared =
        session_.BroadcastInts(std::move(outcome), kCommitter);
    CHECK(shared.ok()) << "sharing a checkpoint's outcome: " << shared.status();
    CommitRound round{
        WriteTotals{(*shared)[1],
                    std::vector<int64_t>(shared->begin() + 3, shared->end())},
        absl::OkStatus(), agreed_at};
    if ((*shared)[0] > 0) {
      // The messages: which rank failed, and why.
      round.write = FirstFailure(write.status);
      return round;
    }
    round.commit = CommitterStatus((*shared)[2], committed);
    return round;
  }

 private:
  static constexpr int kCommitter = 0;

  // A failed write contributes no tallies (zeros, to keep the length).
  static void AppendTallies(const WriteReport& write,
                            std::vector<int64_t>* values) {
    for (int64_t t : write.tallies) {
      values->push_back(write.status.ok() ? t : 0);
    }
  }

  std::vector<int64_t> Sum(std::vector<int64_t> values,
                           absl::string_view what) {
    absl::StatusOr<std::vector<int64_t>> sums =
        session_.AllReduceSum(std::move(values));
    CHECK(sums.ok()) << "agreeing on " << what << ": " << sums.status();
    return *std::move(sums);
  }

  // Collective, once every rank knows that some rank failed: that failure.
  absl::Status FirstFailure(const absl::Status& local) {
    absl::Status agreed = AgreeOnStatus(session_, local);
    if (agreed.ok()) {
      return absl::InternalError(
          "the ranks counted a failure, but no rank reported one");
    }
    return agreed;
  }

  // Collective: the committer's `status`, whose code every rank knows.
  absl::Status CommitterStatus(int64_t code, const absl::Status& status) {
    absl::Status shared = RankZeroStatus(session_, code, status);
    if (code != 0 && shared.ok()) {
      return absl::InternalError(
          "the committing rank reported a failure code with an OK status");
    }
    return shared;
  }

  // AgreeAndCommit where every process must know the writes' outcome
  // before the commit: several commit.
  CommitRound AgreeAndCommitEverywhere(
      const WriteReport& write,
      const std::function<absl::Status(const WriteTotals&)>& commit) {
    // The failures, the bytes, the commit time every committer records
    // (rank 0's clock) and the tallies, in one exchange.
    std::vector<int64_t> values = {
        write.status.ok() ? 0 : 1, write.status.ok() ? write.bytes : 0,
        session_.rank() == kCommitter ? absl::ToUnixMicros(absl::Now()) : 0};
    AppendTallies(write, &values);
    const std::vector<int64_t> sums =
        Sum(std::move(values), "a checkpoint's writes");
    CommitRound round{WriteTotals{sums[1], std::vector<int64_t>(
                                               sums.begin() + 3, sums.end())},
                      absl::OkStatus(), absl::Now()};
    if (sums[0] > 0) {
      round.write = FirstFailure(write.status);
      return round;
    }
    round.write->commit_unix_micros = sums[2];
    const absl::Status committed =
        commits() ? commit(*round.write) : absl::OkStatus();
    round.commit = AgreeCommits(committed);
    return round;
  }

  // Agree, and rank 0's `value` on every process: the failures and the
  // value in one small all-reduce.
  absl::StatusOr<int64_t> AgreeWithRankZero(const absl::Status& local,
                                            int64_t value) {
    const std::vector<int64_t> sums =
        Sum({local.ok() ? 0 : 1, session_.rank() == kCommitter ? value : 0},
            "an agreement");
    if (sums[0] > 0) return FirstFailure(local);
    return sums[1];
  }

  // Collective: the first failure among the committers' `status` (the
  // others pass OK).
  absl::Status AgreeCommits(const absl::Status& status) {
    return AgreeOnStatus(session_, commits() ? status : absl::OkStatus());
  }

  const Session& session_;
  std::vector<bool> committers_;
  bool several_ = false;
};

}  // namespace

std::unique_ptr<Coordinator> NewLocalCoordinator() {
  return std::make_unique<LocalCoordinator>();
}

std::unique_ptr<Coordinator> NewSessionCoordinator(
    const Session* session, SessionCoordinatorOptions options) {
  if (session == nullptr || session->num_ranks() <= 1) {
    return NewLocalCoordinator();
  }
  return std::make_unique<SessionCoordinator>(session, std::move(options));
}

}  // namespace jobgraph

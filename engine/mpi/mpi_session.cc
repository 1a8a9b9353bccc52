#include "engine/mpi/mpi_session.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/collectives.h"
#include "engine/mpi/mpi_exchange.h"
#include "engine/plan_executor.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

// Open MPI keeps some allocations until exit on purpose; LeakSanitizer
// (--config=asan) would fail every rank for them. Only Open MPI's own
// libraries and plugins are exempt. The check runs just before
// MPI_Finalize (FinalizeMpi): afterwards the plugins are unloaded and their
// frames have no names to match. Open MPI's libraries have no frame
// pointers either, so run ASan builds under mpirun with
// ASAN_OPTIONS=fast_unwind_on_malloc=0 (tests/mpi_test.cc does), or the
// stacks stop at Open MPI's first frame, unnamed.
#if defined(__SANITIZE_ADDRESS__)
extern "C" void __lsan_do_leak_check();
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libhwloc.so\n"
         "leak:libevent\n"
         "leak:/openmpi/lib/\n"
         "leak:mca_\n";
}
#endif

namespace jobgraph {
namespace {

using mpi_exchange::AllGatherOn;
using mpi_exchange::AllToAllOn;
using mpi_exchange::CheckMpi;
using mpi_exchange::kAllToAllRoundBytes;
using mpi_exchange::MpiMutex;
using mpi_exchange::NewMpiSideChannel;

void FinalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
#if defined(__SANITIZE_ADDRESS__)
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
}

// Starts MPI once per process; it is finalized when the process exits.
absl::Status EnsureMpi() {
  static std::once_flag once;
  static absl::Status status;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      int provided = 0;
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_SERIALIZED) {
        status = absl::FailedPreconditionError(
            "MPI was initialized without MPI_THREAD_SERIALIZED; jobgraph's "
            "threads call MPI one at a time and need it");
      }
      return;
    }
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS) {
      status = absl::UnavailableError(
          "MPI_Init_thread failed; start the program with mpirun (Open MPI)");
      return;
    }
    std::atexit(FinalizeMpi);
    if (provided < MPI_THREAD_SERIALIZED) {
      status = absl::FailedPreconditionError(
          absl::StrCat("this MPI provides thread level ", provided,
                       ", below MPI_THREAD_SERIALIZED, which jobgraph needs"));
    }
  });
  return status;
}

}  // namespace

bool StartedByMpiLauncher() {
  for (const char* var :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

struct MpiSession::Comms {
  MPI_Comm world = MPI_COMM_NULL;
  // Communicators of the ranks that host a group's collective participants,
  // by those ranks (every rank asks for one at the same Run).
  std::map<std::vector<int>, MPI_Comm> of_ranks;

  ~Comms() {
    std::lock_guard<std::mutex> lock(MpiMutex());
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& [ranks, comm] : of_ranks) {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    if (world != MPI_COMM_NULL) MPI_Comm_free(&world);
  }
};

absl::StatusOr<std::unique_ptr<MpiSession>> MpiSession::Create(
    std::vector<std::string> nodes, MpiSessionOptions options) {
  JG_RETURN_IF_ERROR(EnsureMpi());
  auto comms = std::make_unique<Comms>();
  int rank = 0;
  int size = 0;
  {
    std::lock_guard<std::mutex> lock(MpiMutex());
    JG_RETURN_IF_ERROR(
        CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comms->world), "MPI_Comm_dup"));
    MPI_Comm_rank(comms->world, &rank);
    MPI_Comm_size(comms->world, &size);
  }
  std::set<std::string> seen;
  for (const std::string& node : nodes) {
    if (!seen.insert(node).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node, "' is given twice"));
    }
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError("an MpiSession needs at least one node");
  }
  std::map<std::string, int> ranks = options.node_ranks;
  if (ranks.empty()) {
    if (static_cast<int>(nodes.size()) < size) {
      return absl::InvalidArgumentError(
          absl::StrCat("the job has ", nodes.size(), " node(s) but runs on ",
                       size, " MPI ranks: every rank must host a node; start ",
                       nodes.size(), " rank(s) (mpirun -np ", nodes.size(),
                       ") or give the job more "
                       "nodes"));
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      ranks[nodes[i]] = static_cast<int>(i % size);
    }
  } else {
    std::vector<int> hosted(size, 0);
    for (const std::string& node : nodes) {
      auto it = ranks.find(node);
      if (it == ranks.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node_ranks places no rank for node '", node, "'"));
      }
      if (it->second < 0 || it->second >= size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node_ranks places node '", node, "' on rank ", it->second,
            ", but the MPI job has ranks 0 to ", size - 1));
      }
      ++hosted[it->second];
    }
    if (ranks.size() != nodes.size()) {
      for (const auto& [node, r] : ranks) {
        if (!seen.count(node)) {
          return absl::InvalidArgumentError(
              absl::StrCat("node_ranks names node '", node,
                           "', which the job does not "
                           "have"));
        }
      }
    }
    for (int r = 0; r < size; ++r) {
      if (hosted[r] == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("node_ranks gives rank ", r, " no node; the job has ",
                         nodes.size(), " node(s) on ", size, " MPI ranks"));
      }
    }
  }
  return std::unique_ptr<MpiSession>(new MpiSession(
      std::move(nodes), std::move(ranks), rank, size, std::move(comms)));
}

MpiSession::MpiSession(std::vector<std::string> nodes,
                       std::map<std::string, int> ranks, int rank, int size,
                       std::unique_ptr<Comms> comms)
    : nodes_(std::move(nodes)),
      node_ranks_(ranks.begin(), ranks.end()),
      rank_(rank),
      size_(size),
      all_to_all_round_bytes_(kAllToAllRoundBytes),
      comms_(std::move(comms)) {}

MpiSession::~MpiSession() = default;

int MpiSession::RankOf(absl::string_view node) const {
  auto it = node_ranks_.find(node);
  return it == node_ranks_.end() ? -1 : it->second;
}

bool MpiSession::HostsNode(absl::string_view node) const {
  return RankOf(node) == rank_;
}

absl::StatusOr<std::vector<std::string>> MpiSession::AllGather(
    std::string value) const {
  return AllGatherOn(comms_->world, value);
}

absl::StatusOr<std::vector<std::string>> MpiSession::AllToAll(
    std::vector<std::string> to_each) const {
  return AllToAllOn(comms_->world, rank_, std::move(to_each),
                    all_to_all_round_bytes_);
}

absl::StatusOr<std::unique_ptr<SideChannel>> MpiSession::OpenSideChannel()
    const {
  std::lock_guard<std::mutex> lock(MpiMutex());
  MPI_Comm comm = MPI_COMM_NULL;
  JG_RETURN_IF_ERROR(
      CheckMpi(MPI_Comm_dup(comms_->world, &comm), "MPI_Comm_dup"));
  return NewMpiSideChannel(comm, rank_, size_, all_to_all_round_bytes_);
}

void MpiSession::SetAllToAllRoundBytesForTesting(int64_t bytes) {
  CHECK_GE(bytes, 1);
  all_to_all_round_bytes_ = bytes;
}

absl::StatusOr<std::vector<int64_t>> MpiSession::AllReduceSum(
    std::vector<int64_t> values) const {
  std::lock_guard<std::mutex> lock(MpiMutex());
  std::vector<int64_t> sum(values.size());
  JG_RETURN_IF_ERROR(CheckMpi(
      MPI_Allreduce(values.data(), sum.data(), static_cast<int>(values.size()),
                    MPI_INT64_T, MPI_SUM, comms_->world),
      "MPI_Allreduce"));
  return sum;
}

absl::StatusOr<std::vector<int64_t>> MpiSession::ReduceSumToRoot(
    std::vector<int64_t> values, int root) const {
  std::lock_guard<std::mutex> lock(MpiMutex());
  std::vector<int64_t> sum(values.size());
  JG_RETURN_IF_ERROR(CheckMpi(
      MPI_Reduce(values.data(), sum.data(), static_cast<int>(values.size()),
                 MPI_INT64_T, MPI_SUM, root, comms_->world),
      "MPI_Reduce"));
  return rank_ == root ? sum : values;
}

absl::StatusOr<std::vector<int64_t>> MpiSession::BroadcastInts(
    std::vector<int64_t> values, int root) const {
  std::lock_guard<std::mutex> lock(MpiMutex());
  JG_RETURN_IF_ERROR(
      CheckMpi(MPI_Bcast(values.data(), static_cast<int>(values.size()),
                         MPI_INT64_T, root, comms_->world),
               "MPI_Bcast"));
  return values;
}

absl::StatusOr<std::string> MpiSession::Broadcast(std::string value,
                                                  int root) const {
  std::lock_guard<std::mutex> lock(MpiMutex());
  int64_t size = static_cast<int64_t>(value.size());
  JG_RETURN_IF_ERROR(CheckMpi(
      MPI_Bcast(&size, 1, MPI_INT64_T, root, comms_->world), "MPI_Bcast"));
  if (size > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot broadcast ", size,
                     " bytes between ranks at once (2 GiB at "
                     "most)"));
  }
  value.resize(size);
  JG_RETURN_IF_ERROR(CheckMpi(MPI_Bcast(value.data(), static_cast<int>(size),
                                        MPI_BYTE, root, comms_->world),
                              "MPI_Bcast"));
  return value;
}

absl::StatusOr<TaskGroupDef> MpiSession::HostedPart(
    const TaskGroupDef& group) const {
  TaskGroupDef mine = group;
  mine.clear_task();
  for (const TaskDef& task : group.task()) {
    if (RankOf(task.node()) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group '", group.name(), "' runs a task on node '", task.node(),
          "', which is not one of the MPI session's nodes [",
          absl::StrJoin(nodes_, ", "), "]"));
    }
    if (HostsNode(task.node())) *mine.add_task() = task;
  }
  return mine;
}

absl::Status MpiSession::RunHosted(const TaskGroupDef& group) {
  if (GroupUsesCollectives(group)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group '", group.name(),
        "' uses collective operators, so every rank must run it: use Run"));
  }
  JG_ASSIGN_OR_RETURN(TaskGroupDef mine, HostedPart(group));
  if (mine.task_size() == 0) return absl::OkStatus();
  return local_.Run(mine, {});
}

absl::Status MpiSession::Run(const TaskGroupDef& group,
                             const RunOptions& options) {
  // Everything up to the local run depends only on the group, the same on
  // every rank, so an error here is the same everywhere.
  JG_ASSIGN_OR_RETURN(TaskGroupDef mine, HostedPart(group));
  JG_ASSIGN_OR_RETURN(std::vector<NodePlan> plans, PlanByNode(group));
  std::vector<std::string> participants;
  std::vector<std::string> hosted;
  for (const NodePlan& plan : plans) {
    participants.push_back(plan.node);
    if (HostsNode(plan.node)) hosted.push_back(plan.node);
  }

  const bool uses_collectives = GroupUsesCollectives(group);
  std::unique_ptr<Collectives> collectives;
  if (uses_collectives) {
    std::vector<int> ranks;
    for (const std::string& node : participants) ranks.push_back(RankOf(node));
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    auto [it, inserted] = comms_->of_ranks.emplace(ranks, MPI_COMM_NULL);
    if (inserted) {
      // Collective over every rank; ranks without a participant get none.
      std::lock_guard<std::mutex> lock(MpiMutex());
      JG_RETURN_IF_ERROR(CheckMpi(
          MPI_Comm_split(comms_->world, hosted.empty() ? MPI_UNDEFINED : 0,
                         rank_, &it->second),
          "MPI_Comm_split"));
    }
    MPI_Comm comm = it->second;
    // Where each participant's payload is in a rank's contribution.
    std::vector<std::vector<size_t>> by_rank(ranks.size());
    for (size_t i = 0; i < participants.size(); ++i) {
      const size_t j = std::lower_bound(ranks.begin(), ranks.end(),
                                        RankOf(participants[i])) -
                       ranks.begin();
      by_rank[j].push_back(i);
    }
    const size_t num_participants = participants.size();
    auto round = [comm, by_rank,
                  num_participants](std::vector<std::string> local)
        -> absl::StatusOr<std::vector<std::string>> {
      std::string packed;
      for (const std::string& payload : local) AppendPiece(&packed, payload);
      JG_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          AllGatherOn(comm, packed));
      std::vector<std::string> result(num_participants);
      for (size_t j = 0; j < all.size(); ++j) {
        absl::string_view in = all[j];
        for (size_t index : by_rank[j]) {
          absl::string_view piece;
          if (!ConsumePiece(&in, &piece)) {
            return absl::DataLossError(
                "a rank sent a damaged collective contribution");
          }
          result[index] = std::string(piece);
        }
      }
      return result;
    };
    if (!hosted.empty()) {
      collectives =
          std::make_unique<Collectives>(participants, hosted, round, nullptr);
    }
  }

  absl::Status local = absl::OkStatus();
  if (mine.task_size() > 0) {
    RunOptions local_options = options;
    local_options.collectives = collectives.get();
    local = local_.Run(mine, local_options);
  }
  if (!local.ok() && !IsStopRequest(local) && uses_collectives && size_ > 1) {
    LOG(ERROR) << "rank " << rank_ << ": " << local.message()
               << " -- the group uses collective operators, so the other "
                  "ranks may be waiting for this one: aborting the MPI job";
    MPI_Abort(comms_->world, 1);
  }

  // Agree on the outcome: an error anywhere wins over a stop anywhere. The
  // counts first (one small all-reduce); the messages only after a failure.
  const bool failed = !local.ok() && !IsStopRequest(local);
  JG_ASSIGN_OR_RETURN(
      std::vector<int64_t> counts,
      AllReduceSum({failed ? 1 : 0, IsStopRequest(local) ? 1 : 0}));
  if (counts[0] > 0) {
    JG_ASSIGN_OR_RETURN(
        std::vector<std::string> all,
        AllGather(EncodeStatus(failed ? local : absl::OkStatus())));
    for (size_t r = 0; r < all.size(); ++r) {
      absl::Status s = DecodeStatus(all[r]);
      if (s.ok()) continue;
      if (size_ == 1) return s;
      return absl::Status(s.code(),
                          absl::StrCat("rank ", r, ": ", s.message()));
    }
    return absl::InternalError("a rank reported a failure and then none");
  }
  const bool stopped = counts[1] > 0;
  if (!stopped) return absl::OkStatus();
  if (local.ok()) {
    // Finished here while another rank stopped: continuing the group must
    // run nothing more on these nodes.
    local_.MarkFinished(group.name(), hosted);
  }
  return StopRequestStatus(
      absl::StrCat("group '", group.name(), "' stopped on request"));
}

absl::StatusOr<Tensor> MpiSession::FetchBlob(absl::string_view node,
                                             absl::string_view blob) const {
  const int owner = RankOf(node);
  if (owner < 0) {
    return absl::NotFoundError(absl::StrCat(
        "node '", node, "' is not one of the MPI session's nodes [",
        absl::StrJoin(nodes_, ", "), "]"));
  }
  FetchedBlob fetched;
  if (owner == rank_) {
    absl::StatusOr<Tensor> value = local_.FetchBlob(node, blob);
    absl::StatusOr<std::string> encoded =
        value.ok() ? EncodeTensor(*value) : value.status();
    if (encoded.ok()) {
      fetched.set_tensor(*std::move(encoded));
    } else {
      *fetched.mutable_error() = StatusToProto(encoded.status());
    }
  }
  JG_ASSIGN_OR_RETURN(std::string payload,
                      Broadcast(fetched.SerializeAsString(), owner));
  if (!fetched.ParseFromString(payload)) {
    return absl::DataLossError(absl::StrCat("rank ", owner, " sent blob '",
                                            blob, "' of node '", node,
                                            "' damaged"));
  }
  if (fetched.has_error()) return StatusFromProto(fetched.error());
  return DecodeTensor(fetched.tensor());
}

absl::StatusOr<Tensor> MpiSession::FetchHostedBlob(
    absl::string_view node, absl::string_view blob) const {
  if (!HostsNode(node)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", node, "' runs on rank ", RankOf(node),
                     ", not on rank ", rank_));
  }
  return local_.FetchBlob(node, blob);
}

absl::StatusOr<std::vector<BlobSnapshot>> MpiSession::SnapshotBlobs(
    absl::string_view node, const std::vector<std::string>& names) const {
  if (!HostsNode(node)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot snapshot node '", node, "' on rank ", rank_,
                     ": it runs on rank ", RankOf(node)));
  }
  return local_.SnapshotBlobs(node, names);
}

}  // namespace jobgraph

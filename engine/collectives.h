// Collectives: the exchange behind the collective operators (Allreduce,
// Broadcast, Barrier; engine/ops/collective_ops.cc) of one TaskGroup run.
//
// The participants are the nodes that run a task in the group, in the order
// they first appear in it (PlanByNode's order). Every participant calls the
// same collective operators in the same order; the k-th call of every node
// forms one round, in which each node contributes bytes and receives every
// node's contribution in participant order. Whatever combines them (a sum)
// is therefore computed in one fixed order on every node: results are
// bit-identical across the nodes of a process, across MPI ranks, and between
// LocalSession and MpiSession.
//
// A Collectives object serves one Run. Its local participants (the nodes
// this process runs) call Exchange from their own threads. Without a
// `cross_process` hook every participant is local; a cross-process session
// (engine/mpi) completes each round through the hook, which one thread per
// process calls with that process's contributions.
//
// A group that uses collectives is not stopped in the middle by a preemption
// (its nodes could otherwise stop on either side of a round); the sessions
// let it finish first. Thread-safe.

#ifndef JOBGRAPH_ENGINE_COLLECTIVES_H_
#define JOBGRAPH_ENGINE_COLLECTIVES_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/plan_executor.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// True for the operator types that take part in a round.
bool IsCollectiveOp(absl::string_view type);
// True when any net of `group` runs a collective operator.
bool GroupUsesCollectives(const TaskGroupDef& group);

class Collectives {
 public:
  // Completes a round across processes: given this process's payloads (one
  // per local participant, in local order), returns every participant's
  // payload in participant order. Called on one thread at a time.
  using CrossProcessRound =
      std::function<absl::StatusOr<std::vector<std::string>>(
          std::vector<std::string> local_payloads)>;

  // `local` lists the participants run by this process (in participant
  // order); it must be all of them unless `cross_process` is given.
  // `control` (borrowed, may be null): a waiting node gives up with
  // Cancelled once a stop is requested there.
  Collectives(std::vector<std::string> participants,
              std::vector<std::string> local,
              CrossProcessRound cross_process = nullptr,
              const RunControl* control = nullptr);
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  const std::vector<std::string>& participants() const { return participants_; }

  // Node `node`'s part of its next round: `what` names the operation ("
  // Allreduce of 'grad'") and must be the same on every node; `bytes` is the
  // contribution. Returns every participant's bytes, in participant order.
  // FailedPrecondition when nodes disagree on `what`; the Cancel status (or
  // Cancelled) when the run ends before the round completes.
  absl::StatusOr<std::vector<std::string>> Exchange(absl::string_view node,
                                                    absl::string_view what,
                                                    std::string bytes);

  // Wakes every waiting node with `why`; later calls fail with it too. For
  // a run whose node failed: the others would wait for it forever.
  void Cancel(absl::Status why);

 private:
  struct Round {
    std::vector<std::string> payloads;  // by local index
    int arrived = 0;
    bool done = false;
    absl::StatusOr<std::vector<std::string>> result;
  };

  const std::vector<std::string> participants_;
  const std::vector<std::string> local_;
  const CrossProcessRound cross_process_;
  const RunControl* const control_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<Round> current_ ABSL_GUARDED_BY(mu_);
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
};

// Bytes for another process or node, and back.

// A tensor (every dtype; exact).
absl::StatusOr<std::string> EncodeTensor(const Tensor& tensor);
absl::StatusOr<Tensor> DecodeTensor(absl::string_view bytes);
// A status (code and message), as a StatusProto and as its bytes.
StatusProto StatusToProto(const absl::Status& status);
absl::Status StatusFromProto(const StatusProto& proto);
std::string EncodeStatus(const absl::Status& status);
absl::Status DecodeStatus(absl::string_view encoded);
// Length-prefixed pieces: appends `piece` to `out`; takes the next piece
// from the front of `in` (false when `in` is damaged).
void AppendPiece(std::string* out, absl::string_view piece);
bool ConsumePiece(absl::string_view* in, absl::string_view* piece);

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_COLLECTIVES_H_

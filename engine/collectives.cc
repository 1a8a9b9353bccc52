#include "engine/collectives.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

std::string Payload(absl::string_view what, absl::string_view bytes) {
  std::string payload;
  payload.reserve(sizeof(uint64_t) + what.size() + bytes.size());
  AppendPiece(&payload, what);
  payload.append(bytes.data(), bytes.size());
  return payload;
}

}  // namespace

bool IsCollectiveOp(absl::string_view type) {
  return type == "Allreduce" || type == "Broadcast" || type == "Barrier";
}

bool GroupUsesCollectives(const TaskGroupDef& group) {
  for (const TaskDef& task : group.task()) {
    for (const NetDef& net : task.plan().network()) {
      for (const OperatorDef& op : net.op()) {
        if (IsCollectiveOp(op.type())) return true;
      }
    }
  }
  return false;
}

Collectives::Collectives(std::vector<std::string> participants,
                         std::vector<std::string> local,
                         CrossProcessRound cross_process,
                         const RunControl* control)
    : participants_(std::move(participants)),
      local_(std::move(local)),
      cross_process_(std::move(cross_process)),
      control_(control),
      current_(std::make_shared<Round>()) {
  CHECK(cross_process_ != nullptr || local_ == participants_)
      << "a Collectives without a cross-process hook must run every "
         "participant locally";
  current_->payloads.resize(local_.size());
}

absl::StatusOr<std::vector<std::string>> Collectives::Exchange(
    absl::string_view node, absl::string_view what, std::string bytes) {
  size_t index = local_.size();
  for (size_t i = 0; i < local_.size(); ++i) {
    if (local_[i] == node) index = i;
  }
  if (index == local_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", node, "' ran ", what,
                     " but takes no part in this group's collectives"));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!cancelled_.ok()) return cancelled_;
  std::shared_ptr<Round> round = current_;
  round->payloads[index] = Payload(what, bytes);
  if (++round->arrived == static_cast<int>(local_.size())) {
    // The last local node completes the round; later calls start the next.
    current_ = std::make_shared<Round>();
    current_->payloads.resize(local_.size());
    std::vector<std::string> local_payloads = std::move(round->payloads);
    lock.unlock();
    absl::StatusOr<std::vector<std::string>> all =
        cross_process_ != nullptr ? cross_process_(std::move(local_payloads))
                                  : std::move(local_payloads);
    lock.lock();
    round->result = std::move(all);
    round->done = true;
    cv_.notify_all();
  } else {
    while (!round->done && cancelled_.ok()) {
      // A session stop cannot notify: poll for it while waiting.
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (!round->done && control_ != nullptr && control_->StopRequested()) {
        return absl::CancelledError(absl::StrCat("node '", node,
                                                 "' stopped waiting in ", what,
                                                 ": the session was stopped"));
      }
    }
    if (!round->done) return cancelled_;
  }
  JG_RETURN_IF_ERROR(round->result.status());
  const std::vector<std::string>& payloads = *round->result;
  if (payloads.size() != participants_.size()) {
    return absl::InternalError(
        absl::StrCat("a collective round returned ", payloads.size(),
                     " contributions for ", participants_.size(), " nodes"));
  }
  std::vector<std::string> result;
  result.reserve(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    absl::string_view in = payloads[i];
    absl::string_view their_what;
    if (!ConsumePiece(&in, &their_what)) {
      return absl::DataLossError(
          absl::StrCat("the collective contribution of node '",
                       participants_[i], "' is damaged"));
    }
    if (their_what != what) {
      return absl::FailedPreconditionError(
          absl::StrCat("collectives out of step: node '", node, "' ran ", what,
                       " while node '", participants_[i], "' ran ", their_what,
                       "; every node of the group must run the same collective "
                       "operators in the same order"));
    }
    result.emplace_back(in);
  }
  return result;
}

void Collectives::Cancel(absl::Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.ok()) cancelled_ = std::move(why);
  cv_.notify_all();
}

void AppendPiece(std::string* out, absl::string_view piece) {
  const uint64_t n = piece.size();
  char buf[sizeof(n)];
  std::memcpy(buf, &n, sizeof(n));
  out->append(buf, sizeof(n));
  out->append(piece.data(), piece.size());
}

bool ConsumePiece(absl::string_view* in, absl::string_view* piece) {
  uint64_t n = 0;
  if (in->size() < sizeof(n)) return false;
  std::memcpy(&n, in->data(), sizeof(n));
  in->remove_prefix(sizeof(n));
  if (in->size() < n) return false;
  *piece = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

StatusProto StatusToProto(const absl::Status& status) {
  StatusProto proto;
  proto.set_code(status.raw_code());
  proto.set_message(std::string(status.message()));
  return proto;
}

absl::Status StatusFromProto(const StatusProto& proto) {
  if (proto.code() < 0 ||
      proto.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::DataLossError(
        absl::StrCat("a status with the unknown code ", proto.code(),
                     " came from another process: '",
                     absl::string_view(proto.message()).substr(0, 80), "'"));
  }
  return absl::Status(static_cast<absl::StatusCode>(proto.code()),
                      proto.message());
}

std::string EncodeStatus(const absl::Status& status) {
  return StatusToProto(status).SerializeAsString();
}

absl::Status DecodeStatus(absl::string_view encoded) {
  StatusProto proto;
  if (!proto.ParseFromArray(encoded.data(), static_cast<int>(encoded.size()))) {
    return absl::DataLossError("a damaged status came from another process");
  }
  return StatusFromProto(proto);
}

absl::StatusOr<std::string> EncodeTensor(const Tensor& tensor) {
  std::string out;
  SerializationOptions options;
  options.chunk_bytes = kMaxChunkBytes;
  JG_RETURN_IF_ERROR(SerializeTensor("t", tensor, options,
                                     [&](std::string key, std::string value) {
                                       AppendPiece(&out, value);
                                       return absl::OkStatus();
                                     }));
  return out;
}

absl::StatusOr<Tensor> DecodeTensor(absl::string_view bytes) {
  Blob blob;
  BlobAssembler assembler;
  absl::string_view piece;
  while (!bytes.empty()) {
    if (!ConsumePiece(&bytes, &piece)) {
      return absl::DataLossError(
          "a tensor received from another node is "
          "truncated");
    }
    JG_RETURN_IF_ERROR(assembler.Add("t", piece, &blob));
  }
  JG_RETURN_IF_ERROR(assembler.Finish());
  if (!assembler.IsComplete("t") || !blob.IsType<Tensor>()) {
    return absl::DataLossError(
        "a tensor received from another node is incomplete");
  }
  return std::move(*blob.GetMutable<Tensor>());
}

}  // namespace jobgraph

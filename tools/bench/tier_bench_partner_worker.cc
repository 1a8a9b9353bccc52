// tier_bench, part 2b's ranks (see the comment that opens tier_bench.cc): a
// job of two nodes on two hosts, kHostA and kHostB, which the two ranks of
// an `mpirun -np 2` on this machine stand for: each sets JOBGRAPH_HOST_NAME,
// which the Checkpointer takes for its host's name, before anything reads
// it, so that the local tier pattern's %h gives each its own tier.
//
// Rank 0 runs kNode with the bench's state, rank 1 kPartnerNode with one
// 4 KiB tensor: every rank must host a node, and a small one keeps rank 1's
// own restore out of the figures. Every step is collective (the sessions,
// the Checkpointer's calls, the barriers); the files (the hosts' tiers are
// directories of this one machine) are handled by rank 0 alone while rank 1
// waits at the next barrier.
//
// Each run also times a raw move, the floor of any partner restore here:
// the files of kNode's database read by rank 1 from kHostB's tier and sent
// to rank 0 into fresh memory, with no checks, no install and no load.
//
// Rank 0 prints its figures on standard output, in lines that begin with
// kWorkerLine, for the bench to read:
//   started hosts=<A>,<B>
//   saved save_s=<s> tier_a=<bytes> tier_b=<bytes> shared=<bytes>
//   run run=<n> first=<partner|shared> partner_s=<s> shared_s=<s>
//       partner_local=<b> partner_fetched=<b> partner_shared=<b>
//       shared_local=<b> shared_fetched=<b> shared_shared=<b>
//       raw_move_s=<s> raw_move_bytes=<b>
//   eviction <what EvictFromPageCache did>
// (a run line is one line); a failed rank prints "error ..." (WorkerMain in
// tier_bench.cc).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/resume_from.h"
#include "checkpoint/util/file_util.h"
#include "engine/mpi/mpi_session.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/tier_bench.h"

namespace jobgraph {
namespace bench {
namespace {

const std::vector<std::string>& Nodes() {
  static const auto* nodes = new std::vector<std::string>{kNode, kPartnerNode};
  return *nodes;
}

absl::Status Barrier(const Session& session) {
  return session.AllReduceSum({0}).status();
}

absl::StatusOr<int64_t> TreeBytes(const std::string& path) {
  int64_t bytes = 0;
  JG_RETURN_IF_ERROR(ForEachFile(path, [&](const std::string&, int64_t size) {
    bytes += size;
    return absl::OkStatus();
  }));
  return bytes;
}

// The files under `path`, one after another in one string: plain read(2)s
// into memory allocated once, the least that a copy of them costs.
absl::StatusOr<std::string> ReadTree(const std::string& path) {
  std::vector<std::pair<std::string, int64_t>> files;
  int64_t total = 0;
  JG_RETURN_IF_ERROR(
      ForEachFile(path, [&](const std::string& file, int64_t size) {
        files.emplace_back(file, size);
        total += size;
        return absl::OkStatus();
      }));
  std::string bytes(static_cast<size_t>(total), '\0');
  int64_t at = 0;
  for (const auto& [file, size] : files) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", file);
    for (int64_t done = 0; done < size;) {
      const ssize_t n = ::read(fd, bytes.data() + at + done,
                               static_cast<size_t>(size - done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const absl::Status status =
            n < 0 ? ErrnoStatus("read", file)
                  : absl::InternalError(absl::StrCat(file, " ended at ", done,
                                                     " of ", size, " bytes"));
        ::close(fd);
        return status;
      }
      done += n;
    }
    ::close(fd);
    at += size;
  }
  return bytes;
}

std::string TierFields(const char* prefix,
                       const CheckpointStats::TierBytes& b) {
  return absl::StrCat(prefix, "_local=", b.local, " ", prefix,
                      "_fetched=", b.partner, " ", prefix,
                      "_shared=", b.shared);
}

// Where a timed restore reads kNode's database from.
enum class Source {
  kPartner,  // kHostA's tier wiped: kHostB's copy, over MPI
  kShared,   // both tiers moved aside: the shared directory, cold
};

class PartnerWorker {
 public:
  PartnerWorker(const Config& c, std::string shared, std::string local_pattern,
                int rank)
      : c_(c),
        shared_(std::move(shared)),
        local_pattern_(std::move(local_pattern)),
        rank_(rank) {}

  absl::Status Run();

 private:
  struct Restored {
    double seconds = 0;
    CheckpointStats::TierBytes bytes;
  };
  struct RawMove {
    double seconds = 0;
    int64_t bytes = 0;
  };

  std::string Tier(const char* host) const {
    return absl::StrReplaceAll(local_pattern_, {{"%h", host}});
  }
  std::string Aside() const { return Tier(kHostB) + ".aside"; }
  CheckpointOptions Options() const {
    CheckpointOptions options;
    options.directory = shared_;
    options.local_directory = local_pattern_;
    options.shared_every = 1;
    return options;
  }
  double StateBytes() const {
    return static_cast<double>(c_.blobs) * static_cast<double>(c_.blob_bytes);
  }

  // Saves kPartnerEpoch (both hosts' tiers and the shared directory then
  // hold kNode's database), then wipes kHostA's tier.
  absl::Status Save();
  // One restore as a resuming job runs it, from `source`; rank 0's seconds.
  absl::StatusOr<Restored> TimeRestore(Source source);
  // The floor of a partner restore: kNode's database read by rank 1 from
  // kHostB's tier into one string and moved to rank 0, nothing more, timed
  // as TimeRestore times; rank 0's seconds and the bytes it got.
  absl::StatusOr<RawMove> TimeRawMove();
  // Rank 0, off the clock: the tiers as `source` needs them, then the
  // settling and the shared directory evicted from the page cache (both
  // sources read the shared commit log).
  absl::Status Prepare(Source source);
  // Rank 0, off the clock: the tiers as Save left them.
  absl::Status CleanUp(Source source);

  const Config c_;
  const std::string shared_, local_pattern_;
  const int rank_;
  // The session that saved: on rank 0 its workspace holds the state that
  // every restore is compared with.
  std::unique_ptr<MpiSession> saved_;
  std::vector<std::string> names_;
  std::vector<Tensor*> tensors_;
  std::string eviction_text_;
};

absl::Status PartnerWorker::Save() {
  JG_ASSIGN_OR_RETURN(saved_, MpiSession::Create(Nodes()));
  if (saved_->num_ranks() != 2 || saved_->rank() != rank_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "started as rank ", saved_->rank(), " of ", saved_->num_ranks(),
        " (OMPI_COMM_WORLD_RANK ", rank_, "); part 2b runs 2 ranks"));
  }
  if (rank_ == 0) {
    // MPI is up on both ranks: from here on a failure is the bench's or
    // jobgraph's, not a missing MPI.
    std::printf("%sstarted hosts=%s,%s\n", kWorkerLine, kHostA, kHostB);
    std::fflush(stdout);
    FillState(c_, saved_->local().NodeWorkspace(kNode), &names_, &tensors_);
  } else {
    saved_->local()
        .NodeWorkspace(kPartnerNode)
        ->SetTensor("w00",
                    Tensor::FromVector<float>(std::vector<float>(1024, 1.0f)));
  }
  Checkpointer saver(Options());
  JG_ASSIGN_OR_RETURN(const std::optional<int64_t> resumed,
                      saver.Start(*saved_, Nodes(), ResumeFrom::Scratch()));
  if (resumed.has_value()) {
    return absl::InternalError("a fresh checkpoint directory resumed");
  }
  JG_RETURN_IF_ERROR(saver.CaptureBlobNames(*saved_));
  const auto start = Clock::now();
  JG_RETURN_IF_ERROR(saver.SaveEpoch(*saved_, kPartnerEpoch).status());
  const double seconds = Seconds(start);
  saver.End();
  if (rank_ == 0) {
    std::vector<int64_t> bytes;
    for (const std::string& dir : {Tier(kHostA), Tier(kHostB), shared_}) {
      const std::string db =
          JoinPath(dir, absl::StrCat(kNode, ".", kPartnerEpoch));
      JG_ASSIGN_OR_RETURN(const bool there, PathExists(db));
      if (!there) {
        return absl::InternalError(absl::StrCat(
            "after the save ", db,
            " is missing: each host's tier (its own and its partner's "
            "copy) and the shared directory should hold it"));
      }
      JG_ASSIGN_OR_RETURN(const int64_t b, TreeBytes(dir));
      bytes.push_back(b);
    }
    std::printf("%ssaved save_s=%.6f tier_a=%lld tier_b=%lld shared=%lld\n",
                kWorkerLine, seconds, static_cast<long long>(bytes[0]),
                static_cast<long long>(bytes[1]),
                static_cast<long long>(bytes[2]));
    std::fflush(stdout);
    // The host lost its tier (replaced, or rebooted: a tmpfs).
    JG_RETURN_IF_ERROR(RemovePath(Tier(kHostA)));
  }
  return Barrier(*saved_);
}

absl::Status PartnerWorker::Prepare(Source source) {
  JG_ASSIGN_OR_RETURN(const bool a_there, PathExists(Tier(kHostA)));
  if (a_there) {
    return absl::InternalError(
        absl::StrCat(Tier(kHostA), " should have been wiped"));
  }
  if (source == Source::kShared &&
      ::rename(Tier(kHostB).c_str(), Aside().c_str()) != 0) {
    return ErrnoStatus("rename to " + Aside(), Tier(kHostB));
  }
  Settle(0, c_.settle_ms);
  JG_ASSIGN_OR_RETURN(const Eviction eviction, EvictFromPageCache(shared_));
  eviction_text_ = DescribeEviction(eviction);
  return absl::OkStatus();
}

absl::Status PartnerWorker::CleanUp(Source source) {
  // The restore made kHostA's tier again: its locks, and for the partner
  // source the fetched copy.
  JG_RETURN_IF_ERROR(RemovePath(Tier(kHostA)));
  if (source == Source::kShared) {
    JG_RETURN_IF_ERROR(RemovePath(Tier(kHostB)));
    if (::rename(Aside().c_str(), Tier(kHostB).c_str()) != 0) {
      return ErrnoStatus("rename to " + Tier(kHostB), Aside());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PartnerWorker::Restored> PartnerWorker::TimeRestore(
    Source source) {
  JG_ASSIGN_OR_RETURN(std::unique_ptr<MpiSession> session,
                      MpiSession::Create(Nodes()));
  if (rank_ == 0) JG_RETURN_IF_ERROR(Prepare(source));
  EmptyStoragePool();
  auto checkpointer = std::make_unique<Checkpointer>(Options());
  // Both ranks start together, as a resumed job's do after MPI_Init.
  JG_RETURN_IF_ERROR(Barrier(*session));
  const auto start = Clock::now();
  absl::StatusOr<std::optional<int64_t>> chosen =
      checkpointer->Start(*session, Nodes(), ResumeFrom::Latest());
  absl::StatusOr<CheckpointStats> restored =
      !chosen.ok() ? absl::StatusOr<CheckpointStats>(chosen.status())
      : !chosen->has_value()
          ? absl::StatusOr<CheckpointStats>(
                absl::NotFoundError("Start found no epoch to resume from"))
          : checkpointer->Restore(*session, **chosen);
  const double seconds = Seconds(start);
  JG_RETURN_IF_ERROR(Annotate(restored.status(), "restoring"));
  if (**chosen != kPartnerEpoch || !restored->tier_bytes.has_value()) {
    return absl::InternalError(absl::StrCat(
        "the resume chose epoch ", **chosen, " (expected ", kPartnerEpoch, ")",
        restored->tier_bytes.has_value() ? ""
                                         : " and reported no bytes per tier"));
  }
  const CheckpointStats::TierBytes bytes = *restored->tier_bytes;
  const bool as_expected =
      source == Source::kPartner
          ? bytes.partner >= StateBytes() && bytes.shared == 0
          : bytes.shared >= StateBytes() && bytes.partner == 0 &&
                bytes.local == 0;
  if (!as_expected) {
    return absl::InternalError(absl::StrCat(
        "the restore from ",
        source == Source::kPartner ? "the partner's tier" : "the shared dir",
        " read ", bytes.local, " bytes from the local tiers, fetched ",
        bytes.partner, " over MPI and read ", bytes.shared,
        " from the shared directory"));
  }
  if (rank_ == 0) {  // off the clock
    JG_RETURN_IF_ERROR(CheckSameTensors(*session->local().NodeWorkspace(kNode),
                                        names_, tensors_));
  }
  checkpointer->End();
  checkpointer.reset();
  session.reset();  // frees the restored tensors off the clock
  if (rank_ == 0) JG_RETURN_IF_ERROR(CleanUp(source));
  return Restored{seconds, bytes};
}

absl::StatusOr<PartnerWorker::RawMove> PartnerWorker::TimeRawMove() {
  JG_ASSIGN_OR_RETURN(std::unique_ptr<MpiSession> session,
                      MpiSession::Create(Nodes()));
  // As before a restore (Prepare), less the eviction: the shared directory
  // is not read, and the tier is a tmpfs.
  if (rank_ == 0) Settle(0, c_.settle_ms);
  EmptyStoragePool();
  JG_RETURN_IF_ERROR(Barrier(*session));
  const auto start = Clock::now();
  std::vector<std::string> to_each(session->num_ranks());
  if (rank_ == 1) {
    // On the clock, as the partner restore's pack on kHostB is. A failure
    // ends this rank at once, and mpirun the job (WorkerMain).
    absl::StatusOr<std::string> db = ReadTree(
        JoinPath(Tier(kHostB), absl::StrCat(kNode, ".", kPartnerEpoch)));
    JG_RETURN_IF_ERROR(Annotate(db.status(), "the raw move's read"));
    to_each[0] = *std::move(db);
  }
  absl::StatusOr<std::vector<std::string>> received =
      session->AllToAll(std::move(to_each));
  const double seconds = Seconds(start);
  JG_RETURN_IF_ERROR(Annotate(received.status(), "the raw move"));
  const int64_t bytes = static_cast<int64_t>((*received)[1].size());
  received->clear();  // frees the received bytes off the clock
  if (rank_ == 0 && static_cast<double>(bytes) < StateBytes()) {
    return absl::InternalError(absl::StrCat("the raw move brought ", bytes,
                                            " bytes, less than the state's ",
                                            StateBytes()));
  }
  return RawMove{seconds, bytes};
}

absl::Status PartnerWorker::Run() {
  JG_RETURN_IF_ERROR(Save());
  // Untimed: the process's first restore starts its load threads, and the
  // ranks' first large exchange sets up their transfer.
  JG_RETURN_IF_ERROR(TimeRestore(Source::kPartner).status());
  for (int run = 1; run <= c_.runs; ++run) {
    const bool partner_first = run % 2 == 1;
    Restored partner, shared;
    for (const bool turn_partner : {partner_first, !partner_first}) {
      JG_ASSIGN_OR_RETURN(
          const Restored r,
          TimeRestore(turn_partner ? Source::kPartner : Source::kShared));
      (turn_partner ? partner : shared) = r;
    }
    JG_ASSIGN_OR_RETURN(const RawMove raw, TimeRawMove());
    if (rank_ == 0) {
      std::printf(
          "%srun run=%d first=%s partner_s=%.6f shared_s=%.6f %s %s "
          "raw_move_s=%.6f raw_move_bytes=%lld\n",
          kWorkerLine, run, partner_first ? "partner" : "shared",
          partner.seconds, shared.seconds,
          TierFields("partner", partner.bytes).c_str(),
          TierFields("shared", shared.bytes).c_str(), raw.seconds,
          static_cast<long long>(raw.bytes));
      std::fflush(stdout);
    }
  }
  if (rank_ == 0) {
    std::printf("%seviction %s\n", kWorkerLine, eviction_text_.c_str());
    std::fflush(stdout);
  }
  saved_.reset();
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPartnerWorker(const Config& c, const std::string& shared_dir,
                              const std::string& local_pattern) {
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  int rank = -1;
  if (rank_text == nullptr || !absl::SimpleAtoi(rank_text, &rank) || rank < 0 ||
      rank > 1) {
    return absl::FailedPreconditionError(
        "--partner_worker runs as rank 0 or 1 of `mpirun -np 2`, which the "
        "bench starts");
  }
  if (shared_dir.empty() || local_pattern.find("%h") == std::string::npos) {
    return absl::InvalidArgumentError(
        "--partner_worker needs --partner_shared and --partner_local (with "
        "%h)");
  }
  // Before anything reads it: the Checkpointer takes it for the host's name.
  ::setenv("JOBGRAPH_HOST_NAME", rank == 0 ? kHostA : kHostB, 1);
  PartnerWorker worker(c, shared_dir, local_pattern, rank);
  return worker.Run();
}

}  // namespace bench
}  // namespace jobgraph

// mpi_commit_bench: what it costs, per epoch, to coordinate a commit across
// MPI ranks: everything a multi-rank save does except writing the
// databases, next to one MPI_Barrier of the same ranks measured in the same
// run.
//
// Started without mpirun (the usual way), it is the driver: it runs itself
// under `mpirun --oversubscribe -np N` for N in --ranks (default 2, 8, 32),
// --repeats times over (the sizes taking turns), prints each run's line and
// each size's ratios, then the median of the runs' ratios and their 90th
// percentile (nearest rank):
//   mpi_commit_bench: commit_vs_barrier_at_8=<r> commit_vs_barrier_at_32=<r>
//       p90_commit_vs_barrier_at_8=<r> p90_commit_vs_barrier_at_32=<r>
//       async_commit_vs_barrier_at_8=<r> async_commit_vs_barrier_at_32=<r>
// Under mpirun (started by the driver, or by hand with --worker) every rank
// hosts one node holding one small tensor; a Checkpointer with the "memory"
// database (so writing a database costs nothing) and its commit log in
// --dir (default: a fresh directory under /dev/shm, where fsync is cheap)
// saves --epochs epochs through MpiSession; one MPI_Barrier's cost is the
// time of 100 back to back, divided by 100; and one barrier under the
// commit's conditions (each rank writes its database, then enters the
// barrier: "barrier_after_write", timed as the coordination is). Then the
// commit's exchanges alone (a reduce to rank 0 and a broadcast from it, as
// in a commit on which every rank succeeds, without the save group or the
// commit-log write), from the last rank's start to the last rank's end, to
// separate the protocol from the local work around it. The figures are medians
// over epochs; the MPI collectives per epoch are counted through the MPI
// profiling interface (PMPI), so the count is the real one. The coordination of
// an epoch's commit is the time from the moment the last rank's database was
// written until every rank's SaveEpoch has returned (the ranks' monotonic-clock
// times, gathered after the run: one machine, one clock): the last outcome
// reaching rank 0
// ("to_rank0"), then the commit-log write and its status reaching every rank
// ("from_rank0"). "ratio" (and the last line) is its median over one barrier
// timed in a loop; "ratio_after_write" over one barrier after the writes;
// "commit_with_writes_ratio" is rank 0's whole SaveEpoch over one barrier,
// which also holds the database writes of every rank (with 4 or 16 ranks per
// core, the scheduler running them one after another). Rank 0's commit is also
// split as CheckpointStats splits it: writing its own database ("write"),
// waiting for the slowest rank's outcome ("agree"), and the commit-log write
// with its status reaching every rank ("log"). Last, the same saves with
// CheckpointOptions::async, each after an epoch that is a sleep of
// --async_epoch_us: what SaveEpoch then blocks for (one all-reduce on the
// previous save, and the snapshot), next to one barrier after the same sleep.
//
//   ./tools/bazel run -c opt //tools/bench:mpi_commit_bench

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpointer.h"
#include "engine/mpi/mpi_session.h"
#include "engine/net_builder.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, ranks, "2,8,32", "Rank counts to measure.");
ABSL_FLAG(int, epochs, 100, "Commits (and barriers) per rank count.");
ABSL_FLAG(int, repeats, 10,
          "Runs of each rank count; the last line gives the median and the "
          "90th percentile of their ratios.");
ABSL_FLAG(std::string, dir, "",
          "Directory for the commit log; default: a fresh one under /dev/shm "
          "(or the system temp directory without /dev/shm).");
ABSL_FLAG(bool, worker, false, "Run as an MPI rank (the driver sets it).");
ABSL_FLAG(int, async_epoch_us, 5000,
          "The length of an epoch between asynchronous saves (a sleep).");

namespace {

// Collectives issued by this rank, counted through PMPI.
std::atomic<long> collectives{0};

}  // namespace

extern "C" {
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  ++collectives;
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                        recvtype, comm);
}
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm) {
  ++collectives;
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                         displs, recvtype, comm);
}
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ++collectives;
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  ++collectives;
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm) {
  ++collectives;
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}
}  // extern "C"

namespace jobgraph {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `at` in microseconds of the machine's monotonic clock, which every rank
// of a one-machine run shares.
double MicrosSinceEpoch(Clock::time_point at) {
  return std::chrono::duration<double, std::micro>(at.time_since_epoch())
      .count();
}

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
      .count();
}

void Check(const absl::Status& status) { CHECK(status.ok()) << status; }

// Every rank's times of one measured step per round: when it started
// (`started`) and ended (`ended`) on this rank, in MicrosSinceEpoch.
// Collective; on rank 0, per round, from the last rank's start to the last
// rank's end (what every rank waits for); empty elsewhere.
std::vector<double> LastStartToLastEnd(const std::vector<double>& started,
                                       const std::vector<double>& ended,
                                       int rank, int size) {
  const int rounds = static_cast<int>(started.size());
  std::vector<double> all_started(rank == 0 ? rounds * size : 0);
  std::vector<double> all_ended(all_started.size());
  PMPI_Gather(started.data(), rounds, MPI_DOUBLE, all_started.data(), rounds,
              MPI_DOUBLE, 0, MPI_COMM_WORLD);
  PMPI_Gather(ended.data(), rounds, MPI_DOUBLE, all_ended.data(), rounds,
              MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<double> spans;
  for (int e = 0; rank == 0 && e < rounds; ++e) {
    double last_started = all_started[e];
    double last_ended = all_ended[e];
    for (int r = 1; r < size; ++r) {
      last_started = std::max(last_started, all_started[r * rounds + e]);
      last_ended = std::max(last_ended, all_ended[r * rounds + e]);
    }
    spans.push_back(last_ended - last_started);
  }
  return spans;
}

int Worker() {
  int size = 0;
  // MpiSession starts MPI; the node count must match the ranks first.
  const char* env_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  CHECK(env_size != nullptr && absl::SimpleAtoi(env_size, &size))
      << "run the worker under mpirun";
  std::vector<std::string> nodes;
  for (int i = 0; i < size; ++i) nodes.push_back(absl::StrCat("node_", i));
  absl::StatusOr<std::unique_ptr<MpiSession>> made = MpiSession::Create(nodes);
  Check(made.status());
  MpiSession& session = **made;

  std::string dir = absl::GetFlag(FLAGS_dir);
  std::string log_dir;
  if (session.rank() == 0) {
    if (dir.empty()) {
      const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
      std::string pattern = absl::StrCat(base, "/mpi_commit_bench.XXXXXX");
      CHECK(mkdtemp(pattern.data()) != nullptr);
      dir = pattern;
    }
  }
  absl::StatusOr<std::string> shared = session.Broadcast(dir, 0);
  Check(shared.status());
  dir = *shared;

  TaskGroup init("init", GLOBAL);
  for (const std::string& node : nodes) {
    Task& task = init.NewTask(Node(node));
    task.net().Const(Tensor::FromVector<float>(std::vector<float>(16, 1.0f)),
                     "w");
  }
  Checkpointer checkpointer({.directory = dir, .db_type = "memory"});
  Check(checkpointer.Start(session, nodes, ResumeFrom::Scratch()).status());
  Check(session.Run(init));
  Check(checkpointer.CaptureBlobNames(session));

  const int epochs = absl::GetFlag(FLAGS_epochs);
  std::vector<double> commit_us;
  std::vector<double> write_us, agree_us, log_us;
  // When this rank's database was written and when its SaveEpoch returned,
  // in microseconds of the machine's monotonic clock (one clock for every
  // rank of this one-machine run).
  std::vector<double> written_at(epochs), returned_at(epochs);
  std::vector<double> barrier_us;
  long per_epoch = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const long before = collectives.load();
    const Clock::time_point start = Clock::now();
    absl::StatusOr<CheckpointStats> stats =
        checkpointer.SaveEpoch(session, epoch);
    const Clock::time_point end = Clock::now();
    commit_us.push_back(MicrosSince(start));
    per_epoch = collectives.load() - before;
    Check(stats.status());
    write_us.push_back(stats->write_micros);
    agree_us.push_back(stats->agree_micros);
    log_us.push_back(stats->commit_micros);
    returned_at[epoch - 1] = MicrosSinceEpoch(end);
    // The agreement starts when this rank's database is written.
    written_at[epoch - 1] =
        returned_at[epoch - 1] - stats->agree_micros - stats->commit_micros;
  }
  // Per epoch, the coordination: from the moment the last rank's database
  // was written until every rank's SaveEpoch had returned. Split at the
  // moment rank 0 had every rank's outcome (its return less its commit):
  // the last write reaching rank 0, then the commit-log write and its
  // status reaching every rank.
  const std::vector<double> coordination_us =
      LastStartToLastEnd(written_at, returned_at, session.rank(), size);
  std::vector<double> agreed_at(epochs);
  for (int e = 0; e < epochs; ++e) agreed_at[e] = returned_at[e] - log_us[e];
  const std::vector<double> to_root_us =
      LastStartToLastEnd(written_at, agreed_at, session.rank(), size);
  std::vector<double> from_root_us;
  for (size_t e = 0; e < coordination_us.size(); ++e) {
    from_root_us.push_back(coordination_us[e] - to_root_us[e]);
  }
  // One barrier under the commit's own conditions: every rank writes the
  // same database as its save does (the Save op, the same blob, the
  // "memory" database), then enters one MPI_Barrier; timed as the
  // coordination is, from the moment the last rank's database was written
  // until every rank has left the barrier. With several ranks per core the
  // ranks arrive one after another and leave as the scheduler gets to them,
  // which a barrier timed in a tight loop never sees.
  std::vector<double> after_write_us;
  {
    TaskGroup save("bench_save", GLOBAL);
    for (const std::string& node : nodes) {
      if (!session.HostsNode(node)) continue;
      Task& task = save.NewTask(Node(node));
      task.net().Op(
          "Save", {BlobRef("w")}, {},
          {MakeArg("db", absl::StrCat(dir, "/barrier_", node)),
           MakeArg("db_type", "memory"), MakeArg("absolute_path", 1)});
    }
    std::vector<double> arrived(epochs), left(epochs);
    for (int e = 0; e < epochs; ++e) {
      PMPI_Barrier(MPI_COMM_WORLD);
      Check(session.RunHosted(save));
      arrived[e] = MicrosSinceEpoch(Clock::now());
      PMPI_Barrier(MPI_COMM_WORLD);
      left[e] = MicrosSinceEpoch(Clock::now());
    }
    after_write_us = LastStartToLastEnd(arrived, left, session.rank(), size);
  }
  // One barrier's cost: a run of kBarriers back to back, per barrier (a
  // single barrier timed on one rank can end at once for the last rank to
  // arrive at the previous one).
  constexpr int kBarriers = 100;
  for (int round = 0; round < epochs; ++round) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kBarriers; ++i) PMPI_Barrier(MPI_COMM_WORLD);
    barrier_us.push_back(MicrosSince(start) / kBarriers);
  }
  checkpointer.End();
  // The same saves in the background (CheckpointOptions::async): each rank
  // writes on its thread, the ranks agree at the next save, and rank 0
  // commits on its thread. The job blocks for the agreement and the
  // snapshot only, provided the epoch outlasts the background work: here an
  // epoch is a sleep of --async_epoch_us on every rank, which leaves the
  // cores to the save threads. Timed: SaveEpoch, from the moment every rank
  // has called it.
  std::vector<double> async_us;
  std::vector<double> after_sleep_us;   // one barrier, timed as the saves
  std::vector<double> async_settle_us;  // of async_us: the agreement
  long async_per_epoch = 0;
  {
    Checkpointer background(
        {.directory = dir + "/async", .db_type = "memory", .async = true});
    Check(background.Start(session, nodes, ResumeFrom::Scratch()).status());
    Check(background.CaptureBlobNames(session));
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      // One barrier after the same sleep: what a single collective costs
      // when the ranks have just woken up, not in a loop.
      usleep(absl::GetFlag(FLAGS_async_epoch_us));
      PMPI_Barrier(MPI_COMM_WORLD);
      const Clock::time_point barrier_start = Clock::now();
      PMPI_Barrier(MPI_COMM_WORLD);
      after_sleep_us.push_back(MicrosSince(barrier_start));
      usleep(absl::GetFlag(FLAGS_async_epoch_us));
      PMPI_Barrier(MPI_COMM_WORLD);
      const long before = collectives.load();
      const Clock::time_point start = Clock::now();
      absl::StatusOr<CheckpointStats> saved =
          background.SaveEpoch(session, epoch);
      async_us.push_back(MicrosSince(start));
      Check(saved.status());
      async_settle_us.push_back(saved->waited_micros);
      async_per_epoch = collectives.load() - before;
      for (const SaveOutcome& r : background.TakeFinishedSaves()) {
        Check(r.stats.status());
      }
    }
    background.WaitForBackgroundSave();
    for (const SaveOutcome& r : background.TakeFinishedSaves()) {
      Check(r.stats.status());
    }
    background.End();
  }
  // The commit's exchanges alone (no save group, no commit-log write): the
  // protocol's share.
  std::vector<double> entered(epochs), left(epochs);
  for (int e = 0; e < epochs; ++e) {
    PMPI_Barrier(MPI_COMM_WORLD);
    entered[e] = MicrosSinceEpoch(Clock::now());
    // What a commit exchanges when every rank succeeds: the bytes and the
    // failures to rank 0, then rank 0's outcome to every rank.
    Check(session.ReduceSumToRoot({1234, 0}, 0).status());
    Check(session.BroadcastInts({0, 1234, 0}, 0).status());
    left[e] = MicrosSinceEpoch(Clock::now());
  }
  const std::vector<double> protocol_us =
      LastStartToLastEnd(entered, left, session.rank(), size);
  if (session.rank() == 0) {
    const double commit = Median(commit_us);
    const double coordination = Median(coordination_us);
    const double barrier = Median(barrier_us);
    const double protocol = Median(protocol_us);
    const double async = Median(async_us);
    const double after_write = Median(after_write_us);
    std::printf(
        "ranks=%d coordination_us=%.1f (to_rank0 %.1f from_rank0 %.1f) "
        "commit_us=%.1f (write %.1f agree %.1f log %.1f) protocol_us=%.1f "
        "barrier_us=%.1f protocol_vs_barrier=%.2f collectives_per_epoch=%ld "
        "commit_with_writes_ratio=%.2f ratio=%.2f "
        "barrier_after_write_us=%.1f ratio_after_write=%.2f "
        "async_commit_us=%.1f (agree %.1f) async_collectives_per_epoch=%ld "
        "barrier_after_sleep_us=%.1f async_ratio=%.2f\n",
        size, coordination, Median(to_root_us), Median(from_root_us), commit,
        Median(write_us), Median(agree_us), Median(log_us), protocol, barrier,
        protocol / barrier, per_epoch, commit / barrier, coordination / barrier,
        after_write, coordination / after_write, async, Median(async_settle_us),
        async_per_epoch, Median(after_sleep_us), async / barrier);
    std::fflush(stdout);
    if (absl::GetFlag(FLAGS_dir).empty()) {
      std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
    }
  }
  return 0;
}

// The number after `key` in `line`.
double Field(absl::string_view line, absl::string_view key) {
  const size_t at = line.find(key);
  CHECK(at != line.npos) << "no" << key << " in " << line;
  absl::string_view value = line.substr(at + key.size());
  value = value.substr(0, value.find_first_of(" \n"));
  double r = 0;
  CHECK(absl::SimpleAtod(value, &r)) << line;
  return r;
}

// The value at quantile `q` of `values` (nearest rank: the smallest value
// that at least q of them do not exceed).
double Quantile(std::vector<double> values, double q) {
  CHECK(!values.empty());
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

int Driver(const char* self) {
  const int repeats = absl::GetFlag(FLAGS_repeats);
  CHECK_GE(repeats, 1) << "--repeats must be 1 or more";
  std::vector<int> sizes;
  for (absl::string_view n : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int ranks = 0;
    CHECK(absl::SimpleAtoi(n, &ranks) && ranks > 0) << "--ranks: " << n;
    sizes.push_back(ranks);
  }
  // Each size's ratio and async_ratio, one per run.
  std::map<int, std::vector<double>> ratio;
  std::map<int, std::vector<double>> async_ratio;
  for (int repeat = 1; repeat <= repeats; ++repeat) {
    for (int ranks : sizes) {
      const std::string command = absl::StrCat(
          "mpirun --allow-run-as-root --oversubscribe -np ", ranks, " '", self,
          "' --worker --epochs=", absl::GetFlag(FLAGS_epochs),
          " --async_epoch_us=", absl::GetFlag(FLAGS_async_epoch_us),
          absl::GetFlag(FLAGS_dir).empty()
              ? ""
              : absl::StrCat(" --dir='", absl::GetFlag(FLAGS_dir), "'"));
      FILE* out = popen(command.c_str(), "r");
      CHECK(out != nullptr) << command;
      char line[512];
      std::string last;
      std::printf("run %d/%d: ", repeat, repeats);
      while (std::fgets(line, sizeof(line), out) != nullptr) {
        std::fputs(line, stdout);
        last = line;
      }
      std::fflush(stdout);
      CHECK_EQ(pclose(out), 0) << command;
      ratio[ranks].push_back(Field(last, " ratio="));
      async_ratio[ranks].push_back(Field(last, " async_ratio="));
    }
  }
  auto list = [](const std::vector<double>& values) {
    return absl::StrJoin(values, " ", [](std::string* out, double v) {
      absl::StrAppendFormat(out, "%.2f", v);
    });
  };
  for (int ranks : sizes) {
    std::printf(
        "ranks=%d over %d runs: ratio median %.2f p90 %.2f (%s); async_ratio "
        "median %.2f p90 %.2f (%s)\n",
        ranks, repeats, Quantile(ratio[ranks], 0.5),
        Quantile(ratio[ranks], 0.9), list(ratio[ranks]).c_str(),
        Quantile(async_ratio[ranks], 0.5), Quantile(async_ratio[ranks], 0.9),
        list(async_ratio[ranks]).c_str());
  }
  std::vector<std::string> parts;
  for (const auto& [name, ratios, q] :
       {std::tuple{"commit", &ratio, 0.5},
        std::tuple{"p90_commit", &ratio, 0.9},
        std::tuple{"async_commit", &async_ratio, 0.5}}) {
    for (int ranks : {8, 32}) {
      if (ratios->count(ranks)) {
        parts.push_back(absl::StrFormat("%s_vs_barrier_at_%d=%.2f", name, ranks,
                                        Quantile(ratios->at(ranks), q)));
      }
    }
  }
  std::printf("mpi_commit_bench: %s\n", absl::StrJoin(parts, " ").c_str());
  return 0;
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_WARNING;
  google::InitGoogleLogging(argv[0]);
  if (absl::GetFlag(FLAGS_worker)) return jobgraph::Worker();
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK_GT(n, 0);
  self[n] = '\0';
  return jobgraph::Driver(self);
}

// mpi_job: a small builder-code job for tests/mpi_test.cc, run the same way
// under mpirun (MpiSession) and in one process (LocalSession).
//
//   mpi_job --nodes=N [--session=local|mpi|auto] [--fail_node=NAME]
//           [--epochs=E] [--checkpoint_dir=DIR] [--resume_from_epoch=E]
//           [--node_ranks=NODE:RANK,...]
//
// Node i starts with x_i = [i + 0.1, 1 / (i + 3), -i * 1e-7] (float) and a
// counter c_i = i (int64). Each epoch every node runs
//   s = Allreduce(x); x = x + s * 1e-3 (float);  b = Broadcast(c,
//   root=trainer_1 or trainer_0); c = c + b; Barrier
// so every node's values depend on every other node's, in a fixed order.
// --fail_node makes one node fail (see the flag).
//
// Rank 0 prints, for each node, "node <name> x=<%08x bits,...> c=<c>", then
// "result: epochs=<E>". Every rank prints its failure as
// "rank <r> error: <message>" to stderr.
//
// --node_ranks places the nodes explicitly (MpiSessionOptions::node_ranks);
// every rank then first prints "rank <r> hosts <node>,<node>..." (the nodes
// for which HostsNode is true) and rank 0 "placement <node>=<RankOf>...".
//
// With --event_fifo_dir=DIR each node's task prints an event on standard
// output at the end of its init net (before epoch 0 is saved) and at the
// start of every epoch (before any collective):
//   event rank=<r> pid=<pid> node=<node> group=<init|epoch>
// and then waits for one byte from the FIFO DIR/ack.<r> (which the parent
// made) before it goes on, so that the parent can kill the rank at exactly
// that point. End of file on the FIFO stops the waiting for the rest of the
// run.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "engine/mpi/mpi_session.h"
#include "engine/net_builder.h"
#include "engine/operator.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "examples/example_util.h"

ABSL_FLAG(int, nodes, 2, "Nodes of the job.");
ABSL_FLAG(int64_t, epochs, 3, "Epochs to run.");
ABSL_FLAG(std::string, fail_node, "",
          "This node fails: in its init task (no collectives there, so every "
          "rank reports the error), or with --fail_in_epoch in its epoch task "
          "before any collective (the MPI job is aborted).");
ABSL_FLAG(bool, fail_in_epoch, false, "See --fail_node.");
ABSL_FLAG(std::string, checkpoint_extra_node, "",
          "Also checkpoint this node, which runs no task (so no rank hosts "
          "it).");
ABSL_FLAG(std::string, event_fifo_dir, "",
          "Print an event line at the start of every node's init and epoch "
          "task and wait for a byte from the FIFO <dir>/ack.<rank> (see the "
          "file's comment).");
ABSL_FLAG(std::string, node_ranks, "",
          "NODE:RANK,...: an MpiSession with this explicit placement "
          "(MpiSessionOptions::node_ranks) instead of the default.");
ABSL_FLAG(bool, check_run_hosted, false,
          "Instead of running the job, every rank runs the init group with "
          "Session::RunHosted (its own nodes' tasks only, no agreement) and "
          "then the epoch group (collectives: refused), and prints "
          "\"rank <r> init: <status>\" and \"rank <r> epoch: <status>\".");

namespace jobgraph {
namespace {

class AlwaysFailOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    return Error(absl::StatusCode::kInternal, "deliberate failure");
  }
};
JG_REGISTER_OPERATOR(AlwaysFail, AlwaysFailOp);

// What TestEvent needs to know: this process's rank and its FIFO.
struct Events {
  std::mutex mu;
  int rank = 0;
  std::string fifo;  // DIR/ack.<rank>; "" when not waiting (any more)
  int fd = -1;
};
Events& TheEvents() {
  static Events* events = new Events;
  return *events;
}

// TestEvent(): prints "event rank=<r> pid=<pid> node=<node> group=<group>"
// (args `node` and `group`) and waits for a byte from the rank's FIFO.
class TestEventOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;
  absl::Status Run() override {
    Events& events = TheEvents();
    std::lock_guard<std::mutex> lock(events.mu);
    std::printf("event rank=%d pid=%d node=%s group=%s\n", events.rank,
                static_cast<int>(::getpid()),
                GetArg<std::string>("node", "").c_str(),
                GetArg<std::string>("group", "").c_str());
    std::fflush(stdout);
    if (events.fifo.empty()) return absl::OkStatus();
    if (events.fd < 0) {
      events.fd = ::open(events.fifo.c_str(), O_RDONLY | O_CLOEXEC);
      if (events.fd < 0) {
        return Error(absl::StatusCode::kInternal,
                     absl::StrCat("cannot open ", events.fifo, ": ",
                                  std::strerror(errno)));
      }
    }
    char byte = 0;
    ssize_t n = 0;
    do {
      n = ::read(events.fd, &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) events.fifo.clear();  // the parent is done with events
    return absl::OkStatus();
  }
};
JG_REGISTER_OPERATOR(TestEvent, TestEventOp);

std::string Bits(const Tensor& t) {
  std::vector<std::string> parts;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &t.data<float>()[i], sizeof(bits));
    parts.push_back(absl::StrFormat("%08x", bits));
  }
  return absl::StrJoin(parts, ",");
}

int Main(int argc, char** argv) {
  examples::InitExample(argc, argv, "mpi_job: a test job with collectives");
  absl::StatusOr<examples::CommonOptions> common = examples::ReadCommonFlags();
  if (!common.ok()) return examples::UsageError(common.status());
  const int num_nodes = absl::GetFlag(FLAGS_nodes);
  const std::string fail_node = absl::GetFlag(FLAGS_fail_node);

  Job job;
  std::vector<std::string> nodes;
  for (int i = 0; i < num_nodes; ++i)
    nodes.push_back(absl::StrCat("trainer_", i));
  const std::string root = num_nodes > 1 ? "trainer_1" : "trainer_0";
  for (int i = 0; i < num_nodes; ++i) {
    const Node node(nodes[i]);
    Task& init = job.init_group().NewTask(node);
    init.net().Const(
        Tensor::FromVector<float>({i + 0.1f, 1.0f / (i + 3), -i * 1e-7f}), "x");
    init.net().ConstScalar<int64_t>("c", i);
    init.net().ConstScalar<float>("eps", 1e-3f);
    const bool fails = nodes[i] == fail_node;
    if (fails && !absl::GetFlag(FLAGS_fail_in_epoch)) {
      init.net().Op("AlwaysFail", {}, {});
    }
    Task& step = job.epoch_group().NewTask(node, {.workspace_type = GLOBAL});
    NetBuilder& net = step.net();
    if (!absl::GetFlag(FLAGS_event_fifo_dir).empty()) {
      init.net().Op(
          "TestEvent", {}, {},
          {MakeArg("node", nodes[i]), MakeArg("group", std::string("init"))});
      net.Op(
          "TestEvent", {}, {},
          {MakeArg("node", nodes[i]), MakeArg("group", std::string("epoch"))});
    }
    if (fails && absl::GetFlag(FLAGS_fail_in_epoch)) {
      net.Op("AlwaysFail", {}, {});
    }
    net.Op("Allreduce", {BlobRef("x")}, {BlobRef("s")});
    net.Op("Mul", {BlobRef("s"), BlobRef("eps")}, {BlobRef("s")});
    net.Add(BlobRef("x"), BlobRef("s"), BlobRef("x"));
    net.Op("Broadcast", {BlobRef("c")}, {BlobRef("b")},
           {MakeArg("root", root)});
    net.Add(BlobRef("c"), BlobRef("b"), BlobRef("c"));
    net.Op("Barrier", {}, {});
  }
  EpochLimiter(job, Node(nodes[0]), absl::GetFlag(FLAGS_epochs));
  if (const std::string extra = absl::GetFlag(FLAGS_checkpoint_extra_node);
      !extra.empty()) {
    std::vector<std::string> checkpointed = nodes;
    checkpointed.push_back(extra);
    job.SetNodesToCheckpoint(checkpointed);
  }

  absl::StatusOr<std::unique_ptr<Session>> made;
  if (const std::string spec = absl::GetFlag(FLAGS_node_ranks); !spec.empty()) {
    MpiSessionOptions options;
    for (absl::string_view entry : absl::StrSplit(spec, ',')) {
      std::pair<std::string, std::string> parts = absl::StrSplit(entry, ':');
      int rank = 0;
      if (!absl::SimpleAtoi(parts.second, &rank)) {
        return examples::UsageError(absl::InvalidArgumentError(
            absl::StrCat("bad --node_ranks entry '", entry, "'")));
      }
      options.node_ranks[parts.first] = rank;
    }
    absl::StatusOr<std::unique_ptr<MpiSession>> mpi =
        MpiSession::Create(job.nodes(), options);
    if (!mpi.ok()) return examples::UsageError(mpi.status());
    std::vector<std::string> hosted;
    std::vector<std::string> placement;
    for (const std::string& node : (*mpi)->nodes()) {
      if ((*mpi)->HostsNode(node)) hosted.push_back(node);
      placement.push_back(absl::StrCat(node, "=", (*mpi)->RankOf(node)));
    }
    std::printf("rank %d hosts %s\n", (*mpi)->rank(),
                absl::StrJoin(hosted, ",").c_str());
    if ((*mpi)->rank() == 0) {
      std::printf("placement %s\n", absl::StrJoin(placement, " ").c_str());
    }
    std::fflush(stdout);
    made = std::unique_ptr<Session>(*std::move(mpi));
  } else {
    made = examples::MakeSession(job, *common);
  }
  if (!made.ok()) return examples::UsageError(made.status());
  Session& session = **made;
  if (const std::string dir = absl::GetFlag(FLAGS_event_fifo_dir);
      !dir.empty()) {
    TheEvents().rank = session.rank();
    TheEvents().fifo = absl::StrCat(dir, "/ack.", session.rank());
  }
  if (absl::GetFlag(FLAGS_check_run_hosted)) {
    const absl::Status init = session.RunHosted(job.init_group());
    const absl::Status epoch = session.RunHosted(job.epoch_group());
    std::printf("rank %d init: %s\nrank %d epoch: %s\n", session.rank(),
                init.ToString().c_str(), session.rank(),
                epoch.ToString().c_str());
    std::fflush(stdout);
    return 0;
  }
  absl::StatusOr<int64_t> epochs = examples::RunJob(job, *common, session);
  if (!epochs.ok()) {
    std::fprintf(stderr, "rank %d error: %s\n", session.rank(),
                 std::string(epochs.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> lines;
  for (const std::string& node : nodes) {
    absl::StatusOr<Tensor> x = session.FetchBlob(node, "x");
    absl::StatusOr<Tensor> c = session.FetchBlob(node, "c");
    if (!x.ok() || !c.ok()) return 1;
    lines.push_back(absl::StrCat("node ", node, " x=", Bits(*x),
                                 " c=", c->scalar<int64_t>()));
  }
  if (examples::PrintsResults(session)) {
    for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    std::printf("result: epochs=%lld\n", static_cast<long long>(*epochs));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) { return jobgraph::Main(argc, argv); }

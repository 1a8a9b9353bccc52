// linear_regression: a small training job. A seeded synthetic data set of
// (x, y = x.w + b + noise) samples is made by the init group together with
// the parameters W and b (zeros); every epoch is one pass of minibatch SGD
// over a shuffling reader; the job stops after --epochs epochs or once an
// epoch's mean squared error is at most --loss_threshold. The download group
// copies the parameters to final_W / final_b, and the exit group saves them
// to a LevelDB at --model_out (as blobs "W" and "b").
//
// Everything is deterministic (one reading thread, sums in a fixed order,
// a shuffle that depends only on the seed and the epoch), so a run that is
// killed and resumed from any checkpoint ends with bit-identical parameters.
// Resuming from the final epoch runs one more epoch that changes nothing
// (the `done` blob makes the SGD op a no-op), as Caffe2's runner always runs
// at least one epoch after a resume.
//
// Usage:
//   bazel run //examples:linear_regression
//   bazel run //examples:linear_regression -- --checkpoint_dir=/tmp/lr
//       --epochs=30 --model_out=/tmp/lr_model          (one command line)
//   bazel run //examples:linear_regression -- --checkpoint_dir=/tmp/lr
//       --epochs=30 --resume_from_epoch=latest
//
// With --nodes=N the job is data-parallel: trainer_i trains on shard i of
// the samples and Allreduce sums the gradients, in node order, so the run
// is bit-identical whether the nodes share one process or spread over the
// ranks of `mpirun -np N` (the result differs from --nodes=1, which sums
// the same gradients in another order).
//
// Flags: --nodes, --num_samples, --num_features, --batch_size, --learning_rate,
// --epochs, --loss_threshold, --noise, --seed, --model_out, and the common
// ones (examples/example_util.h).
//
// stdout ends with two lines:
//   bits: W=<%08x of each float's bits, comma-separated> b=<%08x>
//   result: epochs=<last epoch> W=<%.9g,...> b=<%.9g> loss=<%.9g>
// where loss is the mean squared error of the last training epoch (measured
// during the pass, before each batch's update). One line per epoch, with the
// loss, goes to stderr. Exit status: 0, 2 for bad flags, 1 on failure.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/job.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/record.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "examples/example_util.h"
#include "glog/logging.h"

ABSL_FLAG(int, nodes, 1,
          "Data-parallel nodes (trainer_0, ...): each trains on its shard of "
          "the samples and the gradients are summed with Allreduce. Under "
          "mpirun the nodes spread over the ranks; the result is the same.");
ABSL_FLAG(int64_t, num_samples, 4096, "Samples in the synthetic data set.");
ABSL_FLAG(int64_t, num_features, 3, "Features per sample (the size of W).");
ABSL_FLAG(int64_t, batch_size, 32, "Samples per SGD step.");
ABSL_FLAG(double, learning_rate, 0.05, "SGD step size.");
ABSL_FLAG(int64_t, epochs, 20,
          "Stop after this many epochs (passes over the data); 0 for no "
          "limit (then --loss_threshold must be set).");
ABSL_FLAG(double, loss_threshold, 0,
          "Also stop after the first epoch whose mean squared error is at "
          "most this; 0 disables it.");
ABSL_FLAG(double, noise, 0.1, "Standard deviation of the noise added to y.");
ABSL_FLAG(int64_t, seed, 1, "Seed of the data and of the shuffling.");
ABSL_FLAG(std::string, model_out, "",
          "Save the final W and b to a LevelDB database at this path (its "
          "parent directory must exist). Relative paths resolve like "
          "--checkpoint_dir.");

namespace jobgraph {
namespace examples {
namespace {

constexpr char kNode[] = "trainer_0";

struct Options {
  int nodes = 1;
  int64_t num_samples = 0;
  int64_t num_features = 0;
  int64_t batch_size = 0;
  double learning_rate = 0;
  int64_t epochs = 0;
  double loss_threshold = 0;
  double noise = 0;
  int64_t seed = 0;
  std::string model_out;
};

absl::StatusOr<Options> ReadFlags() {
  Options o;
  o.num_samples = absl::GetFlag(FLAGS_num_samples);
  if (o.num_samples < 1 || o.num_samples > (int64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_samples must be between 1 and 2^26, got ", o.num_samples));
  }
  o.nodes = absl::GetFlag(FLAGS_nodes);
  JG_RETURN_IF_ERROR(CheckFlagRange("nodes", o.nodes, 1, 1024));
  if (o.num_samples % o.nodes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_samples=", o.num_samples, " must be a multiple of --nodes=",
        o.nodes, " (every node trains on an equal shard)"));
  }
  o.num_features = absl::GetFlag(FLAGS_num_features);
  JG_RETURN_IF_ERROR(CheckFlagRange("num_features", o.num_features, 1, 1024));
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  JG_RETURN_IF_ERROR(CheckFlagRange("batch_size", o.batch_size, 1));
  o.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--learning_rate must be a positive number, got ", o.learning_rate));
  }
  o.epochs = absl::GetFlag(FLAGS_epochs);
  JG_RETURN_IF_ERROR(CheckFlagRange("epochs", o.epochs, 0,
                                    std::numeric_limits<int64_t>::max(),
                                    "0: no limit"));
  o.loss_threshold = absl::GetFlag(FLAGS_loss_threshold);
  if (!(o.loss_threshold >= 0) || !std::isfinite(o.loss_threshold)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss_threshold must be >= 0 (0: disabled), got ", o.loss_threshold));
  }
  if (o.epochs == 0 && o.loss_threshold == 0) {
    return absl::InvalidArgumentError(
        "--epochs=0 needs --loss_threshold > 0, or the job would never stop");
  }
  o.noise = absl::GetFlag(FLAGS_noise);
  if (!(o.noise >= 0) || !std::isfinite(o.noise)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--noise must be >= 0, got ", o.noise));
  }
  o.seed = absl::GetFlag(FLAGS_seed);
  JG_ASSIGN_OR_RETURN(o.model_out,
                      ResolvePath("model_out", absl::GetFlag(FLAGS_model_out)));
  if (!o.model_out.empty()) {
    // Checked now rather than after training: Save needs the directory.
    const std::string parent =
        std::filesystem::path(o.model_out).parent_path().string();
    std::error_code error;
    if (!std::filesystem::is_directory(parent, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model_out=", o.model_out, ": directory ", parent,
                       " does not exist"));
    }
  }
  return o;
}

// The job. Root-workspace blobs (made by the init group, so checkpointed):
// x, y, true_W, true_b, W, b, the shuffle cursor, epoch_count, done,
// last_loss. The epoch task's own sse/count accumulators are reset every
// epoch and vanish with its private workspace.
// Trainer `shard` of o.nodes: its shard of the data, its copy of W and b.
// With one node, each batch is one LinearRegressionSGDStep; with several,
// every node computes its batch's gradient, Allreduce sums them in node
// order, and every node applies the same sum, so the copies stay identical.
void BuildTrainer(Job& job, const Options& o, int shard, int64_t epoch_delay_ms,
                  int64_t record_delay_ms) {
  const std::string name = absl::StrCat("trainer_", shard);
  const Node node(name);
  Task& init = job.init_group().NewTask(node);
  NetBuilder& net = init.net();
  const std::vector<BlobRef> data = net.Op(
      "SyntheticLinearData", {},
      {BlobRef("x", name), BlobRef("y", name), BlobRef("true_W", name),
       BlobRef("true_b", name)},
      {MakeArg("seed", o.seed), MakeArg("num_samples", o.num_samples),
       MakeArg("num_features", o.num_features), MakeArg("noise", o.noise),
       MakeArg("num_shards", int64_t{o.nodes}),
       MakeArg("shard", int64_t{shard})});
  Record record;
  record.AddField("x", data[0]);
  record.AddField("y", data[1]);
  Reader reader =
      Dataset(record, "train")
          .NewShuffledReader(net, static_cast<uint64_t>(o.seed + shard),
                             o.batch_size);
  const BlobRef w = net.Const(Tensor(FLOAT, {o.num_features}), "W");
  const BlobRef b = net.ConstScalar<float>("b", 0.0f);
  const BlobRef epoch_count = net.ConstScalar<int64_t>("epoch_count", 0);
  const BlobRef done = net.ConstScalar<bool>("done", false);
  const BlobRef last_loss = net.ConstScalar<double>(
      "last_loss", std::numeric_limits<double>::quiet_NaN());

  // One thread: the SGD steps must run in the reader's order to be
  // reproducible.
  const BlobRef sse("epoch_sse", name);
  const BlobRef count("epoch_samples", name);
  Task& pipe = Pipe(
      job.epoch_group(), node, reader,
      [&](NetBuilder& body, const Record& batch) {
        if (o.nodes == 1) {
          body.Op("LinearRegressionSGDStep",
                  {w, b, batch.Field("x"), batch.Field("y"), sse, count, done},
                  {w, b, sse, count}, {MakeArg("lr", o.learning_rate)});
        } else {
          const BlobRef grad("grad", name);
          body.Op("LinearRegressionGradient",
                  {w, b, batch.Field("x"), batch.Field("y"), done}, {grad});
          body.Op("Allreduce", {grad}, {grad});
          body.Op("LinearRegressionApply", {w, b, grad, sse, count},
                  {w, b, sse, count}, {MakeArg("lr", o.learning_rate)});
        }
        CountRecords(body, batch);
        AddRecordDelay(body, record_delay_ms);
      },
      /*num_threads=*/1, "sgd");
  AddRecordCounter(pipe);
  pipe.init_net().ConstScalar<double>(sse.name(), 0.0);
  pipe.init_net().ConstScalar<int64_t>(count.name(), 0);
  AddDelay(pipe.init_net(), epoch_delay_ms);
  const BlobRef stop("stop_training", name);
  pipe.exit_net().Op("FinishLinearRegressionEpoch",
                     {sse, count, epoch_count, done, last_loss},
                     {epoch_count, done, last_loss, stop},
                     {MakeArg("max_epochs", o.epochs),
                      MakeArg("loss_threshold", o.loss_threshold)});
  // Every node decides alike (the sums are global): node 0's flag serves.
  if (shard == 0) {
    job.AddStopCondition(pipe.AddOutput(stop));
  } else {
    pipe.AddOutput(stop);
  }
}

void BuildJob(Job& job, const Options& o, int64_t epoch_delay_ms,
              int64_t record_delay_ms) {
  for (int shard = 0; shard < o.nodes; ++shard) {
    BuildTrainer(job, o, shard, epoch_delay_ms, record_delay_ms);
  }
  const Node node(kNode);
  const BlobRef w("W", kNode);
  const BlobRef b("b", kNode);
  Task& download = job.download_group().NewTask(node);
  const BlobRef final_w = download.net().Copy(w, BlobRef("final_W", kNode));
  const BlobRef final_b = download.net().Copy(b, BlobRef("final_b", kNode));
  download.AddOutputs({final_w, final_b});

  if (!o.model_out.empty()) {
    Task& save = job.exit_group().NewTask(node, {.name = "save_model"});
    save.net().Op(
        "Save", {final_w, final_b}, {},
        {MakeArg("db", o.model_out), MakeArg("db_type", kDefaultDbType),
         MakeArg("blob_name_overrides", std::vector<std::string>{"W", "b"}),
         MakeArg("node", std::string(kNode))});
  }
}

absl::StatusOr<std::vector<float>> FetchFloats(const Session& session,
                                               const std::string& blob) {
  JG_ASSIGN_OR_RETURN(Tensor t, session.FetchBlob(kNode, blob));
  if (t.dtype() != FLOAT) {
    return absl::InternalError(
        absl::StrCat("blob '", blob, "' is not a float tensor"));
  }
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

std::string Floats(const std::vector<float>& values) {
  return absl::StrJoin(values, ",", [](std::string* out, float v) {
    absl::StrAppend(out, absl::StrFormat("%.9g", v));
  });
}

std::string Bits(const std::vector<float>& values) {
  return absl::StrJoin(values, ",", [](std::string* out, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    absl::StrAppend(out, absl::StrFormat("%08x", bits));
  });
}

absl::StatusOr<double> LastLoss(const Session& session) {
  JG_ASSIGN_OR_RETURN(Tensor t, session.FetchBlob(kNode, "last_loss"));
  return t.scalar<double>();
}

int Main(int argc, char** argv) {
  InitExample(
      argc, argv,
      "Minibatch SGD for linear regression on seeded synthetic data, "
      "with checkpoints and bit-exact resume.\n"
      "  linear_regression [--nodes=N] [--num_samples=N] [--num_features=N] "
      "[--batch_size=N] [--learning_rate=F]\n"
      "                    [--epochs=N] [--loss_threshold=F] "
      "[--noise=F] [--seed=N] [--model_out=DB]\n" +
          CommonFlagsUsage(20));
  absl::StatusOr<CommonOptions> common = ReadCommonFlags();
  if (!common.ok()) return UsageError(common.status());
  absl::StatusOr<Options> options = ReadFlags();
  if (!options.ok()) return UsageError(options.status());

  Job job;
  BuildJob(job, *options, common->epoch_delay_ms, common->record_delay_ms);
  if (std::optional<int> exit = HandlePlanFlags(job, *common)) return *exit;

  absl::StatusOr<std::unique_ptr<Session>> made = MakeSession(job, *common);
  if (!made.ok()) return UsageError(made.status());
  Session& session = **made;
  EpochLogOptions log;
  for (int shard = 0; shard < options->nodes; ++shard) {
    log.record_nodes.push_back(absl::StrCat("trainer_", shard));
  }
  log.extra = [](const Session& s) {
    absl::StatusOr<double> loss = LastLoss(s);
    return loss.ok() ? absl::StrFormat("loss=%.6g", *loss) : std::string();
  };
  absl::StatusOr<int64_t> epochs = RunJob(job, *common, session, log);
  if (!epochs.ok()) return RunError(epochs.status());

  absl::StatusOr<std::vector<float>> w = FetchFloats(session, "final_W");
  if (!w.ok()) return RunError(w.status());
  absl::StatusOr<std::vector<float>> b = FetchFloats(session, "final_b");
  if (!b.ok()) return RunError(b.status());
  absl::StatusOr<double> loss = LastLoss(session);
  if (!loss.ok()) return RunError(loss.status());
  absl::StatusOr<std::vector<float>> true_w = FetchFloats(session, "true_W");
  absl::StatusOr<std::vector<float>> true_b = FetchFloats(session, "true_b");
  if (true_w.ok() && true_b.ok()) {
    LOG(INFO) << "true parameters: W=" << Floats(*true_w)
              << " b=" << Floats(*true_b);
  }
  if (!options->model_out.empty()) {
    LOG(INFO) << "saved W and b to " << options->model_out;
  }
  if (!PrintsResults(session)) return 0;
  std::printf("bits: W=%s b=%s\n", Bits(*w).c_str(), Bits(*b).c_str());
  std::printf("result: epochs=%lld W=%s b=%s loss=%s\n",
              static_cast<long long>(*epochs), Floats(*w).c_str(),
              Floats(*b).c_str(), absl::StrFormat("%.9g", *loss).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace examples
}  // namespace jobgraph

int main(int argc, char** argv) { return jobgraph::examples::Main(argc, argv); }

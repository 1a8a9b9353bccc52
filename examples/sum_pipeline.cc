// sum_pipeline: Caffe2's checkpoint_test pipeline as a program. Every node
// (trainer_0 .. trainer_<n-1>) holds the values 0..num_records-1 and a total
// that starts at --initial_total; each epoch adds the next
// --records_per_epoch values to the total, and the job stops after the epoch
// in which the reader ran out of data.
//
// Usage:
//   bazel run //examples:sum_pipeline
//     ... result: epochs=4 totals=145
//   bazel run //examples:sum_pipeline -- --checkpoint_dir=/tmp/sum
//   bazel run //examples:sum_pipeline -- --checkpoint_dir=/tmp/sum
//       --resume_from_epoch=2     (one command line)
//     ... result: epochs=4 totals=145     (resuming from 4 gives epochs=5)
//   bazel run //examples:sum_pipeline -- --nodes=3 --dump_plan
//
// Flags: --nodes, --num_records, --records_per_epoch, --initial_total, and
// the common ones (examples/example_util.h): --checkpoint_dir,
// --resume_from_epoch, --keep_last, --metrics_out, --async_checkpoint,
// --dump_plan, --plan_dot, --epoch_delay_ms, --record_delay_ms,
// --preempt_signals, --preempt_exit_code, --session.
//
// The last line on stdout is
//   result: epochs=<last epoch> totals=<total of trainer_0>,<trainer_1>,...
// One line per epoch goes to stderr. Exit status: 0 on success, 2 for bad
// flags, 1 when the job fails.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/job.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "examples/example_util.h"

ABSL_FLAG(int, nodes, 1,
          "Number of nodes, trainer_0 .. trainer_<n-1>, each running the "
          "pipeline on its own data. More than one is checkpointed with a "
          "MultiNodeCheckpointManager.");
ABSL_FLAG(int64_t, num_records, 10,
          "Every node reads the values 0 .. num_records-1.");
ABSL_FLAG(int64_t, records_per_epoch, 3,
          "Values read per epoch on each node (ReaderWithLimit's limit).");
ABSL_FLAG(int64_t, initial_total, 100, "The total each node starts from.");

namespace jobgraph {
namespace examples {
namespace {

struct Options {
  int nodes = 1;
  int64_t num_records = 10;
  int64_t records_per_epoch = 3;
  int64_t initial_total = 100;
};

absl::StatusOr<Options> ReadFlags() {
  Options options;
  options.nodes = absl::GetFlag(FLAGS_nodes);
  JG_RETURN_IF_ERROR(CheckFlagRange("nodes", options.nodes, 1, 1000));
  options.num_records = absl::GetFlag(FLAGS_num_records);
  JG_RETURN_IF_ERROR(CheckFlagRange("num_records", options.num_records, 0));
  options.records_per_epoch = absl::GetFlag(FLAGS_records_per_epoch);
  // A limit of 0 reads nothing, so the data would never run out and the job
  // would never stop.
  JG_RETURN_IF_ERROR(
      CheckFlagRange("records_per_epoch", options.records_per_epoch, 1));
  options.initial_total = absl::GetFlag(FLAGS_initial_total);
  return options;
}

std::string NodeName(int id) { return absl::StrCat("trainer_", id); }

// trainer_<id>'s part of the pipeline, as in tests/checkpoint_test.cc: the
// data, its reader's cursor and the total are made by the init group (GLOBAL)
// so they live in the node's root workspace and are checkpointed.
void BuildPipeline(Job& job, int id, const Options& options,
                   int64_t epoch_delay_ms, int64_t record_delay_ms) {
  Node node(NodeName(id));
  Task& init = job.init_group().NewTask(node);
  Record data = ConstRecord(
      init.net(), {{"val", Tensor::Iota<int64_t>(options.num_records)}});
  Reader reader =
      Dataset(data, absl::StrCat("dataset:", id)).NewReader(init.net());
  BlobRef total = init.net().Const<int64_t>("total", {options.initial_total});
  ReaderWithLimit limited(reader, options.records_per_epoch);
  Task& pipe =
      Pipe(job.epoch_group(), node, limited,
           [total, record_delay_ms](NetBuilder& net, const Record& row) {
             net.Add(total, row.Field("val"), total);
             CountRecords(net, row);
             AddRecordDelay(net, record_delay_ms);
           });
  AddRecordCounter(pipe);
  AddDelay(pipe.init_net(), epoch_delay_ms);
  job.AddStopCondition(limited.data_finished());
}

int Main(int argc, char** argv) {
  InitExample(argc, argv,
              "Caffe2's checkpoint_test pipeline: sums values read a few per "
              "epoch, with checkpoints and resume.\n"
              "  sum_pipeline [--nodes=N] [--num_records=N] "
              "[--records_per_epoch=N] [--initial_total=N]\n" +
                  CommonFlagsUsage(15));
  absl::StatusOr<CommonOptions> common = ReadCommonFlags();
  if (!common.ok()) return UsageError(common.status());
  absl::StatusOr<Options> options = ReadFlags();
  if (!options.ok()) return UsageError(options.status());

  Job job;
  std::vector<std::string> nodes;
  for (int id = 0; id < options->nodes; ++id) {
    BuildPipeline(job, id, *options, common->epoch_delay_ms,
                  common->record_delay_ms);
    nodes.push_back(NodeName(id));
  }
  if (std::optional<int> exit = HandlePlanFlags(job, *common)) return *exit;

  absl::StatusOr<std::unique_ptr<Session>> made = MakeSession(job, *common);
  if (!made.ok()) return UsageError(made.status());
  Session& session = **made;
  absl::StatusOr<int64_t> epochs =
      RunJob(job, *common, session, {.record_nodes = nodes});
  if (!epochs.ok()) return RunError(epochs.status());

  std::vector<int64_t> totals;
  for (const std::string& node : nodes) {
    absl::StatusOr<Tensor> total = session.FetchBlob(node, "total");
    if (!total.ok()) return RunError(total.status());
    totals.push_back(total->data<int64_t>()[0]);
  }
  if (PrintsResults(session)) {
    std::printf("result: epochs=%lld totals=%s\n",
                static_cast<long long>(*epochs),
                absl::StrJoin(totals, ",").c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace examples
}  // namespace jobgraph

int main(int argc, char** argv) { return jobgraph::examples::Main(argc, argv); }

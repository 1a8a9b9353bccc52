// text_stats: a batch job that counts the words of a text file with a pipe
// of several threads, --lines_per_epoch lines per epoch, checkpointing the
// file position and the partial counts after every epoch. The counts live in
// a WordCounts blob (examples/word_counts.h) in the node's root workspace,
// checkpointed through its own serializer; the reading position is the text
// reader's cursor. The job stops after the epoch in which the file ran out.
// Counting is commutative, so any number of threads, and any kill and
// resume, give exactly the same output.
//
// Usage:
//   seq 1 5000 | sed 's/.*/line & of the test, the end/' > /tmp/words.txt
//   bazel run //examples:text_stats -- --input=/tmp/words.txt
//   bazel run //examples:text_stats -- --input=/tmp/words.txt
//       --checkpoint_dir=/tmp/ts --lines_per_epoch=500     (one command line)
//   bazel run //examples:text_stats -- --input=/tmp/words.txt
//       --checkpoint_dir=/tmp/ts --lines_per_epoch=500 --resume_from_epoch=3
//
// On resume the file is the one recorded in the checkpoint (the reader's
// cursor holds its path and byte offset); if the file changed so that the
// offset is no longer at the start of a line, the job fails with DataLoss.
//
// Flags: --input (required), --threads, --lines_per_epoch, --batch_size
// (lines per read, a divisor of --lines_per_epoch; default: the largest one
// up to 256 that gives each thread a read per epoch), --top_k, and the
// common ones (examples/example_util.h). --record_delay_ms sleeps once per
// read (batch).
//
// stdout: the --top_k most frequent words as "<count> <word>" lines, by count
// descending then word ascending, then
//   result: lines=<lines read> words=<total words> distinct=<distinct words>
// Exit status: 0, 2 for bad flags, 1 on failure.

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/job.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "engine/data/text_file.h"
#include "engine/session.h"
#include "engine/status_macros.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "examples/example_util.h"

ABSL_FLAG(std::string, input, "",
          "The text file to read (required). Relative paths resolve like "
          "--checkpoint_dir.");
ABSL_FLAG(int, threads, 2, "Threads reading and counting in the pipe.");
ABSL_FLAG(int64_t, lines_per_epoch, 1000,
          "Lines read per epoch (a checkpoint is taken after each epoch).");
ABSL_FLAG(int64_t, top_k, 10, "How many of the most frequent words to print.");
ABSL_FLAG(int64_t, batch_size, 0,
          "Lines per read; must divide --lines_per_epoch, so that every epoch "
          "reads exactly that many lines. 0: the largest divisor of "
          "--lines_per_epoch up to 256 and to --lines_per_epoch / --threads.");

namespace jobgraph {
namespace examples {
namespace {

constexpr char kNode[] = "worker_0";
constexpr char kCountsBlob[] = "word_counts";

struct Options {
  std::string input;
  int threads = 2;
  int64_t lines_per_epoch = 1000;
  int64_t top_k = 10;
  int64_t batch_size = 1;
};

// Up to this many lines per read: enough that the per-read cost of the
// engine (a net run, the reader's lock, the limit's counter) vanishes
// beside the counting, small enough that threads share the work evenly.
constexpr int64_t kMaxAutoBatch = 256;

// The largest divisor of lines_per_epoch up to kMaxAutoBatch that still
// gives every thread a read per epoch.
int64_t AutoBatchSize(int64_t lines_per_epoch, int threads) {
  const int64_t most = std::min(kMaxAutoBatch, lines_per_epoch / threads);
  for (int64_t b = most; b > 1; --b) {
    if (lines_per_epoch % b == 0) return b;
  }
  return 1;
}

absl::StatusOr<Options> ReadFlags() {
  Options o;
  if (absl::GetFlag(FLAGS_input).empty()) {
    return absl::InvalidArgumentError(
        "--input is required: the text file whose words to count");
  }
  JG_ASSIGN_OR_RETURN(o.input,
                      ResolvePath("input", absl::GetFlag(FLAGS_input)));
  struct stat st;
  if (::stat(o.input.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input=", o.input, ": no such file"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input=", o.input, ": not a regular file"));
  }
  o.threads = absl::GetFlag(FLAGS_threads);
  JG_RETURN_IF_ERROR(CheckFlagRange("threads", o.threads, 1, 256));
  o.lines_per_epoch = absl::GetFlag(FLAGS_lines_per_epoch);
  // A limit of 0 reads nothing, so the file would never run out and the job
  // would never stop.
  JG_RETURN_IF_ERROR(CheckFlagRange("lines_per_epoch", o.lines_per_epoch, 1));
  o.top_k = absl::GetFlag(FLAGS_top_k);
  JG_RETURN_IF_ERROR(CheckFlagRange("top_k", o.top_k, 0));
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  JG_RETURN_IF_ERROR(CheckFlagRange("batch_size", batch_size, 0));
  if (batch_size == 0) {
    o.batch_size = AutoBatchSize(o.lines_per_epoch, o.threads);
  } else if (o.lines_per_epoch % batch_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", batch_size,
        " does not divide --lines_per_epoch=", o.lines_per_epoch,
        ": an epoch would not end on a batch; pick a divisor, or 0 for one "
        "picked for you"));
  } else {
    o.batch_size = batch_size;
  }
  return o;
}

void BuildJob(Job& job, const Options& o, int64_t epoch_delay_ms,
              int64_t record_delay_ms) {
  const Node node(kNode);
  Task& init = job.init_group().NewTask(node);
  const BlobRef counts =
      init.net().Op("CreateWordCounts", {}, {BlobRef(kCountsBlob, kNode)})[0];
  // The limit counts reads: batch_size divides lines_per_epoch, so an
  // epoch reads exactly lines_per_epoch lines (fewer only at the end).
  Reader reader =
      TextFile(o.input, "input").NewReader(init.net(), o.batch_size);

  ReaderWithLimit limited(reader, o.lines_per_epoch / o.batch_size);
  Task& pipe = Pipe(
      job.epoch_group(), node, limited,
      [counts, record_delay_ms](NetBuilder& net, const Record& batch) {
        net.Op("CountWords", {batch.Field("line"), counts}, {counts});
        CountRecords(net, batch);
        AddRecordDelay(net, record_delay_ms);
      },
      o.threads, "count");
  AddRecordCounter(pipe);
  AddDelay(pipe.init_net(), epoch_delay_ms);
  job.AddStopCondition(limited.data_finished());

  Task& report = job.exit_group().NewTask(node, {.name = "top_words"});
  report.AddOutputs(
      report.net().Op("TopWords", {counts},
                      {BlobRef("top_words", kNode),
                       BlobRef("top_counts", kNode), BlobRef("totals", kNode)},
                      {MakeArg("k", o.top_k)}));
}

int Main(int argc, char** argv) {
  InitExample(argc, argv,
              "Counts the words of a text file with a multi-threaded pipe, "
              "checkpointing every --lines_per_epoch lines.\n"
              "  text_stats --input=FILE [--threads=N] [--lines_per_epoch=N] "
              "[--batch_size=N] [--top_k=N]\n" +
                  CommonFlagsUsage(13));
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
  absl::StatusOr<int64_t> epochs =
      RunJob(job, *common, session, {.record_nodes = {kNode}});
  if (!epochs.ok()) return RunError(epochs.status());

  absl::StatusOr<Tensor> words = session.FetchBlob(kNode, "top_words");
  if (!words.ok()) return RunError(words.status());
  absl::StatusOr<Tensor> counts = session.FetchBlob(kNode, "top_counts");
  if (!counts.ok()) return RunError(counts.status());
  absl::StatusOr<Tensor> totals = session.FetchBlob(kNode, "totals");
  if (!totals.ok()) return RunError(totals.status());
  if (!PrintsResults(session)) return 0;
  for (int64_t i = 0; i < words->numel(); ++i) {
    std::printf("%lld %s\n", static_cast<long long>(counts->data<int64_t>()[i]),
                words->data<std::string>()[i].c_str());
  }
  const int64_t* t = totals->data<int64_t>();
  std::printf("result: lines=%lld words=%lld distinct=%lld\n",
              static_cast<long long>(t[0]), static_cast<long long>(t[1]),
              static_cast<long long>(t[2]));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace examples
}  // namespace jobgraph

int main(int argc, char** argv) { return jobgraph::examples::Main(argc, argv); }

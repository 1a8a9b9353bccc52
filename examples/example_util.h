// What every example binary shares: the common flags and their checks, path
// resolution for `bazel run`, the checkpointer, --dump_plan, --metrics_out and
// --plan_dot, the per-epoch log line, and two small operators (CountRows,
// SleepMs) that the examples' epoch tasks use.
//
// Common flags (defined in example_util.cc):
//   --checkpoint_dir=DIR       checkpoint into DIR; "" runs without
//                              checkpoints
//   --resume_from_epoch=E      a committed epoch number, or "latest"; "" (the
//                              default) starts from scratch. A ResumeFrom
//                              flag: flag parsing rejects other values
//   --keep_last=N              keep only the newest N committed epochs; 0
//                              keeps all
//   --local_checkpoint_dir=DIR a node-local tier ("%h": the host name): every
//                              checkpoint is committed there first and
//                              flushed to --checkpoint_dir in the background
//   --shared_every=K           with a local tier: flush every K-th epoch (1)
//   --keep_local=N             with a local tier: keep N epochs there (2)
//   --dump_plan                print the job as a text proto and exit
//   --plan_dot=FILE            write the job as a Graphviz graph to FILE,
//                              then run it
//   --metrics_out=FILE         append one JSON line per epoch to FILE
//                              (EpochMetricsFile)
//   --epoch_delay_ms=MS        pause MS ms in each epoch (to interrupt a run
//                              by hand or from a test); results do not change
//   --record_delay_ms=MS       pause MS ms for each record (batch) read, to
//                              interrupt a run mid-epoch; likewise
//   --async_checkpoint         write checkpoints in the background
//   --incremental_checkpoint   write only the tensors that changed since the
//                              last checkpoint, refer to earlier ones for
//                              the rest
//   --full_every=N             with --incremental_checkpoint: a full
//                              checkpoint at least every N epochs (10)
//   --memory_pool_mib=MIB      keep up to MIB MiB of freed large tensor
//                              buffers for reuse (1024; 0: off), see
//                              engine/storage_pool.h
//   --preempt_signals=LIST     signals that preempt the run (default
//                              TERM,USR1,INT; "none"): it saves a checkpoint
//                              to continue from exactly there and exits with
//   --preempt_exit_code=N      (default 75, EX_TEMPFAIL)
//   --session=auto|local|mpi   where the nodes run (MakeSession)
// Relative paths resolve against $BUILD_WORKING_DIRECTORY when it is set:
// `bazel run` starts binaries in their runfiles directory, not where the
// user typed the command.
//
// Typical main():
//   InitExample(argc, argv, "usage...\n" + CommonFlagsUsage(2));
//   absl::StatusOr<CommonOptions> common = ReadCommonFlags();
//   if (!common.ok()) return UsageError(common.status());
//   Job job; ... build ...
//   if (std::optional<int> exit = HandlePlanFlags(job, *common)) return *exit;
//   absl::StatusOr<std::unique_ptr<Session>> session =
//       MakeSession(job, *common);
//   absl::StatusOr<int64_t> epochs = RunJob(job, *common, **session, {...});
//   if (PrintsResults(**session)) std::printf("result: ...");
//
// Everything here runs on the main thread, except the operators, which are
// thread-safe.

#ifndef JOBGRAPH_EXAMPLES_EXAMPLE_UTIL_H_
#define JOBGRAPH_EXAMPLES_EXAMPLE_UTIL_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/job.h"
#include "checkpoint/job_runner.h"
#include "checkpoint/resume_from.h"
#include "engine/data/record.h"
#include "engine/net_builder.h"
#include "engine/session.h"
#include "engine/task.h"

namespace jobgraph {
namespace examples {

// The common flags, checked and with paths resolved.
struct CommonOptions {
  std::string checkpoint_dir;  // absolute, or "" for no checkpoints
  ResumeFrom resume_from;
  std::string metrics_out;  // absolute, or "" for no metrics file
  int keep_last = 0;
  std::string local_checkpoint_dir;  // absolute, or "" for no local tier
  int shared_every = 1;
  int keep_local = 2;
  bool dump_plan = false;
  std::string plan_dot;  // absolute, or ""
  int64_t epoch_delay_ms = 0;
  int64_t record_delay_ms = 0;
  bool async_checkpoint = false;
  bool incremental_checkpoint = false;
  int full_every = 10;
  int64_t memory_pool_mib = 1024;  // applied to StoragePool::Global()
  std::vector<int> preempt_signals;
  int preempt_exit_code = 75;
  std::string session = "auto";  // --session: "auto", "local" or "mpi"
};

// Parses the command line (absl::ParseCommandLine) and sends glog to
// stderr. A flag Abseil rejects (an unknown flag, a value its flag rejects
// such as --resume_from_epoch=soon) ends the program with Abseil's message
// naming the flag and its status, 1; a positional argument with status 2.
void InitExample(int argc, char** argv, absl::string_view usage);

// The common flags for an example's usage message (the synopsis --help
// prints): a few lines of "[--flag=VALUE] ...", each indented by `indent`
// spaces, without a final newline.
std::string CommonFlagsUsage(int indent);

// Reads and checks the common flags. Errors are InvalidArgument and name the
// flag: resuming without --checkpoint_dir, a negative --keep_last or
// --epoch_delay_ms, ...
absl::StatusOr<CommonOptions> ReadCommonFlags();

// OK when min <= value <= max, else InvalidArgument
// "--<flag> must be between <min> and <max>, got <value>" (or
// "must be >= <min>" without a maximum); `note`, if not empty, follows the
// bound in parentheses ("--epochs must be >= 0 (0: no limit), got -1").
absl::Status CheckFlagRange(absl::string_view flag, int64_t value, int64_t min,
                            int64_t max = std::numeric_limits<int64_t>::max(),
                            absl::string_view note = "");

// `path` made absolute: unchanged if already absolute, else joined to
// $BUILD_WORKING_DIRECTORY when set, else to the current directory. "" stays
// "". `flag` names the flag in errors.
absl::StatusOr<std::string> ResolvePath(absl::string_view flag,
                                        absl::string_view path);

// Prints "<program>: <message>" to stderr and returns the exit status for
// bad flags (2).
int UsageError(const absl::Status& status);
// The same for failures at run time; returns 1, or --preempt_exit_code for
// a preempted run (IsPreempted).
int RunError(const absl::Status& status);

// Handles --plan_dot (writes the file) and --dump_plan (prints the plan to
// stdout). Returns the exit status when the program should end now: 0 after
// --dump_plan, 1 when the plan cannot be built or the file written (the error
// is printed). nullopt: go on and run the job.
std::optional<int> HandlePlanFlags(const Job& job,
                                   const CommonOptions& options);

// What the per-epoch log line shows beyond the runner's timings.
struct EpochLogOptions {
  // Nodes whose record counter (kEpochRecordsBlob, made by
  // AddRecordCounter) is summed into "N records"; empty: not shown.
  std::vector<std::string> record_nodes;
  // Extra text for the line (e.g. "loss=0.25"); may be empty.
  std::function<std::string(const Session&)> extra;
};

// The session --session asks for: a LocalSession, or an MpiSession over
// job.nodes() (each rank hosting node i % ranks) when --session=mpi, or
// =auto and the process was started by mpirun or srun. Ranks other than 0
// log only warnings and errors.
absl::StatusOr<std::unique_ptr<Session>> MakeSession(
    const Job& job, const CommonOptions& options);
// Whether this process prints the job's results: true except on MPI ranks
// other than 0 (every rank computes the same results).
bool PrintsResults(const Session& session);

// Runs `job` on `session`, with a Checkpointer when --checkpoint_dir is set,
// and logs one line per epoch to stderr (and to --metrics_out):
//   epoch 3: 12.1 ms, 3 records, checkpoint 4.0 ms 1.2 KiB
// Returns the last epoch.
absl::StatusOr<int64_t> RunJob(const Job& job, const CommonOptions& options,
                               Session& session,
                               const EpochLogOptions& log = {});

// The blob AddRecordCounter maintains.
inline constexpr char kEpochRecordsBlob[] = "epoch_records";

// Counts the rows each epoch reads in `pipe_task` (a task made by Pipe):
// "epoch_records" (int64 scalar) is reset by the task's init net and made a
// task output, so it lives in the node's root workspace where RunJob's log
// line fetches it. Call CountRecords(net, batch) from the pipe's processor;
// it adds CountRows(epoch_records, <first field of batch>) to `net`.
void AddRecordCounter(Task& pipe_task);
void CountRecords(NetBuilder& net, const Record& batch);

// Adds SleepMs (ms = `delay_ms`) to `net` when delay_ms > 0.
void AddDelay(NetBuilder& net, int64_t delay_ms);
// The same for --record_delay_ms in a pipe's processor: it also logs
// "record done (sleeping N ms)" for each record (batch), an event tests
// signal the process on to place a preemption in the middle of an epoch.
void AddRecordDelay(NetBuilder& net, int64_t delay_ms);

}  // namespace examples
}  // namespace jobgraph

#endif  // JOBGRAPH_EXAMPLES_EXAMPLE_UTIL_H_

#include "examples/example_util.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/epoch_metrics.h"
#include "checkpoint/preemption.h"
#include "engine/blob.h"
#include "engine/mpi/mpi_session.h"
#include "engine/operator.h"
#include "engine/status_macros.h"
#include "engine/storage_pool.h"
#include "engine/tensor.h"
#include "examples/plan_dot.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, checkpoint_dir, "",
          "Directory for checkpoints (created on the first save); empty runs "
          "without checkpoints. Relative paths resolve against "
          "$BUILD_WORKING_DIRECTORY when set.");
ABSL_FLAG(jobgraph::ResumeFrom, resume_from_epoch, {},
          "Resume from this committed epoch, or 'latest' (the newest one that "
          "verifies; from scratch if there is none). Empty starts from "
          "scratch. Needs --checkpoint_dir.");
ABSL_FLAG(int, keep_last, 0,
          "Keep only the newest N committed epochs; 0 keeps all.");
ABSL_FLAG(std::string, local_checkpoint_dir, "",
          "A node-local checkpoint directory (a tmpfs such as /dev/shm, or a "
          "local disk; %h is replaced by the host name): every checkpoint is "
          "committed there first, and copied to --checkpoint_dir in the "
          "background; the end of a run and a preemption copy the newest one "
          "before the program exits. Empty: none. Needs --checkpoint_dir.");
ABSL_FLAG(int, shared_every, 1,
          "With --local_checkpoint_dir: copy every K-th epoch to "
          "--checkpoint_dir.");
ABSL_FLAG(int, keep_local, 2,
          "With --local_checkpoint_dir: keep the newest N epochs there (and "
          "the newest one copied to --checkpoint_dir).");
ABSL_FLAG(bool, dump_plan, false,
          "Print the job's plan (a JobDef text proto) to stdout and exit.");
ABSL_FLAG(std::string, plan_dot, "",
          "Write the job as a Graphviz graph to this file before running it. "
          "Relative paths resolve like --checkpoint_dir.");
ABSL_FLAG(std::string, metrics_out, "",
          "Append one JSON object per epoch to this file (epoch, run time, "
          "records, save time and bytes, resumed_from). Relative paths "
          "resolve like --checkpoint_dir.");
ABSL_FLAG(int64_t, epoch_delay_ms, 0,
          "Sleep this many milliseconds in every epoch, so that a run can be "
          "interrupted; does not change the results.");
ABSL_FLAG(int64_t, record_delay_ms, 0,
          "Sleep this many milliseconds for every record (batch) an epoch "
          "reads, so that a run can be interrupted in the middle of an "
          "epoch; does not change the results.");
ABSL_FLAG(std::string, preempt_signals, "TERM,USR1,INT",
          "Signals that preempt the run: it stops at the next point between "
          "two nets, saves a checkpoint to continue from exactly there, and "
          "exits with --preempt_exit_code. 'none' handles no signal.");
ABSL_FLAG(bool, async_checkpoint, false,
          "Write checkpoints in the background: an epoch boundary blocks only "
          "for a snapshot of the blobs (copy-on-write), the next epoch runs "
          "while the checkpoint is written and committed.");
ABSL_FLAG(bool, incremental_checkpoint, false,
          "Write only what changed: each node's checkpoint holds the tensors "
          "written since its last committed one and refers to earlier "
          "checkpoints for the rest (a full one every --full_every epochs).");
ABSL_FLAG(int, full_every, 10,
          "With --incremental_checkpoint: a full checkpoint at least every "
          "this many epochs (1 to 1000), which bounds how many databases a "
          "resume reads.");
ABSL_FLAG(int64_t, memory_pool_mib, 1024,
          "Keep up to this many MiB of freed tensor buffers (1 MiB and "
          "larger) for the next tensors of the same size: copy-on-write "
          "copies, restores and staging then reuse memory the process has "
          "already touched. Buffers no epoch reused go back to the system "
          "after an epoch. 0 turns the pool off.");
ABSL_FLAG(std::string, session, "auto",
          "Where the job's nodes run: 'local' (every node in this process), "
          "'mpi' (spread over the ranks of an Open MPI job: start the program "
          "with mpirun or srun), or 'auto' (mpi when started by mpirun or "
          "srun, local otherwise).");
ABSL_FLAG(int, preempt_exit_code, jobgraph::kPreemptedExitCode,
          "Exit status of a preempted run (75 is EX_TEMPFAIL: try again), "
          "for a batch script that requeues the job.");

namespace jobgraph {
namespace examples {
namespace {

// The program's base name, for error messages.
std::string& ProgramName() {
  static std::string* name = new std::string("example");
  return *name;
}

// --preempt_exit_code, once read.
int& PreemptExitCode() {
  static int code = kPreemptedExitCode;
  return code;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (int64_t{1} << 20)) {
    return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  }
  return absl::StrFormat("%.1f MiB", bytes / (1024.0 * 1024.0));
}

std::string FormatMillis(int64_t micros) {
  return absl::StrFormat("%.1f ms", micros / 1000.0);
}

// CountRows(counter, batch) -> counter: adds the number of rows of `batch`
// (its first dimension; 1 for a scalar) to the int64 scalar `counter`. The
// runtime instances of a pipe share the counter, so updates are serialised
// by one process-wide mutex (a few nanoseconds per batch).
class CountRowsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(2, 2, 1, 1));
    return CheckInPlace(0, 0);
  }

  absl::Status Run() override {
    JG_ASSIGN_OR_RETURN(const Tensor* batch, Input(1));
    const int64_t rows = batch->ndim() == 0 ? 1 : batch->dim(0);
    std::lock_guard<std::mutex> lock(mu_);
    JG_RETURN_IF_ERROR(ScalarInput(0, INT64).status());
    // Output 0 is input 0 (CheckInPlace), now known to be an int64 scalar.
    Output(0)->mutable_data<int64_t>()[0] += rows;
    return absl::OkStatus();
  }

 private:
  static std::mutex mu_;  // std::mutex: visible to TSan
};
std::mutex CountRowsOp::mu_;
JG_REGISTER_OPERATOR(CountRows, CountRowsOp);

// SleepMs(): sleeps `ms` milliseconds (no inputs or outputs). Lets a person
// or a test interrupt an epoch; it touches no blob, so results are the same
// with or without it. With a `log` argument it first logs "<log> (sleeping
// <ms> ms)", an event a test can signal the process on.
class SleepMsOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_ASSIGN_OR_RETURN(ms_, GetNonNegativeArg<int64_t>("ms", 0));
    log_ = GetArg<std::string>("log", "");
    return absl::OkStatus();
  }

  absl::Status Run() override {
    if (!log_.empty()) LOG(INFO) << log_ << " (sleeping " << ms_ << " ms)";
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return absl::OkStatus();
  }

 private:
  int64_t ms_ = 0;
  std::string log_;
};
JG_REGISTER_OPERATOR(SleepMs, SleepMsOp);

// The sum of `blob` over `nodes`, or nullopt if one cannot be fetched.
// Collective: each rank adds up the nodes it hosts, one exchange adds the
// ranks' sums. nullopt if a node lacks the counter.
std::optional<int64_t> SumRecords(const Session& session,
                                  const std::vector<std::string>& nodes,
                                  const std::string& blob) {
  int64_t sum = 0;
  bool complete = true;
  for (const std::string& node : nodes) {
    if (!session.HostsNode(node)) continue;
    absl::StatusOr<Tensor> value = session.FetchHostedBlob(node, blob);
    if (!value.ok() || value->dtype() != INT64 || value->numel() != 1) {
      complete = false;
      continue;
    }
    sum += value->data<int64_t>()[0];
  }
  if (session.num_ranks() > 1) {
    absl::StatusOr<std::vector<std::string>> all =
        session.AllGather(complete ? absl::StrCat(sum) : std::string("?"));
    if (!all.ok()) return std::nullopt;
    sum = 0;
    for (const std::string& part : *all) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(part, &n)) complete = false;
      sum += n;
    }
  }
  if (!complete) return std::nullopt;
  return sum;
}

}  // namespace

std::string CommonFlagsUsage(int indent) {
  const std::string margin(indent, ' ');
  return absl::StrCat(
      margin,
      "[--checkpoint_dir=DIR] [--resume_from_epoch=E|latest] "
      "[--keep_last=N]\n",
      margin,
      "[--local_checkpoint_dir=DIR] [--shared_every=K] [--keep_local=N]\n",
      margin,
      "[--metrics_out=FILE] [--async_checkpoint] [--dump_plan] "
      "[--plan_dot=FILE]\n",
      margin,
      "[--incremental_checkpoint] [--full_every=N] [--memory_pool_mib=MIB]\n",
      margin, "[--epoch_delay_ms=MS] [--record_delay_ms=MS]\n", margin,
      "[--preempt_signals=TERM,USR1,INT] [--preempt_exit_code=75]\n", margin,
      "[--session=auto|local|mpi]");
}

void InitExample(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  // --help lists the example's own flags and the common ones; the engine's
  // libraries define none, and --helpfull shows everything anyway.
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "examples/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  // A command line Abseil rejects (an unknown flag, or a value its flag
  // rejects, such as --resume_from_epoch=soon) ends the program here with
  // Abseil's message naming the flag and its status, 1.
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::string name = argv[0];
  const size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  ProgramName() = name;
  if (positional.size() > 1) {
    std::fprintf(stderr,
                 "%s: unexpected argument '%s' (every option is a --flag; "
                 "see --help)\n",
                 name.c_str(), positional[1]);
    std::exit(2);
  }
  // Examples are run by hand: logs go to the terminal, not to /tmp files.
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
}

absl::StatusOr<std::string> ResolvePath(absl::string_view flag,
                                        absl::string_view path) {
  if (path.empty() || path[0] == '/') return std::string(path);
  // `bazel run` starts the binary in its runfiles tree; the user meant the
  // directory the command was typed in.
  const char* base = std::getenv("BUILD_WORKING_DIRECTORY");
  if (base != nullptr && base[0] != '\0') {
    return (std::filesystem::path(base) / std::string(path)).string();
  }
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path,
                     ": cannot resolve a relative path (getcwd failed); "
                     "give an absolute path"));
  }
  return (std::filesystem::path(cwd) / std::string(path)).string();
}

absl::Status CheckFlagRange(absl::string_view flag, int64_t value, int64_t min,
                            int64_t max, absl::string_view note) {
  if (value >= min && value <= max) return absl::OkStatus();
  std::string bound = max == std::numeric_limits<int64_t>::max()
                          ? absl::StrCat(">= ", min)
                          : absl::StrCat("between ", min, " and ", max);
  if (!note.empty()) absl::StrAppend(&bound, " (", note, ")");
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be ", bound, ", got ", value));
}

absl::StatusOr<CommonOptions> ReadCommonFlags() {
  CommonOptions options;
  JG_ASSIGN_OR_RETURN(
      options.checkpoint_dir,
      ResolvePath("checkpoint_dir", absl::GetFlag(FLAGS_checkpoint_dir)));
  // A bad value never gets here: flag parsing (InitExample) rejects it.
  options.resume_from = absl::GetFlag(FLAGS_resume_from_epoch);
  if (!options.resume_from.from_scratch() && options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resume_from_epoch=", options.resume_from.ToString(),
                     " needs --checkpoint_dir (the directory to resume from)"));
  }
  options.session = absl::GetFlag(FLAGS_session);
  if (options.session != "auto" && options.session != "local" &&
      options.session != "mpi") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--session=", options.session,
        " is not valid: give local, mpi or auto (mpi when started by mpirun "
        "or srun)"));
  }
  options.keep_last = absl::GetFlag(FLAGS_keep_last);
  JG_RETURN_IF_ERROR(CheckFlagRange("keep_last", options.keep_last, 0,
                                    std::numeric_limits<int64_t>::max(),
                                    "0 keeps every epoch"));
  if (options.keep_last > 0 && options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--keep_last needs --checkpoint_dir (there is nothing to keep)");
  }
  JG_ASSIGN_OR_RETURN(options.local_checkpoint_dir,
                      ResolvePath("local_checkpoint_dir",
                                  absl::GetFlag(FLAGS_local_checkpoint_dir)));
  if (!options.local_checkpoint_dir.empty() && options.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError(
        "--local_checkpoint_dir needs --checkpoint_dir (the shared directory "
        "its checkpoints are copied to)");
  }
  options.shared_every = absl::GetFlag(FLAGS_shared_every);
  JG_RETURN_IF_ERROR(CheckFlagRange("shared_every", options.shared_every, 1,
                                    std::numeric_limits<int>::max(), ""));
  options.keep_local = absl::GetFlag(FLAGS_keep_local);
  JG_RETURN_IF_ERROR(CheckFlagRange("keep_local", options.keep_local, 1,
                                    std::numeric_limits<int>::max(), ""));
  options.dump_plan = absl::GetFlag(FLAGS_dump_plan);
  JG_ASSIGN_OR_RETURN(options.plan_dot,
                      ResolvePath("plan_dot", absl::GetFlag(FLAGS_plan_dot)));
  JG_ASSIGN_OR_RETURN(
      options.metrics_out,
      ResolvePath("metrics_out", absl::GetFlag(FLAGS_metrics_out)));
  options.epoch_delay_ms = absl::GetFlag(FLAGS_epoch_delay_ms);
  JG_RETURN_IF_ERROR(
      CheckFlagRange("epoch_delay_ms", options.epoch_delay_ms, 0));
  options.record_delay_ms = absl::GetFlag(FLAGS_record_delay_ms);
  JG_RETURN_IF_ERROR(
      CheckFlagRange("record_delay_ms", options.record_delay_ms, 0));
  absl::StatusOr<std::vector<int>> signals =
      ParseSignalList(absl::GetFlag(FLAGS_preempt_signals));
  if (!signals.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preempt_signals=", absl::GetFlag(FLAGS_preempt_signals),
                     ": ", signals.status().message()));
  }
  options.preempt_signals = *std::move(signals);
  options.async_checkpoint = absl::GetFlag(FLAGS_async_checkpoint);
  options.incremental_checkpoint = absl::GetFlag(FLAGS_incremental_checkpoint);
  options.full_every = absl::GetFlag(FLAGS_full_every);
  JG_RETURN_IF_ERROR(
      CheckFlagRange("full_every", options.full_every, 1, kMaxFullEvery, ""));
  options.memory_pool_mib = absl::GetFlag(FLAGS_memory_pool_mib);
  JG_RETURN_IF_ERROR(CheckFlagRange("memory_pool_mib", options.memory_pool_mib,
                                    0, int64_t{1} << 20,
                                    "0 turns the pool off"));
  StoragePool::Global().set_limit_bytes(
      static_cast<size_t>(options.memory_pool_mib) << 20);
  options.preempt_exit_code = absl::GetFlag(FLAGS_preempt_exit_code);
  JG_RETURN_IF_ERROR(
      CheckFlagRange("preempt_exit_code", options.preempt_exit_code, 0, 255));
  PreemptExitCode() = options.preempt_exit_code;
  return options;
}

int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", ProgramName().c_str(),
               std::string(status.message()).c_str());
  return 2;
}

int RunError(const absl::Status& status) {
  if (IsPreempted(status)) {
    std::fprintf(stderr, "%s: %s; exiting with status %d\n",
                 ProgramName().c_str(), std::string(status.message()).c_str(),
                 PreemptExitCode());
    return PreemptExitCode();
  }
  std::fprintf(stderr, "%s: %s\n", ProgramName().c_str(),
               status.ToString().c_str());
  return 1;
}

std::optional<int> HandlePlanFlags(const Job& job,
                                   const CommonOptions& options) {
  if (options.plan_dot.empty() && !options.dump_plan) return std::nullopt;
  absl::StatusOr<JobDef> def = job.Build();
  if (!def.ok()) {
    return RunError(absl::Status(
        def.status().code(),
        absl::StrCat("cannot build the job's plan: ", def.status().message())));
  }
  if (!options.plan_dot.empty()) {
    std::ofstream out(options.plan_dot, std::ios::trunc);
    out << JobToDot(*def);
    out.close();
    if (!out) {
      return RunError(absl::UnavailableError(
          absl::StrCat("--plan_dot=", options.plan_dot, ": cannot write ",
                       options.plan_dot, ": ", std::strerror(errno))));
    }
    LOG(INFO) << "wrote the job's graph to " << options.plan_dot;
  }
  if (options.dump_plan) {
    std::fputs(job.DebugString().c_str(), stdout);
    std::fflush(stdout);
    return 0;
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Session>> MakeSession(
    const Job& job, const CommonOptions& options) {
  const bool mpi = options.session == "mpi" ||
                   (options.session == "auto" && StartedByMpiLauncher());
  if (!mpi) return std::unique_ptr<Session>(std::make_unique<LocalSession>());
  absl::StatusOr<std::unique_ptr<MpiSession>> session =
      MpiSession::Create(job.nodes());
  if (!session.ok()) {
    return absl::Status(session.status().code(),
                        absl::StrCat("--session=", options.session, ": ",
                                     session.status().message()));
  }
  if ((*session)->rank() != 0) {
    // One rank tells the story; the others speak up only for problems.
    FLAGS_minloglevel = google::GLOG_WARNING;
  }
  return std::unique_ptr<Session>(*std::move(session));
}

bool PrintsResults(const Session& session) { return session.rank() == 0; }

absl::StatusOr<int64_t> RunJob(const Job& job, const CommonOptions& options,
                               Session& session, const EpochLogOptions& log) {
  std::unique_ptr<Checkpointer> checkpointer;
  if (!options.checkpoint_dir.empty()) {
    checkpointer = std::make_unique<Checkpointer>(
        CheckpointOptions{.directory = options.checkpoint_dir,
                          .retention = {.keep_last = options.keep_last},
                          .async = options.async_checkpoint,
                          .incremental = options.incremental_checkpoint,
                          .full_every = options.full_every,
                          .local_directory = options.local_checkpoint_dir,
                          .shared_every = options.shared_every,
                          .keep_local = options.keep_local});
  }
  std::unique_ptr<EpochMetricsFile> metrics;
  if (!options.metrics_out.empty() && PrintsResults(session)) {
    absl::StatusOr<std::unique_ptr<EpochMetricsFile>> opened =
        EpochMetricsFile::Open(options.metrics_out);
    if (!opened.ok()) {
      return absl::Status(
          opened.status().code(),
          absl::StrCat("--metrics_out: ", opened.status().message()));
    }
    metrics = *std::move(opened);
  }
  JobRunnerOptions runner_options;
  runner_options.resume_from = options.resume_from;
  runner_options.preempt_signals = options.preempt_signals;
  const bool checkpointing = checkpointer != nullptr;
  // The records an epoch that continues a preempted one had read before the
  // preemption: its log line tells them apart from those read since.
  std::optional<int64_t> records_before_resume;
  runner_options.on_restore = [&](int64_t epoch, bool continued) {
    if (continued && !log.record_nodes.empty()) {
      records_before_resume =
          SumRecords(session, log.record_nodes, kEpochRecordsBlob);
    }
  };
  runner_options.on_epoch_end = [&session, &log, &metrics, checkpointing,
                                 &records_before_resume](
                                    const EpochStats& stats) {
    // Epoch 0 is the save after the init group; it has no run of its own.
    std::string head = stats.preempted ? "init (preempted)" : "epoch 0 (init)";
    std::vector<std::string> parts;
    std::optional<int64_t> records;
    if (stats.epoch > 0) {
      head = absl::StrCat("epoch ", stats.epoch,
                          stats.preempted   ? " (preempted)"
                          : stats.continued ? " (continued)"
                                            : "");
      parts.push_back(FormatMillis(stats.run_micros));
      if (!log.record_nodes.empty()) {
        records = SumRecords(session, log.record_nodes, kEpochRecordsBlob);
        std::string text =
            records.has_value()
                ? absl::StrCat(*records, *records == 1 ? " record" : " records")
                : std::string("? records");
        if (stats.continued && records.has_value() &&
            records_before_resume.has_value()) {
          absl::StrAppend(&text, " (", *records - *records_before_resume,
                          " since the resume)");
        }
        parts.push_back(std::move(text));
      }
      if (log.extra) {
        std::string extra = log.extra(session);
        if (!extra.empty()) parts.push_back(std::move(extra));
      }
    }
    if (!checkpointing) {
      parts.push_back("no checkpoint");
    } else if (stats.saved && stats.save_in_background) {
      std::string text =
          absl::StrCat("checkpoint ", FormatMillis(stats.save_micros),
                       " (snapshot; written in the background");
      if (stats.save_waited_micros >= 100) {
        absl::StrAppend(&text, ", after waiting ",
                        FormatMillis(stats.save_waited_micros),
                        " for the previous one");
      }
      parts.push_back(text + ")");
    } else if (stats.saved) {
      std::string text = absl::StrCat(
          stats.preempted ? "preemption checkpoint " : "checkpoint ",
          FormatMillis(stats.save_micros), " ",
          FormatBytes(stats.save_bytes - stats.save_referenced_bytes));
      if (stats.save_referenced_bytes > 0) {
        absl::StrAppend(&text, " written, ",
                        FormatBytes(stats.save_referenced_bytes),
                        " by reference");
      }
      parts.push_back(std::move(text));
    } else {
      parts.push_back("checkpoint FAILED (see the error above)");
    }
    LOG(INFO) << head << ": " << absl::StrJoin(parts, ", ");
    if (metrics != nullptr) {
      // Metrics are for people; losing a line must not fail the job.
      absl::Status appended = metrics->Append(stats, records);
      if (!appended.ok()) LOG(ERROR) << appended.message();
    }
  };
  // The preemption signals are ignored outside Train: Train installs its
  // handlers over this and puts it back when it returns, so a signal that
  // comes once the job is done (it has saved its last epoch) neither kills
  // the program nor changes its exit status.
  for (int signal : options.preempt_signals) std::signal(signal, SIG_IGN);
  JobRunner runner(job, checkpointer.get(), runner_options);
  absl::StatusOr<int64_t> epochs = runner.Train(session);
  if (epochs.ok() && runner.stats().save_failures > 0) {
    LOG(WARNING) << runner.stats().save_failures
                 << " checkpoint save(s) failed; the results are complete, "
                    "but a resume may have to start from an older epoch";
  }
  return epochs;
}

void AddRecordCounter(Task& pipe_task) {
  const BlobRef counter(kEpochRecordsBlob, pipe_task.node().name());
  pipe_task.init_net().ConstScalar<int64_t>(kEpochRecordsBlob, 0);
  pipe_task.AddOutput(counter);
}

void CountRecords(NetBuilder& net, const Record& batch) {
  const BlobRef counter(kEpochRecordsBlob, net.node());
  net.Op("CountRows", {counter, batch.field_blobs().front()}, {counter});
}

void AddDelay(NetBuilder& net, int64_t delay_ms) {
  if (delay_ms > 0) net.Op("SleepMs", {}, {}, {MakeArg("ms", delay_ms)});
}

void AddRecordDelay(NetBuilder& net, int64_t delay_ms) {
  if (delay_ms > 0) {
    net.Op(
        "SleepMs", {}, {},
        {MakeArg("ms", delay_ms), MakeArg("log", std::string("record done"))});
  }
}

}  // namespace examples
}  // namespace jobgraph

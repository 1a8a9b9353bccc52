// The execution half of RunPlan (see plan_executor.h): runs compiled steps
// (plan_executor_compile.cc builds them), with their loops, threads and
// reporters, and captures and restores the plan position at a stop.

#include "engine/plan_executor.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/net.h"
#include "engine/plan_executor_internal.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

constexpr char kStopPayloadUrl[] = "jobgraph.dev/stop_request";

}  // namespace

namespace plan_executor_internal {

// The continuation test handed down from the ancestors: false once any
// ancestor's concurrent sibling failed.
struct Continuation {
  const std::atomic<bool>* failure = nullptr;
  const Continuation* parent = nullptr;

  bool ShouldContinue() const {
    for (const Continuation* c = this; c != nullptr; c = c->parent) {
      if (c->failure != nullptr && c->failure->load()) return false;
    }
    return true;
  }
};

namespace {

absl::StatusOr<bool> ReadStopBlob(const Blob* blob, const std::string& name) {
  if (blob == nullptr || !blob->IsInitialized()) return false;
  if (blob->IsType<Tensor>()) {
    const Tensor& t = blob->Get<Tensor>();
    if (t.dtype() == BOOL && t.numel() == 1) return t.data<bool>()[0];
  }
  return absl::FailedPreconditionError(
      absl::StrCat("should_stop_blob '", name,
                   "' must hold a bool tensor of one element, "
                   "but holds ",
                   blob->IsType<Tensor>() ? blob->Get<Tensor>().DebugString(4)
                                          : blob->TypeName()));
}

absl::Status PositionMismatch(const ExecutionStep& step,
                              absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the saved plan position does not fit step '", step.name(), "': ", what,
      "; the job's plan changed since the position was saved"));
}

// The initialized blobs local to `ws`, serialized into `out->local_blob`.
absl::Status SaveLocalBlobs(const Workspace& ws, StepPosition* out) {
  for (const std::string& name : ws.LocalBlobNames()) {
    const Blob* blob = ws.GetBlob(name);
    if (blob == nullptr || !blob->IsInitialized()) continue;
    absl::Status saved =
        SerializeBlob(name, *blob, {}, [&](std::string key, std::string value) {
          SerializedPiece* piece = out->add_local_blob();
          piece->set_key(std::move(key));
          piece->set_value(std::move(value));
          return absl::OkStatus();
        });
    if (!saved.ok()) {
      return absl::Status(
          saved.code(),
          absl::StrCat("cannot save the state of workspace '", ws.name(),
                       "' at a stop: ", saved.message()));
    }
  }
  return absl::OkStatus();
}

// Recreates the blobs that SaveLocalBlobs saved, as local blobs of `ws`.
absl::Status RestoreLocalBlobs(const StepPosition& at, Workspace* ws) {
  // Each blob's pieces together bound the tensor its shape may declare.
  absl::flat_hash_map<std::string, int64_t> blob_bytes;
  std::vector<BlobKey> keys;
  keys.reserve(at.local_blob_size());
  for (const SerializedPiece& piece : at.local_blob()) {
    JG_ASSIGN_OR_RETURN(BlobKey key, ParseBlobKey(piece.key()));
    blob_bytes[key.blob_name] += static_cast<int64_t>(piece.value().size());
    keys.push_back(std::move(key));
  }
  BlobAssembler assembler;
  for (int i = 0; i < at.local_blob_size(); ++i) {
    const std::string& name = keys[i].blob_name;
    JG_RETURN_IF_ERROR(assembler.Add(name, at.local_blob(i).value(),
                                     ws->CreateLocalBlob(name),
                                     blob_bytes[name]));
  }
  return assembler.Finish();
}

// Runs each reporter of a step every run_every_ms on its own thread while the
// step's body runs, and once more after it ends (also on failure).
class ReporterThreads {
 public:
  ReporterThreads(const std::vector<std::unique_ptr<StepWrapper>>& reporters,
                  const Continuation* continuation) {
    for (const auto& reporter : reporters) {
      StepWrapper* r = reporter.get();
      threads_.emplace_back([this, r, continuation] {
        const absl::Duration interval =
            absl::Milliseconds(r->step().run_every_ms());
        while (!WaitForDone(interval)) Record(r->Run(continuation));
        Record(r->Run(continuation));
      });
    }
  }

  // Stops the reporters after their final run and returns the first error.
  absl::Status Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

  ~ReporterThreads() { Finish().IgnoreError(); }

 private:
  void Record(absl::Status s) {
    if (s.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = std::move(s);
  }

  // True once the body ended; waits up to `interval` for it.
  bool WaitForDone(absl::Duration interval) {
    std::unique_lock<std::mutex> lock(mu_);
    return done_cv_.wait_for(lock, absl::ToChronoNanoseconds(interval),
                             [this] { return done_; });
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

// Runs one iteration of a nets step from net `*next` on; true when the stop
// blob ended the step. On a stop request `*next` is the net not yet run.
absl::StatusOr<bool> RunNets(PlanRun* run, CompiledStep* c, int* next) {
  for (; *next < static_cast<int>(c->nets.size()); ++*next) {
    Net* net = c->nets[*next];
    if (ABSL_PREDICT_FALSE(run->StopRequested())) {
      return StopRequestStatus(
          absl::StrCat("stopped on request before net '", net->name(), "'"));
    }
    JG_RETURN_IF_ERROR(net->Run());
    if (c->stop_blob != nullptr) {
      JG_ASSIGN_OR_RETURN(
          bool stop, ReadStopBlob(c->stop_blob, c->step->should_stop_blob()));
      if (stop) return true;
    }
  }
  return false;
}

// Runs one iteration of the substeps, from `at` (may be null) on. Returns
// true in `*stop` when the stop blob asked the step to end. On a stop request
// `*out` says which substeps had run and where the others were.
absl::Status RunSubstepIteration(CompiledStep* c, const Continuation* own,
                                 const StepPosition* at, StepPosition* out,
                                 bool* stop) {
  const ExecutionStep& step = *c->step;
  const bool sequential =
      (!step.concurrent_substeps() || step.substep_size() <= 1) &&
      step.num_concurrent_instances() <= 1;
  if (sequential) {
    const int first = at != nullptr ? at->substeps_done() : 0;
    if (first < 0 || first > static_cast<int>(c->recurring.size()) ||
        (at != nullptr && at->substep_size() > 1)) {
      return PositionMismatch(step, "it has other substeps");
    }
    for (int k = first; k < static_cast<int>(c->recurring.size()); ++k) {
      const StepPosition* inner =
          (at != nullptr && k == first && at->substep_size() == 1)
              ? &at->substep(0)
              : nullptr;
      StepPosition inner_out;
      absl::Status s = c->recurring[k]->Run(own, inner, &inner_out);
      if (IsStopRequest(s)) {
        out->set_substeps_done(k);
        *out->add_substep() = std::move(inner_out);
      }
      JG_RETURN_IF_ERROR(s);
      if (c->stop_blob != nullptr) {
        JG_ASSIGN_OR_RETURN(
            *stop, ReadStopBlob(c->stop_blob, step.should_stop_blob()));
        if (*stop) return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }
  if (c->recurring.empty()) return absl::OkStatus();
  const size_t instances = std::max(1, step.num_concurrent_instances());
  const size_t num_threads = c->recurring.size() * instances;
  if (at != nullptr && at->substep_size() != static_cast<int>(num_threads)) {
    return PositionMismatch(
        step, absl::StrCat("it runs ", num_threads, " threads, the position ",
                           at->substep_size()));
  }
  std::mutex mu;
  absl::Status first_error;
  bool stopped = false;
  std::vector<StepPosition> positions(num_threads);
  std::vector<std::thread> threads;
  threads.reserve(num_threads);
  for (size_t k = 0; k < num_threads; ++k) {
    StepWrapper* substep = c->recurring[k % c->recurring.size()].get();
    const StepPosition* inner = at != nullptr ? &at->substep(k) : nullptr;
    if (inner != nullptr && inner->finished()) {
      positions[k].set_name(substep->step().name());
      positions[k].set_finished(true);
      continue;
    }
    threads.emplace_back([&, k, substep, inner] {
      absl::Status s = substep->Run(own, inner, &positions[k]);
      if (s.ok()) {
        positions[k].Clear();
        positions[k].set_name(substep->step().name());
        positions[k].set_finished(true);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (IsStopRequest(s)) {
        stopped = true;
        return;
      }
      if (first_error.ok()) first_error = std::move(s);
      c->got_failure.store(true);
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first_error.ok()) return first_error;
  if (stopped) {
    for (StepPosition& p : positions) *out->add_substep() = std::move(p);
    return StopRequestStatus("stopped on request");
  }
  if (c->stop_blob != nullptr) {
    JG_ASSIGN_OR_RETURN(*stop,
                        ReadStopBlob(c->stop_blob, step.should_stop_blob()));
  }
  return absl::OkStatus();
}

// Runs a compiled step from the start, or from `resume` (may be null). When
// the run stops on request, `*stopped_at` says where it was.
absl::Status RunCompiledStep(PlanRun* run, CompiledStep* c,
                             const Continuation* parent,
                             const StepPosition* resume,
                             StepPosition* stopped_at) {
  const ExecutionStep& step = *c->step;
  // Concurrent children see this step's failure flag, so one failing child
  // stops its siblings at their next iteration boundary.
  Continuation own{&c->got_failure, parent};
  ReporterThreads reporters(c->reporters, &own);

  auto keep_going = [&](int64_t i) {
    if (!parent->ShouldContinue()) return false;
    if (step.should_stop_blob().empty()) {
      return i < (step.has_num_iter() ? step.num_iter() : 1);
    }
    return !step.only_once() || i == 0;
  };

  absl::Status body;
  const int64_t first = resume != nullptr ? resume->iteration() : 0;
  if (first < 0) {
    return PositionMismatch(step, "the position's iteration is negative");
  }
  for (int64_t i = first; body.ok() && keep_going(i); ++i) {
    const StepPosition* at = i == first ? resume : nullptr;
    bool stop = false;
    if (!c->nets.empty() || c->recurring.empty()) {
      int next = at != nullptr ? at->nets_done() : 0;
      if (next < 0 || next > static_cast<int>(c->nets.size())) {
        body = PositionMismatch(step, "it has fewer nets");
        break;
      }
      absl::StatusOr<bool> stopped = RunNets(run, c, &next);
      body = stopped.status();
      stop = stopped.ok() && *stopped;
      if (IsStopRequest(body)) stopped_at->set_nets_done(next);
    } else {
      body = RunSubstepIteration(c, &own, at, stopped_at, &stop);
    }
    if (IsStopRequest(body)) {
      stopped_at->set_name(step.name());
      stopped_at->set_iteration(i);
    }
    if (stop) break;
  }
  // Reporters may write the child workspace: they end before it is saved.
  absl::Status reported = reporters.Finish();
  if (IsStopRequest(body) && c->child_ws != nullptr) {
    absl::Status saved = SaveLocalBlobs(*c->child_ws, stopped_at);
    // Still a stop: the position says it cannot be continued, and the
    // caller falls back to an earlier checkpoint.
    if (!saved.ok()) run->NoteCannotSave(saved);
  }
  if (!body.ok()) return body;
  return reported;
}

}  // namespace

absl::Status StepWrapper::Run(const Continuation* parent,
                              const StepPosition* resume,
                              StepPosition* stopped_at) {
  if (resume != nullptr && resume->name() != step_->name()) {
    return PositionMismatch(
        *step_, absl::StrCat("the position is of step '", resume->name(), "'"));
  }
  StepPosition ignored;
  if (stopped_at == nullptr) stopped_at = &ignored;
  if (!step_->create_workspace()) {
    return RunCompiledStep(run_, compiled_.get(), parent, resume, stopped_at);
  }
  JG_ASSIGN_OR_RETURN(std::unique_ptr<CompiledStep> fresh,
                      CompileStep(run_, step_, ws_, cache_));
  if (resume != nullptr) {
    JG_RETURN_IF_ERROR(RestoreLocalBlobs(*resume, fresh->ws));
  }
  return RunCompiledStep(run_, fresh.get(), parent, resume, stopped_at);
}

}  // namespace plan_executor_internal

using plan_executor_internal::Continuation;
using plan_executor_internal::NetCache;
using plan_executor_internal::PlanRun;
using plan_executor_internal::StepWrapper;

absl::Status StopRequestStatus(absl::string_view message) {
  absl::Status status = absl::CancelledError(message);
  status.SetPayload(kStopPayloadUrl, absl::Cord("1"));
  return status;
}

bool IsStopRequest(const absl::Status& status) {
  return absl::IsCancelled(status) &&
         status.GetPayload(kStopPayloadUrl).has_value();
}

absl::Status RunPlan(Workspace* ws, const PlanDef& plan,
                     const RunControl* control) {
  return RunPlan(ws, plan, PlanRunOptions{.control = control});
}

absl::Status RunPlan(Workspace* ws, const PlanDef& plan,
                     const PlanRunOptions& options) {
  PlanRun run;
  run.control = options.control;
  PlanRun reporters_run;
  run.for_reporters = &reporters_run;
  reporters_run.for_reporters = &reporters_run;
  for (const NetDef& net : plan.network()) {
    if (!run.net_defs.emplace(net.name(), &net).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan '", plan.name(), "' defines net '", net.name(), "' twice"));
    }
  }
  reporters_run.net_defs = run.net_defs;
  const PlanPosition* resume = options.resume_from;
  int first = 0;
  if (resume != nullptr) {
    if (resume->plan() != plan.name()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the saved plan position is of plan '", resume->plan(),
                       "', not of '", plan.name(), "'"));
    }
    if (resume->finished()) return absl::OkStatus();
    first = resume->steps_done();
    if (first < 0 || first >= plan.execution_step_size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the saved plan position is at top-level step ", first,
          ", but plan '", plan.name(), "' has ", plan.execution_step_size()));
    }
  }
  NetCache root_cache;
  const Continuation top;
  for (int k = first; k < plan.execution_step_size(); ++k) {
    StepWrapper wrapper(&run, &plan.execution_step(k), ws, &root_cache);
    JG_RETURN_IF_ERROR(wrapper.Prepare());
    StepPosition where;
    absl::Status s = wrapper.Run(
        &top, resume != nullptr && k == first ? &resume->step() : nullptr,
        &where);
    if (IsStopRequest(s) && options.stopped_at != nullptr) {
      options.stopped_at->Clear();
      options.stopped_at->set_plan(plan.name());
      options.stopped_at->set_steps_done(k);
      *options.stopped_at->mutable_step() = std::move(where);
      std::lock_guard<std::mutex> lock(run.mu);
      options.stopped_at->set_cannot_save(run.cannot_save);
    }
    JG_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

#include "checkpoint/preemption.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace jobgraph {
namespace {

constexpr char kPreemptedPayloadUrl[] = "jobgraph.dev/preempted";

// What the handler writes. Lock-free atomics are async-signal-safe.
std::atomic<RunControl*> g_control{nullptr};
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<RunControl*>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void HandlePreemptSignal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);
  RunControl* control = g_control.load();
  if (control != nullptr) control->stop_requested.store(true);
}

struct NamedSignal {
  const char* name;
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"XCPU", SIGXCPU}, {"CONT", SIGCONT},
};

std::string KnownNames() {
  std::vector<std::string> names;
  for (const NamedSignal& s : kSignals) names.push_back(s.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text) {
  std::vector<int> signals;
  const std::string lower =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower.empty() || lower == "none") return signals;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    std::string name = absl::AsciiStrToUpper(entry);
    absl::string_view bare = name;
    absl::ConsumePrefix(&bare, "SIG");
    int number = 0;
    bool found = false;
    for (const NamedSignal& s : kSignals) {
      if (bare == s.name) {
        number = s.number;
        found = true;
      }
    }
    if (!found && absl::SimpleAtoi(entry, &number) && number > 0 &&
        number < NSIG) {
      found = true;
    }
    // SIGKILL and SIGSTOP cannot be caught; after the handler of a fault
    // (SIGSEGV, ...) returns, the faulting instruction runs again, for ever.
    const bool refused = number == SIGKILL || number == SIGSTOP ||
                         number == SIGSEGV || number == SIGBUS ||
                         number == SIGFPE || number == SIGILL ||
                         number == SIGTRAP || number == SIGSYS;
    if (!found || refused) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", entry, "' is not a signal that can be caught; use names (",
          KnownNames(), ") or numbers, separated by commas, or 'none'"));
    }
    signals.push_back(number);
  }
  return signals;
}

std::string SignalName(int signal) {
  for (const NamedSignal& s : kSignals) {
    if (s.number == signal) return absl::StrCat("SIG", s.name);
  }
  return absl::StrCat("signal ", signal);
}

absl::StatusOr<std::unique_ptr<PreemptionSignals>> PreemptionSignals::Install(
    const std::vector<int>& signals, RunControl* control) {
  if (g_installed.exchange(true)) {
    return absl::FailedPreconditionError(
        "preemption signal handlers are already installed in this process "
        "(by another running JobRunner)");
  }
  std::unique_ptr<PreemptionSignals> installed(new PreemptionSignals());
  g_received.store(0);
  g_control.store(control);
  for (int signal : signals) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = HandlePreemptSignal;
    sigemptyset(&action.sa_mask);
    // Blocking calls (sleep, read) resume after the handler returns; the
    // engine notices the request at its next point between nets.
    action.sa_flags = SA_RESTART;
    struct sigaction previous;
    if (sigaction(signal, &action, &previous) != 0) {
      const int error = errno;
      return absl::InternalError(absl::StrCat(
          "cannot handle ", SignalName(signal), ": ", std::strerror(error)));
    }
    installed->previous_.emplace_back(signal, previous);
  }
  return installed;
}

PreemptionSignals::~PreemptionSignals() {
  for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) {
    sigaction(it->first, &it->second, nullptr);
  }
  g_control.store(nullptr);
  g_installed.store(false);
}

int PreemptionSignals::received() const { return g_received.load(); }

absl::Status PreemptedStatus(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kPreemptedPayloadUrl, absl::Cord("1"));
  return status;
}

bool IsPreempted(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         status.GetPayload(kPreemptedPayloadUrl).has_value();
}

}  // namespace jobgraph

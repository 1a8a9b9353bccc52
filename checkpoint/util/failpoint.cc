#include "checkpoint/util/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>  // NOLINT(build/c++11)
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace jobgraph {
namespace failpoint_internal {

// Non-zero until the environment was read: the first evaluation must take
// the slow path to read it.
std::atomic<int> g_state{1};

}  // namespace failpoint_internal

namespace {

// An enabled failpoint.
struct Enabled {
  FailpointAction action = FailpointAction::kCrash;
  // The first evaluation that fires (1-based), and the evaluations so far.
  int64_t first_hit = 1;
  int64_t hits = 0;
  // Which enabling this is: a held thread goes on once its failpoint's entry
  // is gone or is another one (enabled anew).
  uint64_t id = 0;
};

using EnabledMap = std::map<std::string, Enabled, std::less<>>;

// std::mutex and std::call_once rather than Abseil's: Debian's Abseil is not
// built for ThreadSanitizer, which would then miss the ordering they give.
struct Registry {
  std::mutex mu;
  // Guarded by mu.
  EnabledMap enabled;
  // A bad JOBGRAPH_FAILPOINT value, returned by every evaluation. Guarded by
  // mu.
  absl::Status env_error;
  // The threads held, per failpoint name (no entry: none). Guarded by mu.
  std::map<std::string, int, std::less<>> held;
  // Signalled whenever `enabled` or `held` changes: held threads wait for
  // their release, WaitForHold for a thread to be held.
  std::condition_variable changed;
  // The id of the next enabling. Guarded by mu.
  uint64_t next_id = 1;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed
  return *registry;
}

std::once_flag env_once;

// Publishes whether the slow path is needed, and wakes the held threads so
// that those whose failpoint was released go on. Called with the lock held
// after every change of `enabled`, so the flag never disagrees with the map
// for long.
void UpdateState(Registry& registry) {
  const bool active = !registry.enabled.empty() || !registry.env_error.ok();
  failpoint_internal::g_state.store(active ? 1 : 0, std::memory_order_relaxed);
  registry.changed.notify_all();
}

// Gives each entry of `enabled` an id of its own. Called with the lock held.
void AssignIds(Registry& registry, EnabledMap& enabled) {
  for (auto& [name, entry] : enabled) entry.id = registry.next_id++;
}

absl::string_view ActionName(FailpointAction action) {
  switch (action) {
    case FailpointAction::kCrash:
      return "crash";
    case FailpointAction::kError:
      return "error";
    case FailpointAction::kSigterm:
      return "sigterm";
    case FailpointAction::kHold:
      return "hold";
  }
  return "unknown";
}

absl::Status BadFirstHitError(absl::string_view name, absl::string_view n) {
  return absl::InvalidArgumentError(
      absl::StrCat("failpoint '", name, "': bad first hit '", n,
                   "'; expected a whole number from 1"));
}

absl::Status UnknownNameError(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown failpoint '", name,
      "'; known failpoints: ", absl::StrJoin(Failpoints::KnownNames(), ", ")));
}

absl::Status ParseSpec(absl::string_view spec, EnabledMap* out) {
  if (absl::StripAsciiWhitespace(spec).empty()) return absl::OkStatus();
  for (absl::string_view entry : absl::StrSplit(spec, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "failpoint spec '", spec,
          "' has an empty entry; expected "
          "comma-separated <name>[:crash|:error|:sigterm|:hold][@<n>]"));
    }
    // <name>[:<action>][@<n>]
    Enabled enabled;
    absl::string_view first_hit;
    const size_t at = entry.find('@');
    if (at != absl::string_view::npos) {
      first_hit = absl::StripAsciiWhitespace(entry.substr(at + 1));
      entry = entry.substr(0, at);
    }
    absl::string_view name = absl::StripAsciiWhitespace(entry);
    const size_t colon = entry.find(':');
    if (colon != absl::string_view::npos) {
      name = absl::StripAsciiWhitespace(entry.substr(0, colon));
      const absl::string_view action_name =
          absl::StripAsciiWhitespace(entry.substr(colon + 1));
      if (action_name == "crash") {
        enabled.action = FailpointAction::kCrash;
      } else if (action_name == "error") {
        enabled.action = FailpointAction::kError;
      } else if (action_name == "sigterm") {
        enabled.action = FailpointAction::kSigterm;
      } else if (action_name == "hold") {
        enabled.action = FailpointAction::kHold;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "failpoint '", name, "': unknown action '", action_name,
            "'; expected crash, error, sigterm or hold"));
      }
    }
    if (at != absl::string_view::npos &&
        (!absl::SimpleAtoi(first_hit, &enabled.first_hit) ||
         enabled.first_hit < 1)) {
      return BadFirstHitError(name, first_hit);
    }
    if (!Failpoints::IsKnown(name)) return UnknownNameError(name);
    (*out)[std::string(name)] = enabled;
  }
  return absl::OkStatus();
}

// Replaces the whole state with what the environment says now.
absl::Status LoadEnvironment() {
  const char* value = ::getenv(kFailpointEnvVar);
  EnabledMap enabled;
  absl::Status status;
  if (value != nullptr) {
    status = ParseSpec(value, &enabled);
    if (!status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(kFailpointEnvVar, "=", value, ": ", status.message()));
      LOG(ERROR) << status;
      enabled.clear();
    } else if (!enabled.empty()) {
      LOG(WARNING) << "failpoints enabled by " << kFailpointEnvVar << ": "
                   << value;
    }
  }
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  AssignIds(registry, enabled);
  registry.enabled = std::move(enabled);
  registry.env_error = status;
  UpdateState(registry);
  return status;
}

// The environment is read exactly once before the first use of any
// failpoint, so that the API's changes are never overwritten by a late read.
void EnsureEnvironmentRead() {
  std::call_once(env_once, [] { LoadEnvironment().IgnoreError(); });
}

[[noreturn]] void Crash(absl::string_view name) {
  LOG(ERROR) << "failpoint " << name << ": killing the process with SIGKILL";
  google::FlushLogFiles(google::GLOG_INFO);
  ::kill(::getpid(), SIGKILL);
  // SIGKILL to oneself is delivered before kill() returns; never go on.
  for (;;) ::pause();
}

// Holds the calling thread at failpoint `name` (enabled as `id`) until that
// enabling ends. `lock` holds registry.mu, and does again on return.
void Hold(Registry& registry, std::unique_lock<std::mutex>& lock,
          absl::string_view name, uint64_t id) {
  // One write(2) of the whole line: a parent that reads the child's
  // standard error line by line gets it whole, never mixed with a log line
  // of another thread. Best effort: a hold without its line still holds.
  const std::string line = absl::StrCat(kFailpointHoldLinePrefix, name, "\n");
  [[maybe_unused]] const ssize_t written =
      ::write(STDERR_FILENO, line.data(), line.size());
  const std::string key(name);
  ++registry.held[key];
  registry.changed.notify_all();
  registry.changed.wait(lock, [&] {
    auto it = registry.enabled.find(key);
    return it == registry.enabled.end() || it->second.id != id;
  });
  if (--registry.held[key] == 0) registry.held.erase(key);
}

}  // namespace

namespace failpoint_internal {

absl::Status Evaluate(absl::string_view name) {
  EnsureEnvironmentRead();
  FailpointAction action;
  {
    Registry& registry = GetRegistry();
    std::unique_lock<std::mutex> lock(registry.mu);
    if (!registry.env_error.ok()) return registry.env_error;
    auto it = registry.enabled.find(name);
    if (it == registry.enabled.end()) {
      // A misspelt name in code would never fire; catch it where it is
      // evaluated with failpoints on, i.e. in the failpoint tests.
      LOG_IF(DFATAL, !Failpoints::IsKnown(name))
          << "Failpoint(\"" << name << "\") is not in kKnownFailpoints";
      return absl::OkStatus();
    }
    Enabled& enabled = it->second;
    if (++enabled.hits < enabled.first_hit) return absl::OkStatus();
    action = enabled.action;
    if (action == FailpointAction::kHold) {
      Hold(registry, lock, name, enabled.id);
      return absl::OkStatus();
    }
  }
  if (action == FailpointAction::kCrash) Crash(name);
  if (action == FailpointAction::kSigterm) {
    LOG(WARNING) << "failpoint " << name << ": raising SIGTERM";
    raise(SIGTERM);
    return absl::OkStatus();
  }
  LOG(WARNING) << "failpoint " << name << ": returning an error";
  return absl::AbortedError(absl::StrCat("failpoint ", name));
}

}  // namespace failpoint_internal

absl::Status Failpoints::Enable(absl::string_view name, FailpointAction action,
                                int64_t first_hit) {
  if (!IsKnown(name)) return UnknownNameError(name);
  if (first_hit < 1) return BadFirstHitError(name, absl::StrCat(first_hit));
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.enabled[std::string(name)] = {
      .action = action, .first_hit = first_hit, .id = registry.next_id++};
  UpdateState(registry);
  return absl::OkStatus();
}

absl::Status Failpoints::Disable(absl::string_view name) {
  if (!IsKnown(name)) return UnknownNameError(name);
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.enabled.find(name);
  if (it != registry.enabled.end()) registry.enabled.erase(it);
  UpdateState(registry);
  return absl::OkStatus();
}

void Failpoints::DisableAll() {
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.enabled.clear();
  registry.env_error = absl::OkStatus();
  UpdateState(registry);
}

bool Failpoints::WaitForHold(absl::string_view name, absl::Duration timeout) {
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::unique_lock<std::mutex> lock(registry.mu);
  return registry.changed.wait_for(
      lock, absl::ToChronoNanoseconds(timeout),
      [&] { return registry.held.find(name) != registry.held.end(); });
}

absl::Status Failpoints::EnableFromSpec(absl::string_view spec) {
  EnabledMap parsed;
  if (absl::Status status = ParseSpec(spec, &parsed); !status.ok()) {
    return status;
  }
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  AssignIds(registry, parsed);
  for (auto& [name, enabled] : parsed) registry.enabled[name] = enabled;
  UpdateState(registry);
  return absl::OkStatus();
}

absl::Status Failpoints::ReloadFromEnvironment() {
  // Consumes the implicit first read, which must not run after this one.
  std::call_once(env_once, [] {});
  return LoadEnvironment();
}

std::string Failpoints::EnabledSpec() {
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return absl::StrJoin(
      registry.enabled, ",", [](std::string* out, const auto& entry) {
        const Enabled& enabled = entry.second;
        absl::StrAppend(out, entry.first, ":", ActionName(enabled.action));
        if (enabled.first_hit != 1) {
          absl::StrAppend(out, "@", enabled.first_hit);
        }
      });
}

std::vector<std::string> Failpoints::KnownNames() {
  std::vector<std::string> names;
  for (const FailpointInfo& info : kKnownFailpoints) {
    names.emplace_back(info.name);
  }
  return names;
}

bool Failpoints::IsKnown(absl::string_view name) {
  for (const FailpointInfo& info : kKnownFailpoints) {
    if (info.name == name) return true;
  }
  return false;
}

}  // namespace jobgraph

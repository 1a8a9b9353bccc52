#include "checkpoint/util/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace jobgraph {
namespace failpoint_internal {

// Non-zero until the environment was read: the first evaluation must take
// the slow path to read it.
std::atomic<int> g_state{1};

}  // namespace failpoint_internal

namespace {

using EnabledMap = std::map<std::string, FailpointAction, std::less<>>;

// std::mutex and std::call_once rather than Abseil's: Debian's Abseil is not
// built for ThreadSanitizer, which would then miss the ordering they give.
struct Registry {
  std::mutex mu;
  // Guarded by mu.
  EnabledMap enabled;
  // A bad JOBGRAPH_FAILPOINT value, returned by every evaluation. Guarded by
  // mu.
  absl::Status env_error;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed
  return *registry;
}

std::once_flag env_once;

// Publishes whether the slow path is needed. Called with the lock held, so
// the flag never disagrees with the map for long.
void UpdateState(const Registry& registry) {
  const bool active = !registry.enabled.empty() || !registry.env_error.ok();
  failpoint_internal::g_state.store(active ? 1 : 0, std::memory_order_relaxed);
}

absl::string_view ActionName(FailpointAction action) {
  switch (action) {
    case FailpointAction::kCrash:
      return "crash";
    case FailpointAction::kError:
      return "error";
    case FailpointAction::kSigterm:
      return "sigterm";
  }
  return "unknown";
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
      return absl::InvalidArgumentError(
          absl::StrCat("failpoint spec '", spec,
                       "' has an empty entry; expected "
                       "comma-separated <name>[:crash|:error|:sigterm]"));
    }
    absl::string_view name = entry;
    FailpointAction action = FailpointAction::kCrash;
    const size_t colon = entry.find(':');
    if (colon != absl::string_view::npos) {
      name = absl::StripAsciiWhitespace(entry.substr(0, colon));
      const absl::string_view action_name =
          absl::StripAsciiWhitespace(entry.substr(colon + 1));
      if (action_name == "crash") {
        action = FailpointAction::kCrash;
      } else if (action_name == "error") {
        action = FailpointAction::kError;
      } else if (action_name == "sigterm") {
        action = FailpointAction::kSigterm;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("failpoint '", name, "': unknown action '",
                         action_name, "'; expected crash, error or sigterm"));
      }
    }
    if (!Failpoints::IsKnown(name)) return UnknownNameError(name);
    (*out)[std::string(name)] = action;
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

}  // namespace

namespace failpoint_internal {

absl::Status Evaluate(absl::string_view name) {
  EnsureEnvironmentRead();
  FailpointAction action;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    if (!registry.env_error.ok()) return registry.env_error;
    auto it = registry.enabled.find(name);
    if (it == registry.enabled.end()) {
      // A misspelt name in code would never fire; catch it where it is
      // evaluated with failpoints on, i.e. in the failpoint tests.
      LOG_IF(DFATAL, !Failpoints::IsKnown(name))
          << "Failpoint(\"" << name << "\") is not in kKnownFailpoints";
      return absl::OkStatus();
    }
    action = it->second;
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

absl::Status Failpoints::Enable(absl::string_view name,
                                FailpointAction action) {
  if (!IsKnown(name)) return UnknownNameError(name);
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.enabled[std::string(name)] = action;
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

absl::Status Failpoints::EnableFromSpec(absl::string_view spec) {
  EnabledMap parsed;
  if (absl::Status status = ParseSpec(spec, &parsed); !status.ok()) {
    return status;
  }
  EnsureEnvironmentRead();
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  for (auto& [name, action] : parsed) registry.enabled[name] = action;
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
        absl::StrAppend(out, entry.first, ":", ActionName(entry.second));
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

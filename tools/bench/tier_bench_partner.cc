// tier_bench, part 2b: the restore of a node whose host lost its local tier,
// its database fetched over MPI from the partner host's tier, against the
// same job's restore from the shared directory with a cold page cache (see
// the comment that opens tier_bench.cc), and the floor of the first: the
// same bytes read from the partner's tier and moved over MPI, no more (a
// raw move), which says whether the goal can be met on this machine at
// all. This side starts the two ranks (tier_bench_partner_worker.cc) under
// mpirun and prints their figures.

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/tier_bench.h"

namespace jobgraph {
namespace bench {
namespace {

constexpr char kMpirun[] = "/usr/bin/mpirun";

std::string ShellQuote(absl::string_view s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The lines of the file at `path` that say something (not blank, not
// Open MPI's rules of dashes): the first `n` of them, or the last `n`.
std::vector<std::string> SomeLines(const std::string& path, int n, bool last) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.find_first_not_of('-') == text.npos) continue;
    if (!last && static_cast<int>(lines.size()) == n) break;
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  if (lines.empty()) lines.push_back("(nothing)");
  return {lines.begin(), lines.end()};
}

// The key=value words of a worker's line.
std::map<std::string, std::string> Fields(absl::string_view text) {
  std::map<std::string, std::string> fields;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq == absl::string_view::npos) continue;
    fields[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
  }
  return fields;
}

absl::StatusOr<double> Number(const std::map<std::string, std::string>& fields,
                              const std::string& key) {
  auto it = fields.find(key);
  double value = 0;
  if (it == fields.end() || !absl::SimpleAtod(it->second, &value)) {
    return absl::InternalError(
        absl::StrCat("part 2b: a worker's line has no number ", key));
  }
  return value;
}

absl::StatusOr<std::string> SelfPath() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ErrnoStatus("readlink", "/proc/self/exe");
  return std::string(self, n);
}

}  // namespace

void TierBench::PartnerNotAvailable(const std::string& reason,
                                    const std::vector<std::string>& details) {
  partner_ratio_ = "n/a";
  std::printf("  partner_restore_vs_shared = n/a: %s\n", reason.c_str());
  for (const std::string& line : details) {
    std::printf("    | %s\n", line.c_str());
  }
  std::fflush(stdout);
}

absl::Status TierBench::PartnerRestores() {
  const std::string tiers = JoinPath(partner_local_, "tier-%h");
  std::printf(
      "\n2b. PARTNER RESTORE: `mpirun -np 2` of this binary, the ranks "
      "standing for hosts %s (rank 0, node %s: the state) and %s (rank 1, "
      "node %s: 4 KiB); local tiers %s, shared directory %s. Epoch %lld "
      "saved once (each host's tier then holds both nodes' databases), then "
      "%s's tier wiped. Per run, after sync + %d ms and the shared directory "
      "evicted from the page cache: Start(latest) + Restore in fresh "
      "sessions and Checkpointers, into fresh memory, timed on rank 0: %s's "
      "database fetched from %s's tier over MPI, and from the shared "
      "directory with both tiers moved aside; then, after sync + %d ms, "
      "the floor: a raw move of the database's files, read by rank 1 from "
      "%s's tier into one string and sent to rank 0 with AllToAll (no "
      "checks, no install, no load)\n",
      kHostA, kNode, kHostB, kPartnerNode, tiers.c_str(),
      partner_shared_.c_str(), static_cast<long long>(kPartnerEpoch), kHostA,
      c_.settle_ms, kNode, kHostB, c_.settle_ms, kHostB);
  std::fflush(stdout);
  if (::access(kMpirun, X_OK) != 0) {
    PartnerNotAvailable(absl::StrCat(kMpirun, ": ", std::strerror(errno),
                                     " (Open MPI's mpirun runs this part)"),
                        {});
    return absl::OkStatus();
  }
  JG_ASSIGN_OR_RETURN(const std::string self, SelfPath());
  JG_RETURN_IF_ERROR(CreateDir(partner_local_));
  // Open MPI's session directory and shared-memory files, in a directory
  // of the bench's own: two jobs on one machine must not meet in /tmp or
  // /dev/shm (tests/subprocess.h OpenMpiTempEnv). The session directory
  // holds unix sockets, whose paths must stay under 108 bytes: a long
  // --local_dir gets a short directory in /tmp instead.
  std::string ompi_dir = JoinPath(partner_local_, "ompi");
  std::string ompi_in_tmp;
  if (ompi_dir.size() > 48) {
    char name[] = "/tmp/tier_bench_ompi.XXXXXX";
    if (::mkdtemp(name) == nullptr) return ErrnoStatus("mkdtemp", name);
    ompi_dir = ompi_in_tmp = name;
  } else {
    JG_RETURN_IF_ERROR(CreateDir(ompi_dir));
  }
  const std::string log = JoinPath(partner_local_, "mpirun.log");
  // A hang ends the job rather than the bench waiting for ever: far more
  // than a run takes (seconds at the defaults), whatever the state size.
  const int timeout_s = 600 + (c_.runs + 2) * c_.state_mib() / 4;
  // The ranks stand for hosts of their own: --bind-to none leaves each
  // rank every core (mpirun would bind each of 2 ranks to one core), and
  // yield_when_idle makes a rank that waits in a collective give way to
  // the other's work instead of spinning on a core its host would not
  // share.
  const std::string command = absl::StrCat(
      "env TMPDIR=", ShellQuote(ompi_dir),
      " OMPI_MCA_orte_tmpdir_base=", ShellQuote(ompi_dir),
      " OMPI_MCA_btl_vader_backing_directory=", ShellQuote(ompi_dir),
      " OMPI_MCA_mpi_yield_when_idle=1 ", kMpirun,
      " --allow-run-as-root --oversubscribe --bind-to none --timeout ",
      timeout_s, " -np 2 ", ShellQuote(self),
      " --partner_worker --partner_shared=", ShellQuote(partner_shared_),
      " --partner_local=", ShellQuote(tiers), " --state_mib=", c_.state_mib(),
      " --blobs=", c_.blobs, " --runs=", c_.runs, " --settle_ms=", c_.settle_ms,
      " </dev/null 2>", ShellQuote(log));

  absl::Status status;
  bool started = false;
  std::string worker_error, eviction_text;
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return ErrnoStatus("popen", kMpirun);
  char* buffer = nullptr;
  size_t capacity = 0;
  ssize_t length;
  while ((length = ::getline(&buffer, &capacity, out)) > 0) {
    absl::string_view line(buffer, length);
    absl::ConsumeSuffix(&line, "\n");
    if (!absl::ConsumePrefix(&line, kWorkerLine)) {
      std::printf("  (mpirun) %s\n", std::string(line).c_str());
      continue;
    }
    if (absl::ConsumePrefix(&line, "started ")) {
      started = true;
    } else if (absl::ConsumePrefix(&line, "error ")) {
      if (worker_error.empty()) worker_error = std::string(line);
    } else if (absl::ConsumePrefix(&line, "eviction ")) {
      eviction_text = std::string(line);
    } else if (absl::ConsumePrefix(&line, "saved ") && status.ok()) {
      const auto fields = Fields(line);
      absl::StatusOr<double> save_s = Number(fields, "save_s");
      absl::StatusOr<double> tier_a = Number(fields, "tier_a");
      absl::StatusOr<double> tier_b = Number(fields, "tier_b");
      absl::StatusOr<double> shared = Number(fields, "shared");
      for (const absl::Status& s : {save_s.status(), tier_a.status(),
                                    tier_b.status(), shared.status()}) {
        status.Update(s);
      }
      if (!status.ok()) continue;
      std::printf(
          "  the save (SaveEpoch: write, copy to the partner, flush) %.1f "
          "ms; then %s's tier %.1f MB, %s's %.1f MB, the shared dir %.1f MB\n",
          *save_s * 1000, kHostA, *tier_a / 1e6, kHostB, *tier_b / 1e6,
          *shared / 1e6);
    } else if (absl::ConsumePrefix(&line, "run ") && status.ok()) {
      const auto fields = Fields(line);
      std::map<std::string, double> v;
      for (const char* key :
           {"run", "partner_s", "shared_s", "partner_local", "partner_fetched",
            "partner_shared", "shared_local", "shared_fetched", "shared_shared",
            "raw_move_s", "raw_move_bytes"}) {
        absl::StatusOr<double> value = Number(fields, key);
        status.Update(value.status());
        if (value.ok()) v[key] = *value;
      }
      const auto first = fields.find("first");
      if (status.ok() && first == fields.end()) {
        status = absl::InternalError("part 2b: a run line has no first=");
      }
      if (!status.ok()) continue;
      const double ratio = v["partner_s"] / v["shared_s"];
      s_["partner restore"].Add(v["partner_s"]);
      s_["partner shared cold"].Add(v["shared_s"]);
      s_["partner ratio"].Add(ratio);
      s_["partner fetched"].Add(v["partner_fetched"]);
      s_["partner local"].Add(v["partner_local"]);
      s_["partner shared"].Add(v["partner_shared"]);
      s_["partner shared only"].Add(v["shared_shared"]);
      s_["partner raw move"].Add(v["raw_move_s"]);
      s_["partner raw move bytes"].Add(v["raw_move_bytes"]);
      std::printf(
          "  run %d (%s first): partner %.1f ms, shared cold %.1f ms (%.3f); "
          "fetched over MPI %.1f MB, local %.1f kB; shared restore read %.1f "
          "MB from the shared dir; raw move %.1f ms (%.1f MB)\n",
          static_cast<int>(v["run"]), first->second.c_str(),
          v["partner_s"] * 1000, v["shared_s"] * 1000, ratio,
          v["partner_fetched"] / 1e6, v["partner_local"] / 1e3,
          v["shared_shared"] / 1e6, v["raw_move_s"] * 1000,
          v["raw_move_bytes"] / 1e6);
    }
    std::fflush(stdout);
  }
  std::free(buffer);
  const int wait_status = ::pclose(out);
  const bool exited_ok = wait_status != -1 && WIFEXITED(wait_status) &&
                         WEXITSTATUS(wait_status) == 0;
  const std::string ended = absl::StrCat(
      "mpirun ", wait_status != -1 && WIFEXITED(wait_status)
                     ? absl::StrCat("exited ", WEXITSTATUS(wait_status))
                     : std::string("ended abnormally"));
  if (!started) {
    // No rank got as far as an MpiSession: MPI cannot run here. Open MPI
    // says why first, then repeats itself.
    PartnerNotAvailable(
        absl::StrCat("MPI did not start 2 ranks (", ended,
                     worker_error.empty() ? "" : ": " + worker_error,
                     "); the start of mpirun's standard error:"),
        SomeLines(log, 12, /*last=*/false));
  } else if (status.ok() && (!exited_ok || !worker_error.empty())) {
    status = absl::InternalError(absl::StrCat(
        "part 2b: ", ended, ": ",
        !worker_error.empty()
            ? worker_error
            : absl::StrJoin(SomeLines(log, 4, /*last=*/true), " | ")));
  } else if (status.ok() &&
             static_cast<int>(s_["partner ratio"].values.size()) != c_.runs) {
    status = absl::InternalError(absl::StrCat("part 2b: the worker reported ",
                                              s_["partner ratio"].values.size(),
                                              " of ", c_.runs, " runs"));
  } else if (status.ok()) {
    const double ratio = s_["partner ratio"].Median();
    partner_ratio_ = absl::StrFormat("%.3f", ratio);
    const std::string fetched_label = absl::StrCat(
        "restore, ", kNode, " fetched from ", kHostB, "'s tier over MPI");
    const std::string raw_label =
        absl::StrCat("raw move: ", kNode, "'s files, ", kHostB, " to rank 0");
    // The same bytes moved and nothing else: a partner restore takes at
    // least this, so at or above half of the shared restore no work on the
    // restore itself can meet the goal here.
    const double raw_floor =
        s_["partner raw move"].Median() / s_["partner shared cold"].Median();
    std::printf(
        "  shared cold page cache, each time: %s\n"
        "  medians over %d runs (range):\n"
        "    %-52s%s\n"
        "    %-52s%s\n"
        "    %-52s%s\n"
        "    %-52s%s\n"
        "    %-52s%.1f MB (raw move %.1f MB)\n"
        "    (the partner restore read %.1f kB from %s's own tier and %.1f MB "
        "from the shared dir; the shared one %.1f MB from the shared dir)\n"
        "  partner_restore_vs_shared = %s (goal <= 0.5: %s)\n"
        "  floor: raw move / shared cold = %.3f (a partner restore moves at "
        "least these bytes; at or above 0.5 the goal is out of reach on this "
        "machine)\n",
        eviction_text.c_str(), c_.runs, fetched_label.c_str(),
        Figure(s_["partner restore"]).c_str(),
        "restore from the shared directory, cold",
        Figure(s_["partner shared cold"]).c_str(),
        "(part 2's: one process, no MPI)",
        Figure(s_["restore shared cold"]).c_str(), raw_label.c_str(),
        Figure(s_["partner raw move"]).c_str(), "bytes fetched over MPI",
        s_["partner fetched"].Median() / 1e6,
        s_["partner raw move bytes"].Median() / 1e6,
        s_["partner local"].Median() / 1e3, kHostB,
        s_["partner shared"].Median() / 1e6,
        s_["partner shared only"].Median() / 1e6,
        Range(s_["partner ratio"], "%.3f").c_str(),
        ratio <= 0.5 ? "met" : "NOT met", raw_floor);
    std::fflush(stdout);
  }
  status.Update(RemovePath(partner_local_));
  status.Update(RemovePath(partner_shared_));
  if (!ompi_in_tmp.empty()) status.Update(RemovePath(ompi_in_tmp));
  return status;
}

}  // namespace bench
}  // namespace jobgraph

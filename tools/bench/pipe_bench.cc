// pipe_bench: the text_stats example's job (a Pipe of --threads threads
// reading a text file in batches and counting its words) against a
// hand-written single-threaded loop doing the same counting (getline,
// istringstream, unordered_map), on the same generated file in the same run.
//
// The file: --lines lines of --words_per_line words each, drawn uniformly
// from --distinct lowercase words of 3 to 7 letters (fixed seed), separated
// by single spaces, so that the loop's whitespace split and the job's
// tokenizer see the same words; the bench checks that both count the same
// lines, words and distinct words. It is written once and read once before
// timing, so both read from the page cache.
//
// Each side runs --runs times, alternating; the figures are medians. The job
// is the example binary itself (no checkpoints by default; with
// --lines_per_epoch and a checkpoint directory it also saves every epoch),
// so its time includes starting the process, as a user sees it.
//
//   ./tools/bazel build -c opt //tools/bench:pipe_bench //examples:text_stats
//   bazel-bin/tools/bench/pipe_bench
//
// Last line:
//   pipe_bench: vs_loop=<median job time / median loop time>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

ABSL_FLAG(int64_t, lines, 1000000, "Lines of the generated file.");
ABSL_FLAG(int, words_per_line, 8, "Words per line.");
ABSL_FLAG(int, distinct, 5000, "Distinct words.");
ABSL_FLAG(int, threads, 2, "--threads of the job.");
ABSL_FLAG(int64_t, lines_per_epoch, 100000, "--lines_per_epoch of the job.");
ABSL_FLAG(bool, checkpoints, false,
          "Also save a checkpoint after every epoch (into a directory beside "
          "the file).");
ABSL_FLAG(int, runs, 3, "Runs of each side; medians are reported.");
ABSL_FLAG(std::string, dir, "",
          "Directory for the generated file; default: a fresh one under "
          "$TMPDIR (or /tmp).");
ABSL_FLAG(std::string, text_stats, "",
          "The text_stats binary; default: beside this one in bazel-bin.");

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Counts {
  int64_t lines = 0;
  int64_t words = 0;
  int64_t distinct = 0;
};

void WriteInput(const std::string& path) {
  std::mt19937_64 rng(20261124);
  std::vector<std::string> vocabulary;
  std::unordered_map<std::string, bool> seen;
  const int distinct = absl::GetFlag(FLAGS_distinct);
  while (static_cast<int>(vocabulary.size()) < distinct) {
    std::string word(3 + rng() % 5, 'a');
    for (char& c : word) c = static_cast<char>('a' + rng() % 26);
    if (seen.emplace(word, true).second) vocabulary.push_back(word);
  }
  std::string text;
  const int64_t lines = absl::GetFlag(FLAGS_lines);
  const int per_line = absl::GetFlag(FLAGS_words_per_line);
  for (int64_t i = 0; i < lines; ++i) {
    for (int w = 0; w < per_line; ++w) {
      if (w > 0) text.push_back(' ');
      text += vocabulary[rng() % vocabulary.size()];
    }
    text.push_back('\n');
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  CHECK(out.good()) << "cannot write " << path;
}

// The naive loop: read a line, split it, count in a hash map.
Counts Loop(const std::string& path) {
  std::ifstream in(path);
  CHECK(in.good()) << path;
  std::unordered_map<std::string, int64_t> counts;
  Counts c;
  std::string line;
  while (std::getline(in, line)) {
    ++c.lines;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      ++counts[word];
      ++c.words;
    }
  }
  c.distinct = static_cast<int64_t>(counts.size());
  return c;
}

// Runs `command` and returns its "result: lines=.. words=.. distinct=.."
// line's numbers.
Counts Job(const std::string& command) {
  FILE* out = popen(command.c_str(), "r");
  CHECK(out != nullptr) << command;
  char buffer[1024];
  std::string result;
  while (std::fgets(buffer, sizeof(buffer), out) != nullptr) {
    if (absl::StartsWith(buffer, "result: ")) result = buffer;
  }
  CHECK_EQ(pclose(out), 0) << command;
  CHECK(!result.empty()) << "no result line from " << command;
  Counts c;
  for (absl::string_view part :
       absl::StrSplit(absl::StripSuffix(result, "\n"), ' ')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) continue;
    if (kv.first == "lines") c.lines = value;
    if (kv.first == "words") c.words = value;
    if (kv.first == "distinct") c.distinct = value;
  }
  return c;
}

std::string DefaultTextStats() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK_GT(n, 0);
  self[n] = '\0';
  std::string path(self);
  // bazel-bin/tools/bench/pipe_bench -> bazel-bin/examples/text_stats
  const size_t at = path.rfind("/tools/bench/");
  CHECK(at != std::string::npos) << "pass --text_stats";
  return path.substr(0, at) + "/examples/text_stats";
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  const bool own_dir = dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/pipe_bench.XXXXXX");
    CHECK(mkdtemp(pattern.data()) != nullptr) << pattern;
    dir = pattern;
  }
  const std::string input = dir + "/input.txt";
  WriteInput(input);
  const Counts expected = Loop(input);  // also warms the page cache
  std::printf("file: %s, %lld lines, %lld words, %lld distinct\n",
              input.c_str(), static_cast<long long>(expected.lines),
              static_cast<long long>(expected.words),
              static_cast<long long>(expected.distinct));

  const std::string binary = absl::GetFlag(FLAGS_text_stats).empty()
                                 ? DefaultTextStats()
                                 : absl::GetFlag(FLAGS_text_stats);
  std::string command =
      absl::StrCat("'", binary, "' --input='", input,
                   "' --threads=", absl::GetFlag(FLAGS_threads),
                   " --lines_per_epoch=", absl::GetFlag(FLAGS_lines_per_epoch),
                   " --top_k=3 --session=local");
  const std::string ckpt = dir + "/ckpt";
  std::vector<double> job_s, loop_s;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    std::string this_command = command;
    if (absl::GetFlag(FLAGS_checkpoints)) {
      CHECK_EQ(std::system(absl::StrCat("rm -rf '", ckpt, "'").c_str()), 0);
      this_command += absl::StrCat(" --checkpoint_dir='", ckpt, "'");
    }
    this_command += " 2>/dev/null";
    Clock::time_point start = Clock::now();
    const Counts job = Job(this_command);
    job_s.push_back(SecondsSince(start));
    CHECK(job.lines == expected.lines && job.words == expected.words &&
          job.distinct == expected.distinct)
        << "the job counted lines=" << job.lines << " words=" << job.words
        << " distinct=" << job.distinct << ", the loop " << expected.lines
        << " " << expected.words << " " << expected.distinct;
    start = Clock::now();
    const Counts loop = Loop(input);
    loop_s.push_back(SecondsSince(start));
    CHECK(loop.words == expected.words);
    std::printf("run %d: job %.3f s (%d threads%s), loop %.3f s\n", run + 1,
                job_s.back(), absl::GetFlag(FLAGS_threads),
                absl::GetFlag(FLAGS_checkpoints) ? ", checkpoints" : "",
                loop_s.back());
    std::fflush(stdout);
  }
  const double job = Median(job_s);
  const double loop = Median(loop_s);
  std::printf("job_s=%.3f loop_s=%.3f job_us_per_line=%.3f\n", job, loop,
              job * 1e6 / static_cast<double>(expected.lines));
  if (own_dir) {
    CHECK_EQ(std::system(absl::StrCat("rm -rf '", dir, "'").c_str()), 0);
  }
  std::printf("pipe_bench: vs_loop=%.2f\n", job / loop);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return Main();
}

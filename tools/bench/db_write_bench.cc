// db_write_bench: the checkpoint DB layer against the raw disk, in one run.
//
// Writes N values of M MiB (default 64 x 16 MiB = 1 GiB) with sorted keys
// through the LevelDB adapter (LevelDbType, tuned defaults) up to a
// durable Close(), and, as the baseline, the same bytes to one file with
// write() + fsync. Each run does these three, in an order that rotates from
// run to run, each after deleting its previous output and `sync; sleep 1`:
//
//   raw       one file, 16 MiB write()s, fsync, close
//   ldb       Open(kNew) + Puts + Close() with the memtable flush (default)
//   ldb_nofl  the same with LevelDbOptions::flush_memtable_on_close = false:
//             Close() only fsyncs every file, leaving the tail in the log
//
// then reads everything back from the warm page cache into a preallocated
// buffer: read() of the raw file, and Open(kRead) + a cursor scan that copies
// each value (with and without LevelDB's block checksums); the LevelDB open is
// timed separately because it replays whatever the log holds.
//
// Figures are medians over --runs (after one dropped warm-up run) with the
// range; ratios are against the raw figures. CPU is user + system time of the
// whole process. MB = 1e6 bytes.
//
// Run: ./tools/bazel run -c opt //tools/bench:db_write_bench -- --dir=/tmp/b

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/db/db.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/util/file_util.h"
#include "glog/logging.h"
#include "tools/bench/bench_util.h"

ABSL_FLAG(std::string, dir, "",
          "Scratch directory (created if missing; relative paths are taken "
          "from where `bazel run` was started). Needs 2x the data size free.");
ABSL_FLAG(int, values, 64, "Number of values.");
ABSL_FLAG(int, value_mib, 16, "Size of each value in MiB.");
ABSL_FLAG(int, runs, 3, "Repetitions; medians are reported.");
ABSL_FLAG(int, write_buffer_mib, 0,
          "LevelDbOptions::write_buffer_size in MiB for both LevelDB variants; "
          "0 keeps the default.");
ABSL_FLAG(bool, drop_caches, false,
          "Also time cold reads (writes /proc/sys/vm/drop_caches; needs "
          "root).");

namespace jobgraph {
namespace {

using bench::Check;
using bench::Clock;
using bench::CpuSeconds;
using bench::DropCaches;
using bench::RemoveIfExists;
using bench::Sample;
using bench::Seconds;

// Lets the disk and the page cache settle between measurements.
void Settle() { bench::Settle(/*churn_mib=*/0, /*settle_ms=*/1000); }

class Bench {
 public:
  Bench(std::string dir, int values, size_t value_bytes)
      : dir_(std::move(dir)),
        num_values_(values),
        value_bytes_(value_bytes),
        total_bytes_(static_cast<size_t>(values) * value_bytes),
        data_(total_bytes_),
        sink_(total_bytes_) {
    // Incompressible, like float tensors; every page touched before timing.
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint64_t* words = reinterpret_cast<uint64_t*>(data_.data());
    for (size_t i = 0; i < total_bytes_ / 8; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      words[i] = x;
    }
    std::memset(sink_.data(), 1, sink_.size());
  }

  std::string Key(int i) const { return absl::StrFormat("blob_%06d", i); }
  absl::string_view Value(int i) const {
    return absl::string_view(data_.data() + i * value_bytes_, value_bytes_);
  }

  // Raw baseline: write + fsync of one file.
  double WriteRaw(const std::string& path) {
    const auto start = Clock::now();
    int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    PCHECK(fd >= 0) << path;
    for (int i = 0; i < num_values_; ++i) {
      absl::string_view v = Value(i);
      while (!v.empty()) {
        ssize_t n = ::write(fd, v.data(), v.size());
        PCHECK(n > 0) << path;
        v.remove_prefix(n);
      }
    }
    PCHECK(::fsync(fd) == 0);
    PCHECK(::close(fd) == 0);
    return Seconds(start);
  }

  double ReadRaw(const std::string& path) {
    const auto start = Clock::now();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    PCHECK(fd >= 0) << path;
    size_t done = 0;
    while (done < total_bytes_) {
      ssize_t n = ::read(fd, sink_.data() + done,
                         std::min<size_t>(value_bytes_, total_bytes_ - done));
      PCHECK(n > 0) << path;
      done += n;
    }
    ::close(fd);
    return Seconds(start);
  }

  struct WriteTimes {
    double total;
    double puts;   // Open + Puts, writer flushed.
    double close;  // Close(): memtable flush (if on) + fsync pass.
  };

  WriteTimes WriteDb(const std::string& path, const LevelDbType& type) {
    const auto start = Clock::now();
    std::unique_ptr<DB> db = type.Open(path, DbMode::kNew).value();
    {
      std::unique_ptr<Writer> writer = db->NewWriter().value();
      for (int i = 0; i < num_values_; ++i)
        Check(writer->Put(Key(i), Value(i)));
      Check(writer->Flush());
    }
    const double puts = Seconds(start);
    const auto close_start = Clock::now();
    Check(db->Close());
    return {Seconds(start), puts, Seconds(close_start)};
  }

  struct ReadTimes {
    double open;
    double scan;
  };

  ReadTimes ReadDb(const std::string& path, bool verify) {
    DbOptions options;
    options.verify_checksums = verify;
    const auto start = Clock::now();
    std::unique_ptr<DB> db =
        LevelDbType().Open(path, DbMode::kRead, options).value();
    const double open = Seconds(start);
    const auto scan_start = Clock::now();
    size_t done = 0;
    {
      std::unique_ptr<Cursor> cursor = db->NewCursor();
      for (; cursor->Valid(); cursor->Next()) {
        absl::string_view v = cursor->value();
        CHECK_LE(done + v.size(), total_bytes_);
        std::memcpy(sink_.data() + done, v.data(), v.size());
        done += v.size();
      }
      Check(cursor->status());
    }
    const double scan = Seconds(scan_start);
    CHECK_EQ(done, total_bytes_);
    Check(db->Close());
    return {open, scan};
  }

  bool SinkMatchesData() const {
    return std::memcmp(sink_.data(), data_.data(), total_bytes_) == 0;
  }

  size_t total_bytes() const { return total_bytes_; }

 private:
  const std::string dir_;
  const int num_values_;
  const size_t value_bytes_;
  const size_t total_bytes_;
  std::vector<char> data_;
  std::vector<char> sink_;
};

std::string DescribeDir(const std::string& path) {
  int tables = 0, logs = 0;
  int64_t log_bytes = 0;
  const std::vector<std::string> names = ListDir(path).value();
  for (const std::string& name : names) {
    struct stat st;
    CHECK_EQ(::stat(JoinPath(path, name).c_str(), &st), 0);
    if (name.size() > 4 && name.substr(name.size() - 4) == ".ldb") ++tables;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".log") {
      ++logs;
      log_bytes += st.st_size;
    }
  }
  return absl::StrFormat("%d tables, %d logs holding %.0f MB", tables, logs,
                         log_bytes / 1e6);
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_dir);
  CHECK(!dir.empty()) << "--dir is required";
  if (dir[0] != '/' && std::getenv("BUILD_WORKING_DIRECTORY") != nullptr) {
    dir = JoinPath(std::getenv("BUILD_WORKING_DIRECTORY"), dir);
  }
  if (!PathExists(dir).value()) Check(CreateDir(dir));
  const int runs = absl::GetFlag(FLAGS_runs);
  Bench bench(dir, absl::GetFlag(FLAGS_values),
              static_cast<size_t>(absl::GetFlag(FLAGS_value_mib)) << 20);
  const double mb = bench.total_bytes() / 1e6;
  std::printf("db_write_bench: %d values x %d MiB = %.0f MB, %d runs, dir %s\n",
              absl::GetFlag(FLAGS_values), absl::GetFlag(FLAGS_value_mib), mb,
              runs, dir.c_str());

  const std::string raw_path = JoinPath(dir, "raw.bin");
  const std::string db_path = JoinPath(dir, "bench.db");
  const std::string db_nofl_path = JoinPath(dir, "bench_noflush.db");
  LevelDbOptions flush_options;  // The defaults under test.
  if (absl::GetFlag(FLAGS_write_buffer_mib) > 0) {
    flush_options.write_buffer_size =
        static_cast<size_t>(absl::GetFlag(FLAGS_write_buffer_mib)) << 20;
  }
  LevelDbOptions noflush_options = flush_options;
  noflush_options.flush_memtable_on_close = false;
  const LevelDbType flush_type(flush_options);
  const LevelDbType noflush_type(noflush_options);
  std::printf("LevelDB write_buffer_size %zu MiB, max_file_size %zu MiB\n",
              flush_options.write_buffer_size >> 20,
              flush_options.max_file_size >> 20);

  std::map<std::string, Sample> s;
  std::string layout_flush, layout_noflush;
  bool cold = absl::GetFlag(FLAGS_drop_caches);
  // Run -1 is a warm-up whose figures are dropped: from then on every write
  // is preceded by deleting its own output of the previous run
  // (`rm; sync; sleep 1`), so all three start from the same
  // page-cache state. (On this VM a write is much faster when it re-uses pages
  // freed just before, and slower once freed pages went back to the host.)
  for (int run = -1; run < runs; ++run) {
    const bool record = run >= 0;
    auto add = [&](const std::string& name, double value) {
      if (record) s[name].Add(value);
    };
    // The three writes also take turns going first.
    for (int turn = 0; turn < 3; ++turn) {
      const int which = (run + 3 + turn) % 3;
      RemoveIfExists(which == 0   ? raw_path
                     : which == 1 ? db_path
                                  : db_nofl_path);
      Settle();
      const double cpu = CpuSeconds();
      switch (which) {
        case 0:
          add("w raw", bench.WriteRaw(raw_path));
          add("cpu raw", CpuSeconds() - cpu);
          break;
        case 1: {
          Bench::WriteTimes w = bench.WriteDb(db_path, flush_type);
          add("cpu ldb", CpuSeconds() - cpu);
          add("w ldb", w.total);
          add("w ldb puts", w.puts);
          add("w ldb close", w.close);
          break;
        }
        case 2: {
          Bench::WriteTimes w = bench.WriteDb(db_nofl_path, noflush_type);
          add("cpu nofl", CpuSeconds() - cpu);
          add("w nofl", w.total);
          add("w nofl puts", w.puts);
          add("w nofl close", w.close);
          break;
        }
      }
    }
    if (!record) continue;
    layout_flush = DescribeDir(db_path);
    layout_noflush = DescribeDir(db_nofl_path);

    // Warm reads. The raw file and the first LevelDB scan are read twice so
    // that every source is in the page cache for the timed pass.
    bench.ReadRaw(raw_path);
    s["r raw"].Add(bench.ReadRaw(raw_path));
    Bench::ReadTimes r = bench.ReadDb(db_path, /*verify=*/true);
    s["r ldb open"].Add(r.open);
    s["r ldb scan verify"].Add(r.scan);
    CHECK(bench.SinkMatchesData());
    r = bench.ReadDb(db_path, /*verify=*/false);
    s["r ldb scan noverify"].Add(r.scan);
    CHECK(bench.SinkMatchesData());
    // The first open after a close without the flush replays the log.
    r = bench.ReadDb(db_nofl_path, /*verify=*/false);
    s["r nofl first open"].Add(r.open);
    s["r nofl scan noverify"].Add(r.scan);
    CHECK(bench.SinkMatchesData());

    if (cold) {
      if (!DropCaches()) {
        std::printf("(cannot write /proc/sys/vm/drop_caches; no cold reads)\n");
        cold = false;
      } else {
        s["cold r raw"].Add(bench.ReadRaw(raw_path));
        CHECK(DropCaches());
        r = bench.ReadDb(db_path, /*verify=*/false);
        s["cold r ldb open"].Add(r.open);
        s["cold r ldb scan noverify"].Add(r.scan);
        CHECK(bench.SinkMatchesData());
      }
    }
    std::printf(
        "run %d: raw %.0f MB/s, ldb %.0f MB/s (%.2fx), "
        "ldb_nofl %.0f MB/s (%.2fx)\n",
        run + 1, mb / s["w raw"].values.back(), mb / s["w ldb"].values.back(),
        s["w raw"].values.back() / s["w ldb"].values.back(),
        mb / s["w nofl"].values.back(),
        s["w raw"].values.back() / s["w nofl"].values.back());
    std::fflush(stdout);
  }
  RemoveIfExists(raw_path);
  RemoveIfExists(db_path);
  RemoveIfExists(db_nofl_path);

  auto rate = [&](const std::string& name) {
    const Sample& x = s.at(name);
    return absl::StrFormat("%7.0f MB/s (%.0f-%.0f)", mb / x.Median(),
                           mb / x.Max(), mb / x.Min());
  };
  auto secs = [&](const std::string& name) {
    const Sample& x = s.at(name);
    return absl::StrFormat("%6.3f s (%.3f-%.3f)", x.Median(), x.Min(), x.Max());
  };
  // Per-run ratios (each LevelDB write against the raw write of the same
  // run), which cancel some of the drift between runs on a noisy machine.
  Sample ratio_ldb, ratio_nofl;
  for (int run = 0; run < runs; ++run) {
    ratio_ldb.Add(s["w raw"].values[run] / s["w ldb"].values[run]);
    ratio_nofl.Add(s["w raw"].values[run] / s["w nofl"].values[run]);
  }
  const double raw_w = s["w raw"].Median();
  const double raw_r = s["r raw"].Median();
  std::printf("\nWRITE (durable)                 median (range)\n");
  std::printf("  raw write+fsync             %s  cpu %s\n",
              rate("w raw").c_str(), secs("cpu raw").c_str());
  std::printf("  ldb, flush memtable on close %s  ratio %.2f\n",
              rate("w ldb").c_str(), raw_w / s["w ldb"].Median());
  std::printf("      open+puts %s, close %s, cpu %s\n",
              secs("w ldb puts").c_str(), secs("w ldb close").c_str(),
              secs("cpu ldb").c_str());
  std::printf("      per-run ratio median %.2f (%.2f-%.2f); on disk: %s\n",
              ratio_ldb.Median(), ratio_ldb.Min(), ratio_ldb.Max(),
              layout_flush.c_str());
  std::printf("  ldb, fsync pass only        %s  ratio %.2f\n",
              rate("w nofl").c_str(), raw_w / s["w nofl"].Median());
  std::printf("      open+puts %s, close %s, cpu %s\n",
              secs("w nofl puts").c_str(), secs("w nofl close").c_str(),
              secs("cpu nofl").c_str());
  std::printf("      per-run ratio median %.2f (%.2f-%.2f); on disk: %s\n",
              ratio_nofl.Median(), ratio_nofl.Min(), ratio_nofl.Max(),
              layout_noflush.c_str());
  std::printf("\nREAD (warm page cache, into a preallocated buffer)\n");
  std::printf("  raw read()                  %s\n", rate("r raw").c_str());
  std::printf("  ldb open                    %s\n", secs("r ldb open").c_str());
  std::printf("  ldb scan, verify_checksums  %s  ratio %.2f\n",
              rate("r ldb scan verify").c_str(),
              raw_r / s["r ldb scan verify"].Median());
  std::printf("  ldb scan, no verify         %s  ratio %.2f\n",
              rate("r ldb scan noverify").c_str(),
              raw_r / s["r ldb scan noverify"].Median());
  std::printf("  ldb (no flush) first open   %s  <- log replay\n",
              secs("r nofl first open").c_str());
  std::printf("  ldb (no flush) scan         %s\n",
              rate("r nofl scan noverify").c_str());
  if (s.count("cold r raw") != 0) {
    std::printf("\nREAD (cold, after drop_caches)\n");
    std::printf("  raw read()                  %s\n",
                rate("cold r raw").c_str());
    std::printf("  ldb open                    %s\n",
                secs("cold r ldb open").c_str());
    std::printf(
        "  ldb scan, no verify         %s  ratio %.2f\n",
        rate("cold r ldb scan noverify").c_str(),
        s["cold r raw"].Median() / s["cold r ldb scan noverify"].Median());
  }
  std::printf(
      "\ndb_write_bench: write_ratio=%.2f write_ratio_fsync_only=%.2f "
      "per_run_write_ratio=%.2f per_run_write_ratio_fsync_only=%.2f "
      "read_ratio_verify=%.2f read_ratio_noverify=%.2f\n",
      raw_w / s["w ldb"].Median(), raw_w / s["w nofl"].Median(),
      ratio_ldb.Median(), ratio_nofl.Median(),
      raw_r / s["r ldb scan verify"].Median(),
      raw_r / s["r ldb scan noverify"].Median());
  return 0;
}

}  // namespace
}  // namespace jobgraph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return jobgraph::Main();
}

#include "tools/bench/checkpoint_case.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>  // NOLINT(build/c++11)
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/commit/commit_log.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/util/file_util.h"
#include "engine/net.h"
#include "engine/net_builder.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "glog/logging.h"
#include "proto/jobgraph.pb.h"
#include "tools/bench/bench_util.h"

namespace jobgraph {
namespace bench {
namespace {

constexpr char kNode[] = "trainer_0";
constexpr size_t kRawChunk = size_t{4} << 20;  // 4 MiB write()s and read()s
constexpr size_t kDirectAlignment = 4096;

}  // namespace

CheckpointCase::CheckpointCase(std::string label, std::string dir, int blobs,
                               size_t blob_bytes,
                               const std::vector<Variant>* variants,
                               const CheckpointCaseOptions& options)
    : label_(std::move(label)),
      dir_(std::move(dir)),
      blobs_(blobs),
      blob_bytes_(blob_bytes),
      total_bytes_(static_cast<size_t>(blobs) * blob_bytes),
      variants_(variants),
      options_(options),
      ckpt_dir_(JoinPath(dir_, "ckpt")),
      raw_path_(JoinPath(dir_, "raw.bin")),
      source_(nullptr, kNode),
      read_buffer_(total_bytes_),
      scratch_(kRawChunk) {
  CHECK_EQ(blob_bytes % sizeof(float), 0u);
  // Names sort in creation order; every tensor filled (and so touched)
  // with incompressible bits before any timing.
  const int digits = static_cast<int>(absl::StrCat(blobs - 1).size());
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < blobs; ++i) {
    names_.push_back(absl::StrFormat("w%0*d", digits, i));
    Tensor* t = source_.SetTensor(
        names_.back(),
        Tensor::Uninitialized(
            FLOAT, {static_cast<int64_t>(blob_bytes / sizeof(float))}));
    uint64_t* words = static_cast<uint64_t*>(t->raw_mutable_data());
    for (size_t w = 0; w < blob_bytes / 8; ++w) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      words[w] = x;
    }
    views_.emplace_back(static_cast<const char*>(t->raw_data()), blob_bytes);
  }
  // Tiny tensors are gathered once, off the clock, so the raw baseline
  // writes 4 MiB pieces as for the large case.
  if (blob_bytes_ < kRawChunk) {
    gathered_.reserve(total_bytes_);
    for (absl::string_view v : views_) gathered_.append(v.data(), v.size());
    aligned_gathered_.reset(static_cast<char*>(std::aligned_alloc(
        kDirectAlignment, (total_bytes_ + kDirectAlignment - 1) /
                              kDirectAlignment * kDirectAlignment)));
    CHECK(aligned_gathered_ != nullptr);
    std::memcpy(aligned_gathered_.get(), gathered_.data(), total_bytes_);
  }
  std::memset(read_buffer_.data(), 1, read_buffer_.size());
}

void CheckpointCase::Run(int runs) {
  const bool cold = options_.cold;
  std::printf(
      "\n== %s: %d float tensors x %zu bytes = %.1f MB; %d runs + 1 "
      "warm-up; reads %s\n",
      label_.c_str(), blobs_, blob_bytes_, mb(), runs,
      cold ? "cold (drop_caches before each timed read)" : "warm");
  std::fflush(stdout);
  for (int run = -1; run < runs; ++run) {
    record_ = run >= 0;
    const int epoch = run + 1;
    // Writes: the buffered raw write and the checkpoint take turns going
    // first, the direct raw write between them; variants come after them.
    const bool raw_first = (run + 2) % 2 == 0;
    double buffered, direct;
    if (raw_first) {
      buffered = TimeRawWrite();
      direct = TimeRawDirectWrite();
      TimeSave(epoch);
    } else {
      TimeSave(epoch);
      direct = TimeRawDirectWrite();
      buffered = TimeRawWrite();
    }
    Add("w raw best", std::min(buffered, direct));
    for (const Variant& v : *variants_) TimeVariant(v, epoch);
    // Reads of what the raw write and the Save op wrote.
    const std::string db = CheckpointDbPath(ckpt_dir_, kNode, epoch);
    TimeReads(db, cold);
    if (record_) {
      std::printf(
          "  run %d (%s first): raw write %.0f MB/s, O_DIRECT %.0f MB/s, "
          "save %.0f MB/s (%.2fx the faster); "
          "raw read %.0f MB/s, load %.0f MB/s (%.2fx)\n",
          run + 1, raw_first ? "raw" : "save", mb() / Last("w raw"),
          mb() / Last("w raw direct"), mb() / Last("save"),
          Last("w raw best") / Last("save"), mb() / Last("r raw"),
          mb() / Last("load"), Last("r raw") / Last("load"));
      std::fflush(stdout);
    }
  }
  RemoveIfExists(raw_path_);
  RemoveIfExists(ckpt_dir_);
  for (const Variant& v : *variants_) {
    RemoveIfExists(JoinPath(dir_, absl::StrCat("variant_", VariantIndex(v))));
  }
  Report();
}

double CheckpointCase::SaveRatio() const {
  return Ratio("w raw best", "save").Median();
}

double CheckpointCase::LoadRatio() const {
  return Ratio("r raw", "load").Median();
}

double CheckpointCase::FirstLoadVsFreshRead() const {
  return s_.at("r raw fresh").Median() / first_load_seconds_;
}

double CheckpointCase::SaveSeconds() const { return s_.at("save").Median(); }
double CheckpointCase::LoadSeconds() const { return s_.at("load").Median(); }

double CheckpointCase::PeakRssVsSize() const {
  if (s_.count("save rss increase") == 0) return -1;
  return first_save_rss_increase_ / s_.at("db bytes").Median();
}

void CheckpointCase::Add(const std::string& name, double value) {
  if (record_) s_[name].Add(value);
}

double CheckpointCase::Last(const std::string& name) {
  return s_.at(name).values.back();
}

// Per-run ratios base / x (x's MB/s over base's).
Sample CheckpointCase::Ratio(const std::string& base,
                             const std::string& x) const {
  Sample r;
  const Sample& b = s_.at(base);
  const Sample& v = s_.at(x);
  for (size_t i = 0; i < b.values.size(); ++i) {
    r.Add(b.values[i] / v.values[i]);
  }
  return r;
}

double CheckpointCase::TimeRawWrite() {
  RemoveIfExists(raw_path_);
  Settle(options_.churn_mib, options_.settle_ms);
  const double cpu = CpuSeconds();
  const int64_t wchar0 = IoBytes("wchar");
  const auto start = Clock::now();
  int fd =
      ::open(raw_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  PCHECK(fd >= 0) << raw_path_;
  auto write_all = [&](absl::string_view v) {
    while (!v.empty()) {
      ssize_t n = ::write(fd, v.data(), std::min(v.size(), kRawChunk));
      PCHECK(n > 0) << raw_path_;
      v.remove_prefix(n);
    }
  };
  if (!gathered_.empty()) {
    write_all(gathered_);
  } else {
    for (absl::string_view v : views_) write_all(v);
  }
  PCHECK(::fsync(fd) == 0);
  PCHECK(::close(fd) == 0);
  const double seconds = Seconds(start);
  Add("w raw", seconds);
  Add("cpu w raw", CpuSeconds() - cpu);
  Add("wchar w raw", static_cast<double>(IoBytes("wchar") - wchar0));
  return seconds;
}

// The same bytes past the page cache, as a tuned writer would: 4 MiB
// O_DIRECT writes from the tensors' own memory (page-aligned), several in
// flight, each thread at its own offsets; an unaligned end goes through the
// page cache.
double CheckpointCase::TimeRawDirectWrite() {
  RemoveIfExists(raw_path_);
  struct Piece {
    const char* data;
    size_t size;
    uint64_t offset;
  };
  std::vector<Piece> pieces;
  uint64_t offset = 0;
  auto add = [&](const char* data, size_t size) {
    for (size_t done = 0; done < size; done += kRawChunk) {
      pieces.push_back(
          {data + done, std::min(kRawChunk, size - done), offset + done});
    }
    offset += size;
  };
  if (aligned_gathered_ != nullptr) {
    add(aligned_gathered_.get(), total_bytes_);
  } else {
    for (absl::string_view v : views_) {
      CHECK_EQ(reinterpret_cast<uintptr_t>(v.data()) % kDirectAlignment, 0u)
          << "tensor storage is not page-aligned";
      CHECK_EQ(v.size() % kDirectAlignment, 0u);
      add(v.data(), v.size());
    }
  }
  Piece tail{nullptr, 0, 0};
  Piece& last = pieces.back();
  const size_t aligned = last.size / kDirectAlignment * kDirectAlignment;
  if (aligned < last.size) {
    tail = {last.data + aligned, last.size - aligned, last.offset + aligned};
    last.size = aligned;
  }
  Settle(options_.churn_mib, options_.settle_ms);
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  const int fd =
      ::open(raw_path_.c_str(),
             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  PCHECK(fd >= 0) << raw_path_ << " (O_DIRECT)";
  std::atomic<size_t> next{0};
  auto write_pieces = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      const Piece& p = pieces[i];
      for (size_t done = 0; done < p.size;) {
        const ssize_t n = ::pwrite(fd, p.data + done, p.size - done,
                                   static_cast<off_t>(p.offset + done));
        PCHECK(n > 0) << raw_path_;
        done += static_cast<size_t>(n);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < options_.raw_direct_depth; ++t) {
    threads.emplace_back(write_pieces);
  }
  for (std::thread& t : threads) t.join();
  if (tail.size > 0) {
    PCHECK(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) == 0);
    PCHECK(
        ::pwrite(fd, tail.data, tail.size, static_cast<off_t>(tail.offset)) ==
        static_cast<ssize_t>(tail.size));
  }
  PCHECK(::fsync(fd) == 0);
  PCHECK(::close(fd) == 0);
  const double seconds = Seconds(start);
  Add("w raw direct", seconds);
  Add("cpu w raw direct", CpuSeconds() - cpu);
  return seconds;
}

// Deletes every checkpoint (off the clock) and starts an empty directory.
void CheckpointCase::FreshCheckpointDir() {
  RemoveIfExists(ckpt_dir_);
  Check(CreateDir(ckpt_dir_));
  Check(FsyncDir(dir_));
}

NetDef CheckpointCase::SaveNet(int epoch) const {
  NetDef def;
  def.set_name("checkpoint_save");
  OperatorDef* op = def.add_op();
  op->set_type("Save");
  for (const std::string& name : names_) op->add_input(name);
  *op->add_arg() = MakeArg("db", CheckpointDbPath(ckpt_dir_, kNode, epoch));
  *op->add_arg() = MakeArg("db_type", kDefaultDbType);
  *op->add_arg() = MakeArg("absolute_path", 1);
  *op->add_arg() = MakeArg("node", kNode);
  *op->add_arg() = MakeArg("epoch", static_cast<int64_t>(epoch));
  return def;
}

NetDef CheckpointCase::LoadNet(const std::string& db, bool verify) const {
  NetDef def;
  def.set_name("checkpoint_load");
  OperatorDef* op = def.add_op();
  op->set_type("Load");
  for (const std::string& name : names_) op->add_output(name);
  *op->add_arg() = MakeArg("db", db);
  *op->add_arg() = MakeArg("db_type", kDefaultDbType);
  *op->add_arg() = MakeArg("absolute_path", 1);
  *op->add_arg() = MakeArg("verify_checksums", verify ? 1 : 0);
  *op->add_arg() =
      MakeArg("threads", static_cast<int64_t>(options_.load_threads));
  return def;
}

// The commit that follows a save (what Checkpointer::SaveEpoch does).
void CheckpointCase::Commit(int epoch, double save_seconds) {
  Check(CommitEpoch(ckpt_dir_, kDefaultDbType,
                    {.epoch = epoch,
                     .nodes = {kNode},
                     .total_bytes = static_cast<int64_t>(total_bytes_),
                     .save_micros = static_cast<int64_t>(save_seconds * 1e6)}));
}

void CheckpointCase::TimeSave(int epoch) {
  FreshCheckpointDir();
  const NetDef def = SaveNet(epoch);
  Settle(options_.churn_mib, options_.settle_ms);
  // The warm-up save stands for a process's first save: memory that
  // earlier work freed but malloc kept is returned first, so the peak RSS
  // increase shows the save's whole working set.
  if (!record_) malloc_trim(0);
  const bool hwm_ok = ResetPeakRss();
  const long rss0 = StatusKb("VmRSS");
  const long faults0 = MinorFaults();
  const double cpu = CpuSeconds();
  const int64_t wchar0 = IoBytes("wchar");
  const int64_t rchar0 = IoBytes("rchar");
  const auto start = Clock::now();
  std::unique_ptr<Net> net = Net::Create(def, &source_).value();
  const double create = Seconds(start);
  Check(net->Run());
  const double run = Seconds(start);
  Commit(epoch, run);
  const double total = Seconds(start);
  const double cpu_used = CpuSeconds() - cpu;
  const long hwm = StatusKb("VmHWM");
  Add("save", total);
  Add("save create", create);
  Add("save run", run - create);
  Add("save commit", total - run);
  Add("cpu save", cpu_used);
  Add("save faults", static_cast<double>(MinorFaults() - faults0));
  // Checkpoint files are mmapped for reading, which rchar does not see.
  Add("wchar save", static_cast<double>(IoBytes("wchar") - wchar0));
  Add("rchar save", static_cast<double>(IoBytes("rchar") - rchar0));
  const std::string db = CheckpointDbPath(ckpt_dir_, kNode, epoch);
  const DirInfo info = DescribeDir(db);
  Add("db bytes", static_cast<double>(info.bytes));
  if (hwm_ok && hwm >= 0 && rss0 >= 0) {
    Add("save rss increase", (hwm - rss0) * 1024.0);
    if (!record_) first_save_rss_increase_ = (hwm - rss0) * 1024.0;
  }
  layout_ = absl::StrFormat("%d tables, %d logs (%.1f MB), %.1f MB in all",
                            info.tables, info.logs, info.log_bytes / 1e6,
                            info.bytes / 1e6);
}

void CheckpointCase::TimeVariant(const Variant& v, int epoch) {
  // Each variant has its own database path, deleted (off the clock) just
  // before it is written again, so every timed write starts from the same
  // state: its previous output of the same size just deleted, then
  // `sync; sleep`. (On this VM, writes that re-use just-freed pages run
  // much faster than writes into pages the host has reclaimed.)
  const std::string db =
      JoinPath(dir_, absl::StrCat("variant_", VariantIndex(v)));
  RemoveIfExists(db);
  std::vector<BlobToSave> blobs;
  for (const std::string& name : names_) {
    blobs.push_back({name, source_.GetBlob(name)});
  }
  CheckpointDbOptions options = v.options;
  options.node = kNode;
  options.epoch = epoch;
  Settle(options_.churn_mib, options_.settle_ms);
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  Check(WriteCheckpointDb(LevelDbType(v.leveldb), db, std::move(blobs), options)
            .status());
  Add("variant " + v.label, Seconds(start));
  Add("cpu variant " + v.label, CpuSeconds() - cpu);
  // A warm load of the variant (verify_checksums 1), which shows what the
  // options cost at restore time (e.g. a log replay).
  WarmFiles(db, &scratch_);
  Workspace ws(nullptr, kNode);
  const auto load_start = Clock::now();
  std::unique_ptr<Net> net = Net::Create(LoadNet(db, true), &ws).value();
  Check(net->Run());
  Add("variant load " + v.label, Seconds(load_start));
}

int CheckpointCase::VariantIndex(const Variant& v) const {
  return static_cast<int>(&v - variants_->data());
}

double CheckpointCase::ReadRaw(char* out) {
  const auto start = Clock::now();
  int fd = ::open(raw_path_.c_str(), O_RDONLY | O_CLOEXEC);
  PCHECK(fd >= 0) << raw_path_;
  size_t done = 0;
  while (done < total_bytes_) {
    ssize_t n = ::read(fd, out + done,
                       std::min<size_t>(kRawChunk, total_bytes_ - done));
    PCHECK(n > 0) << raw_path_;
    done += n;
  }
  ::close(fd);
  return Seconds(start);
}

void CheckpointCase::Prepare(const std::string& db, bool cold) {
  if (cold) {
    CHECK(DropCaches()) << "cannot write /proc/sys/vm/drop_caches";
  } else {
    WarmFiles(raw_path_, &scratch_);
    WarmFiles(db, &scratch_);
  }
}

void CheckpointCase::TimeLoad(const std::string& db, bool verify,
                              const std::string& name) {
  auto ws = std::make_unique<Workspace>(nullptr, kNode);
  const NetDef def = LoadNet(db, verify);
  // Likewise, the warm-up load allocates its tensors in fresh memory.
  if (!record_) malloc_trim(0);
  const long faults0 = MinorFaults();
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  std::unique_ptr<Net> net = Net::Create(def, ws.get()).value();
  Check(net->Run());
  const double seconds = Seconds(start);
  Add("cpu " + name, CpuSeconds() - cpu);
  Add(name + " faults", static_cast<double>(MinorFaults() - faults0));
  Add(name, seconds);
  if (!record_ && name == "load") {
    first_load_seconds_ = seconds;
    first_load_faults_ = MinorFaults() - faults0;
  }
  // Checked off the clock: every tensor bit for bit.
  for (const std::string& n : names_) {
    const Tensor* loaded = ws->GetTensor(n).value();
    CHECK(loaded->BitwiseEquals(*source_.GetTensor(n).value()))
        << "loaded blob " << n << " differs";
  }
  net.reset();
  ws.reset();  // frees the loaded tensors off the clock
}

void CheckpointCase::TimeReads(const std::string& db, bool cold) {
  Prepare(db, cold);
  Add("r raw", ReadRaw(read_buffer_.data()));
  CHECK(gathered_.empty() ? std::memcmp(read_buffer_.data(), views_[0].data(),
                                        views_[0].size()) == 0
                          : std::memcmp(read_buffer_.data(), gathered_.data(),
                                        gathered_.size()) == 0);
  {
    Prepare(db, cold);
    const auto start = Clock::now();
    std::unique_ptr<char[]> fresh(new char[total_bytes_]);
    ReadRaw(fresh.get());
    Add("r raw fresh", Seconds(start));
  }
  Prepare(db, cold);
  TimeLoad(db, /*verify=*/true, "load");
  if (options_.load_noverify) {
    Prepare(db, cold);
    TimeLoad(db, /*verify=*/false, "load noverify");
  }
}

std::string CheckpointCase::Rate(const std::string& name) const {
  const Sample& x = s_.at(name);
  return absl::StrFormat("%8.0f MB/s (%.0f-%.0f)", mb() / x.Median(),
                         mb() / x.Max(), mb() / x.Min());
}

std::string CheckpointCase::Secs(const std::string& name) const {
  const Sample& x = s_.at(name);
  return absl::StrFormat("%.3f s (%.3f-%.3f)", x.Median(), x.Min(), x.Max());
}

std::string CheckpointCase::RatioText(const std::string& base,
                                      const std::string& x) const {
  const Sample r = Ratio(base, x);
  return absl::StrFormat("ratio %.2f (%.2f-%.2f)", r.Median(), r.Min(),
                         r.Max());
}

void CheckpointCase::Report() const {
  std::printf("  %s, medians (range) over the measured runs:\n",
              label_.c_str());
  std::printf("  SAVE (durable: DB synced, renamed, dir synced, committed)\n");
  std::printf("    raw write + fsync      %s  %s, cpu %s; wrote %.0f MB\n",
              Rate("w raw").c_str(), Secs("w raw").c_str(),
              Secs("cpu w raw").c_str(), s_.at("wchar w raw").Median() / 1e6);
  std::printf("    raw write, O_DIRECT x%d %s  %s, cpu %s\n",
              options_.raw_direct_depth, Rate("w raw direct").c_str(),
              Secs("w raw direct").c_str(), Secs("cpu w raw direct").c_str());
  std::printf("    Save op + commit       %s  %s, %s vs the faster raw write\n",
              Rate("save").c_str(), Secs("save").c_str(),
              RatioText("w raw best", "save").c_str());
  std::printf(
      "      Net::Create %s, Net::Run %s, commit log %s; cpu %s; "
      "minor faults %.0f; wrote %.0f MB, read %.0f MB through read()\n",
      Secs("save create").c_str(), Secs("save run").c_str(),
      Secs("save commit").c_str(), Secs("cpu save").c_str(),
      s_.at("save faults").Median(), s_.at("wchar save").Median() / 1e6,
      s_.at("rchar save").Median() / 1e6);
  std::printf("      database: %s\n", layout_.c_str());
  const double db_bytes = s_.at("db bytes").Median();
  if (s_.count("save rss increase") != 0) {
    const Sample& rss = s_.at("save rss increase");
    std::printf(
        "      peak RSS increase during the process's first save: %.1f MB "
        "= %.2fx the checkpoint's %.1f MB (goal <= 1.10x); later saves "
        "(re-using memory freed by earlier ones): %.1f MB (%.1f-%.1f)\n",
        first_save_rss_increase_ / 1e6, first_save_rss_increase_ / db_bytes,
        db_bytes / 1e6, rss.Median() / 1e6, rss.Min() / 1e6, rss.Max() / 1e6);
  } else {
    std::printf("      peak RSS: cannot reset VmHWM (/proc/self/clear_refs)\n");
  }
  for (const Variant& v : *variants_) {
    std::printf("    variant %-14s %s  %s, cpu %s; load %s\n", v.label.c_str(),
                Rate("variant " + v.label).c_str(),
                RatioText("w raw best", "variant " + v.label).c_str(),
                Secs("cpu variant " + v.label).c_str(),
                Rate("variant load " + v.label).c_str());
  }
  std::printf("  LOAD (%s page cache)\n", options_.cold ? "cold" : "warm");
  std::printf("    raw read               %s\n", Rate("r raw").c_str());
  std::printf("    raw read, fresh buffer %s  %s\n",
              Rate("r raw fresh").c_str(),
              RatioText("r raw", "r raw fresh").c_str());
  std::printf(
      "    Load op, verify CRC    %s  %s vs raw read; %s vs fresh buffer\n",
      Rate("load").c_str(), RatioText("r raw", "load").c_str(),
      RatioText("r raw fresh", "load").c_str());
  std::printf(
      "      %s, cpu %s, minor faults %.0f; the process's first load: "
      "%.0f MB/s, %ld minor faults (fresh tensor memory)\n",
      Secs("load").c_str(), Secs("cpu load").c_str(),
      s_.at("load faults").Median(), mb() / first_load_seconds_,
      first_load_faults_);
  if (s_.count("load noverify") != 0) {
    std::printf("    Load op, no CRC        %s  %s\n",
                Rate("load noverify").c_str(),
                RatioText("r raw", "load noverify").c_str());
  }
  std::fflush(stdout);
}

}  // namespace bench
}  // namespace jobgraph

// The Load operator (see save_load_ops.h).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>  // NOLINT(build/c++11)
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/db_type_arg.h"
#include "checkpoint/ops/save_load_ops.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/workspace.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

// `indices` cut into at most `parts` consecutive, non-empty spans of about
// equal bytes (`bytes[b]` each, `total` in all).
std::vector<absl::Span<const int>> SplitByBytes(
    const std::vector<int>& indices, const std::vector<int64_t>& bytes,
    int64_t total, int parts) {
  std::vector<absl::Span<const int>> spans;
  size_t begin = 0;
  int64_t taken = 0;
  for (int part = 1; part <= parts; ++part) {
    size_t end = indices.size();
    if (part < parts) {
      // total * part / parts, without overflowing.
      const int64_t goal = total / parts * part + total % parts * part / parts;
      end = begin;
      while (end < indices.size() && taken < goal) {
        taken += bytes[indices[end]];
        ++end;
      }
    }
    if (end > begin) {
      spans.push_back(absl::MakeConstSpan(indices).subspan(begin, end - begin));
    }
    begin = end;
  }
  return spans;
}

class LoadOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    if (InputSize() != 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "takes no inputs (reading from DB reader blobs is not "
                   "supported); name the databases with 'db' or 'dbs'");
    }
    JG_RETURN_IF_ERROR(InitDbs());
    load_all_ = GetArg<bool>("load_all", false);
    allow_incomplete_ = GetArg<bool>("allow_incomplete", false);
    verify_checksums_ = GetArg<bool>("verify_checksums", true);
    threads_ = GetArg<int>("threads", 0);
    if (threads_ < 0) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("argument 'threads' must be 0 (automatic) or "
                                "more, not ",
                                threads_));
    }
    add_prefix_ = GetArg<std::string>("add_prefix", "");
    strip_prefix_ = GetArg<std::string>("strip_prefix", "");
    if (HasArg("expected_node")) {
      expected_node_ = GetArg<std::string>("expected_node", "");
    }
    if (const int64_t epoch = GetArg<int64_t>("expected_epoch", -1);
        epoch >= 0) {
      expected_epoch_ = epoch;
    }
    return InitWanted();
  }

  absl::Status Run() override { return Annotate(Load()); }

 private:
  absl::Status InitDbs() {
    const std::string db = GetArg<std::string>("db", "");
    if (!db.empty()) dbs_.push_back(db);
    for (std::string& path : GetRepeatedArg<std::string>("dbs")) {
      if (path.empty()) {
        return Error(absl::StatusCode::kInvalidArgument,
                     "argument 'dbs' has an empty path");
      }
      dbs_.push_back(std::move(path));
    }
    if (dbs_.empty()) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "argument 'db' or 'dbs' (the database paths) is required");
    }
    for (size_t i = 0; i < dbs_.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (dbs_[i] == dbs_[j]) {
          return Error(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("database ", dbs_[i], " is listed twice"));
        }
      }
    }
    JG_ASSIGN_OR_RETURN(db_type_, GetDbTypeArg(*this));
    return absl::OkStatus();
  }

  // Maps the name each output is loaded from to its index.
  absl::Status InitWanted() {
    sources_ = GetRepeatedArg<std::string>("source_blob_names");
    if (!sources_.empty()) {
      if (!strip_prefix_.empty() || load_all_) {
        return Error(absl::StatusCode::kInvalidArgument,
                     "source_blob_names cannot be used with strip_prefix or "
                     "load_all");
      }
      if (static_cast<int>(sources_.size()) != OutputSize()) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("source_blob_names has ", sources_.size(),
                                  " names for ", OutputSize(), " outputs"));
      }
    }
    if (load_all_) return absl::OkStatus();
    if (!sources_.empty()) {
      // Two stored blobs into one output would race between the reading
      // threads (and the second would win anyway).
      absl::flat_hash_set<absl::string_view> outputs;
      for (int i = 0; i < OutputSize(); ++i) {
        if (!outputs.insert(OutputName(i)).second) {
          return Error(
              absl::StatusCode::kInvalidArgument,
              absl::StrCat("output '", OutputName(i), "' is listed twice"));
        }
      }
    }
    wanted_.reserve(OutputSize());
    wanted_names_.reserve(OutputSize());
    for (int i = 0; i < OutputSize(); ++i) {
      const std::string& name = sources_.empty() ? OutputName(i) : sources_[i];
      if (!wanted_.emplace(name, i).second) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(sources_.empty() ? "output" : "source blob",
                                  " '", name, "' is listed twice"));
      }
      wanted_names_.push_back(name);
    }
    return absl::OkStatus();
  }

  // The name a stored blob is loaded as: strip_prefix removed (up to and
  // including its first occurrence), then add_prefix prepended.
  std::string LoadedName(absl::string_view stored) const {
    size_t start = 0;
    if (!strip_prefix_.empty()) {
      const size_t pos = stored.find(strip_prefix_);
      if (pos != absl::string_view::npos) start = pos + strip_prefix_.size();
    }
    return absl::StrCat(add_prefix_, stored.substr(start));
  }

  absl::Status Load() {
    // One assembler per database and part (a blob's pieces all go to one).
    std::vector<std::unique_ptr<BlobAssembler>> assemblers;
    // Loaded name -> the database it came from, to reject duplicates.
    absl::flat_hash_map<std::string, std::string> source_db;
    // Which wanted names (by output index) some database holds.
    std::vector<bool> found(load_all_ ? 0 : wanted_names_.size(), false);
    for (const std::string& path : dbs_) {
      JG_RETURN_IF_ERROR(LoadDb(path, &assemblers, &source_db, &found));
    }
    for (const auto& assembler : assemblers) {
      if (absl::Status status = assembler->Finish(); !status.ok()) {
        return absl::Status(
            status.code(),
            absl::StrCat("loading from ", absl::StrJoin(dbs_, ", "), ": ",
                         status.message()));
      }
    }
    if (load_all_ || allow_incomplete_) return absl::OkStatus();
    // Every blob found was read in full: each of its listed values was
    // added, and Finish (or AddWhole) found it complete.
    std::vector<std::string> missing;
    for (size_t i = 0; i < wanted_names_.size(); ++i) {
      if (!found[i]) missing.emplace_back(wanted_names_[i]);
    }
    if (missing.empty()) return absl::OkStatus();
    return absl::NotFoundError(
        absl::StrCat("expected to load ", wanted_names_.size(), " blobs from ",
                     absl::StrJoin(dbs_, ", "), ", got ",
                     wanted_names_.size() - missing.size(),
                     "; missing: ", absl::StrJoin(missing, ", ")));
  }

  // How many threads read a database whose wanted values are `blobs` blobs
  // of `bytes` in all: with `threads` 0, one unless there is enough to read
  // that a thread pays for itself, then one per core, up to 4.
  int PartsFor(size_t blobs, int64_t bytes) const {
    constexpr int64_t kMaxThreads = 64;
    if (threads_ > 0) {
      return static_cast<int>(std::min<int64_t>(
          {threads_, kMaxThreads, std::max<int64_t>(blobs, 1)}));
    }
    constexpr int64_t kBytesPerThread = 16 << 20;
    constexpr size_t kBlobsPerThread = 4096;
    const int64_t by_size = std::max<int64_t>(
        bytes / kBytesPerThread, static_cast<int64_t>(blobs / kBlobsPerThread));
    const int64_t cores =
        std::max<int64_t>(1, std::thread::hardware_concurrency());
    return static_cast<int>(
        std::clamp<int64_t>(by_size, 1, std::min<int64_t>(cores, 4)));
  }

  absl::Status LoadDb(const std::string& path,
                      std::vector<std::unique_ptr<BlobAssembler>>* assemblers,
                      absl::flat_hash_map<std::string, std::string>* source_db,
                      std::vector<bool>* found) {
    DbOptions options;
    // Every value is checked against the blob index's CRC-32C, end to end;
    // LevelDB's block checksums would check the same bytes again, 4x slower.
    options.verify_checksums = false;
    JG_ASSIGN_OR_RETURN(
        std::unique_ptr<DB> db,
        DbRegistry::Global().Open(db_type_, path, DbMode::kRead, options));
    JG_ASSIGN_OR_RETURN(const CompactBlobIndex index,
                        ReadCompactBlobIndex(db.get()));
    if (expected_node_.has_value() || expected_epoch_.has_value()) {
      // Before any value is read: a database of another node or epoch is
      // damage, and so is one missing a file it recorded.
      JG_RETURN_IF_ERROR(
          CheckIndexOwner(path, index, expected_node_, expected_epoch_));
      JG_RETURN_IF_ERROR(
          VerifyRecordedFiles(db.get(), index, VerifyDepth::kValues));
    }

    // The blobs of this database to load, their names and targets, indexed
    // like the index's blobs.
    std::vector<int> indices;
    // The names blobs are loaded as: the stored names themselves, or, when
    // a prefix renames them, strings of `renamed` (reserved in full, so that
    // views of them stay valid).
    const bool renames = !strip_prefix_.empty() || !add_prefix_.empty();
    std::vector<std::string> renamed;
    if (renames) renamed.reserve(index.blob_size());
    std::vector<absl::string_view> names(index.blob_size());
    std::vector<Blob*> targets(index.blob_size(), nullptr);
    std::vector<int64_t> blob_bytes(index.blob_size(), 0);
    absl::flat_hash_map<std::string, int> in_this_db;
    // The output after the last one found: outputs listed in the index's
    // order (as Save's) are found without hashing their names.
    int next_output = 0;
    for (int b = 0; b < index.blob_size(); ++b) {
      const absl::string_view stored = index.name(b);
      absl::string_view name = stored;
      if (renames) name = renamed.emplace_back(LoadedName(stored));
      Blob* target = nullptr;
      if (load_all_) {
        target = workspace()->CreateBlob(name);
      } else {
        int output = next_output;
        if (output >= static_cast<int>(wanted_names_.size()) ||
            wanted_names_[output] != name) {
          auto it = wanted_.find(name);
          if (it == wanted_.end()) continue;
          output = it->second;
        }
        next_output = output + 1;
        target = OutputBlob(output);
        (*found)[output] = true;
      }
      // Stored names are unique (ValidateBlobIndex) and add_prefix keeps
      // them so: only strip_prefix can make two of them one.
      if (!strip_prefix_.empty()) {
        if (auto [it, inserted] = in_this_db.emplace(name, b); !inserted) {
          return absl::InvalidArgumentError(absl::StrCat(
              "blobs '", index.name(it->second), "' and '", stored, "' of ",
              path, " would both be loaded as '", name, "'"));
        }
      }
      if (dbs_.size() > 1) {
        if (auto [it, inserted] = source_db->emplace(name, path); !inserted) {
          return absl::InvalidArgumentError(absl::StrCat(
              "duplicate blob '", name, "' in ", it->second, " and ", path));
        }
      }
      indices.push_back(b);
      // What the index says this blob's values hold bounds the tensor its
      // first value may declare. Only a value's own size is checked against
      // the index when it is read, so a damaged index can still raise this
      // bound, up to its total_bytes.
      for (int k = 0; k < index.key_size(b); ++k) {
        blob_bytes[b] += index.value_bytes(b, k);
      }
      names[b] = name;
      targets[b] = target;
    }
    if (indices.empty()) return db->Close();
    // The blobs this database holds, then those it lists by reference (an
    // incremental save), from the database of each epoch that holds them,
    // each database opened once. They are read in batches of up to
    // kMaxOpenDbs databases, all of a batch by one set of threads: a restore
    // ten databases deep then reads as one of a full save does, without a
    // pause between databases, and a chain of a thousand (full_every's
    // bound) does not hold a thousand open at once.
    constexpr size_t kMaxOpenDbs = 16;
    HeldAndReferenced split = SplitByHolder(index, indices);
    std::vector<ValueSource> batch;
    batch.push_back({db.get(), path, std::move(split.held)});
    std::vector<std::unique_ptr<DB>> holders;
    for (size_t r = 0; r <= split.referenced.size(); ++r) {
      if (r == split.referenced.size() || batch.size() == kMaxOpenDbs) {
        JG_RETURN_IF_ERROR(
            ReadValues(index, batch, names, targets, blob_bytes, assemblers));
        for (std::unique_ptr<DB>& holder : holders) {
          JG_RETURN_IF_ERROR(holder->Close());
        }
        holders.clear();
        batch.clear();
      }
      if (r == split.referenced.size()) break;
      auto& [epoch, blobs] = split.referenced[r];
      JG_ASSIGN_OR_RETURN(
          holders.emplace_back(),
          OpenReferencedDb(db_type_, path, index, epoch, VerifyDepth::kValues));
      batch.push_back(
          {holders.back().get(), holders.back()->path(), std::move(blobs)});
    }
    return db->Close();
  }

  // A database and the blobs (indices into one blob index) to read from it.
  struct ValueSource {
    DB* db;
    std::string path;
    std::vector<int> indices;
  };

  // Reads the values of the blobs of `sources` (indices into `index`),
  // checked against `index`, into `targets`: each source in parts of about
  // equal bytes, each part through its own cursor into its own assembler
  // (the targets are distinct blobs), the parts of every source shared out
  // to one set of threads.
  absl::Status ReadValues(
      const CompactBlobIndex& index, std::vector<ValueSource>& sources,
      const std::vector<absl::string_view>& names,
      const std::vector<Blob*>& targets, const std::vector<int64_t>& blob_bytes,
      std::vector<std::unique_ptr<BlobAssembler>>* assemblers) {
    // In key order (usually the index's already), so that the first part's
    // error is the one a single reader would meet first.
    auto first_key = [&](int b) {
      return index.key_size(b) == 0 ? absl::string_view() : index.key(b, 0);
    };
    auto by_key = [&](int a, int b) { return first_key(a) < first_key(b); };
    // No overflow: the index refuses sizes whose total overflows.
    std::vector<int64_t> source_bytes(sources.size(), 0);
    int64_t total_bytes = 0;
    size_t total_blobs = 0;
    for (size_t s = 0; s < sources.size(); ++s) {
      std::vector<int>& indices = sources[s].indices;
      if (!std::is_sorted(indices.begin(), indices.end(), by_key)) {
        std::sort(indices.begin(), indices.end(), by_key);
      }
      for (int b : indices) source_bytes[s] += blob_bytes[b];
      total_bytes += source_bytes[s];
      total_blobs += indices.size();
    }
    const int threads = PartsFor(total_blobs, total_bytes);
    // The parts, source by source: a source gets its share of the threads
    // by its bytes, at least one part if it has blobs.
    struct Part {
      const ValueSource* source;
      absl::Span<const int> blobs;
    };
    std::vector<Part> parts;
    for (size_t s = 0; s < sources.size(); ++s) {
      if (sources[s].indices.empty()) continue;
      // In 128 bits: a damaged index may claim sizes near 2^63.
      const int64_t share =
          total_bytes == 0
              ? 1
              : static_cast<int64_t>(
                    (static_cast<__int128>(source_bytes[s]) * threads +
                     total_bytes - 1) /
                    total_bytes);
      for (absl::Span<const int> span :
           SplitByBytes(sources[s].indices, blob_bytes, source_bytes[s],
                        static_cast<int>(std::clamp<int64_t>(
                            share, 1, std::max(threads, 1))))) {
        parts.push_back({&sources[s], span});
      }
    }
    if (parts.empty()) return absl::OkStatus();
    std::vector<absl::Status> statuses(parts.size());
    const size_t first = assemblers->size();
    for (size_t i = 0; i < parts.size(); ++i) {
      assemblers->push_back(std::make_unique<BlobAssembler>());
    }
    std::atomic<size_t> next_part{0};
    // The first part (in order) known to have failed: parts after it are
    // skipped, parts before it still read, so that the error returned is
    // the first a single reader would meet.
    std::atomic<size_t> first_failed{parts.size()};
    auto read_part = [&](size_t i) {
      const Part& part = parts[i];
      BlobAssembler& assembler = *(*assemblers)[first + i];
      // A blob of one value needs no state between values (AddWhole).
      assembler.Reserve(static_cast<int>(
          std::count_if(part.blobs.begin(), part.blobs.end(),
                        [&](int b) { return index.key_size(b) > 1; })));
      statuses[i] = ScanDbValues(
          part.source->db, index, part.blobs, verify_checksums_,
          [&](int b, int, absl::string_view value) -> absl::Status {
            absl::Status status =
                index.key_size(b) == 1
                    ? assembler.AddWhole(names[b], value, targets[b],
                                         blob_bytes[b])
                    : assembler.Add(names[b], value, targets[b], blob_bytes[b]);
            if (status.ok()) return status;
            return absl::Status(status.code(),
                                absl::StrCat("loading from ", part.source->path,
                                             ": ", status.message()));
          });
      if (!statuses[i].ok()) {
        size_t seen = first_failed.load();
        while (i < seen && !first_failed.compare_exchange_weak(seen, i)) {
        }
      }
    };
    // Parts in order, to whichever thread is free; none after a part that
    // failed (the load fails anyway).
    auto work = [&] {
      for (size_t i = next_part.fetch_add(1); i < parts.size();
           i = next_part.fetch_add(1)) {
        if (i > first_failed.load()) break;
        read_part(i);
      }
    };
    std::vector<std::thread> workers;
    const size_t helpers =
        std::min<size_t>(static_cast<size_t>(std::max(threads, 1)),
                         parts.size()) -
        1;
    workers.reserve(helpers);
    for (size_t i = 0; i < helpers; ++i) {
      try {
        workers.emplace_back(work);
      } catch (const std::system_error&) {
        // No thread to be had (a process at its limit): fewer threads.
        break;
      }
    }
    work();
    for (std::thread& worker : workers) worker.join();
    // The error of the first part in order, as one reader would see it.
    for (const absl::Status& status : statuses) JG_RETURN_IF_ERROR(status);
    return absl::OkStatus();
  }

  std::vector<std::string> dbs_;
  std::string db_type_;
  bool load_all_ = false;
  bool allow_incomplete_ = false;
  bool verify_checksums_ = true;
  int threads_ = 0;
  std::string add_prefix_;
  std::string strip_prefix_;
  std::optional<std::string> expected_node_;
  std::optional<int64_t> expected_epoch_;
  std::vector<std::string> sources_;  // the source_blob_names argument
  // Name to load -> output index, and the names in output order; views of
  // the operator's outputs or of sources_.
  absl::flat_hash_map<absl::string_view, int> wanted_;
  std::vector<absl::string_view> wanted_names_;
};

JG_REGISTER_OPERATOR(Load, LoadOp);

}  // namespace
}  // namespace jobgraph

// The Save operator and WriteCheckpointDb, the commit protocol of one
// checkpoint database (see save_load_ops.h), with the steps around its
// temporary database that CopyCheckpointDb shares (temp_db.h).

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/ops/db_type_arg.h"
#include "checkpoint/ops/save_load_ops.h"
#include "checkpoint/ops/temp_db.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/failpoint.h"
#include "checkpoint/util/file_util.h"
#include "engine/blob.h"
#include "engine/operator.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

constexpr absl::string_view kTempMarker = ".tmp-";

// Numbers the temporary databases of this process, so that concurrent saves
// of the same path never share a temporary name.
std::atomic<uint64_t> g_temp_sequence{0};

using temp_db::SplitPath;

std::string TempPath(const SplitPath& split) {
  return JoinPath(split.dir,
                  absl::StrCat(".", split.base, kTempMarker, ::getpid(), "-",
                               g_temp_sequence.fetch_add(1)));
}

void DescribeBlob(absl::string_view name, const Blob& blob,
                  CheckpointBlobInfo* info) {
  info->set_name(name.data(), name.size());
  if (blob.IsType<Tensor>()) {
    const Tensor& tensor = blob.Get<Tensor>();
    info->set_type(kTensorTypeName);
    for (int64_t d : tensor.shape()) info->add_dims(d);
    info->set_data_type(tensor.dtype());
  } else if (const BlobSerializer* serializer =
                 FindBlobSerializer(blob.type())) {
    info->set_type(serializer->type_name());
  }
}

// What a database's writing produced: the bytes of the blobs' values
// (those held by reference included) and its blob index.
struct Written {
  int64_t total_bytes = 0;
  std::string blob_index;
};

// Checks what can be checked before writing anything, so that a bad blob
// fails the save at once instead of after gigabytes of writing.
// `blobs` and `referenced` are sorted by name.
absl::Status CheckBlobs(const std::vector<BlobToSave>& blobs,
                        const std::vector<CheckpointBlobInfo>& referenced,
                        const SerializationOptions& options) {
  if (blobs.empty() && referenced.empty()) {
    return absl::InvalidArgumentError("there are no blobs to save");
  }
  for (size_t i = 0, j = 0; i < blobs.size() && j < referenced.size();) {
    const int order = blobs[i].name.compare(referenced[j].name());
    if (order == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blob '", blobs[i].name, "' is both written and held by reference"));
    }
    if (order < 0) {
      ++i;
    } else {
      ++j;
    }
  }
  for (const CheckpointBlobInfo& info : referenced) {
    CHECK(info.has_stored_in_epoch())
        << "referenced blob '" << info.name() << "' without its epoch";
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    const BlobToSave& b = blobs[i];
    CHECK(b.blob != nullptr) << "BlobToSave '" << b.name << "' without a blob";
    if (b.name == kBlobIndexKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob name '", b.name,
                       "' is reserved for the database's blob index"));
    }
    // Checked here, not only in the Save op, so that every caller of
    // WriteCheckpointDb writes databases that Load accepts.
    if (absl::StrContains(b.name, kChunkSeparator)) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob name '", b.name, "' contains '", kChunkSeparator,
                       "', which separates chunk indexes in database keys"));
    }
    if (i > 0 && blobs[i - 1].name == b.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicated blob name '", b.name, "'"));
    }
    if (!b.blob->IsInitialized() ||
        (!b.blob->IsType<Tensor>() &&
         FindBlobSerializer(b.blob->type()) == nullptr)) {
      // SerializeBlob refuses these before calling the sink; its message is
      // the one users should see.
      absl::Status status =
          SerializeBlob(b.name, *b.blob, options, [](std::string, std::string) {
            return absl::InternalError("unexpected serialized value");
          });
      CHECK(!status.ok()) << "SerializeBlob accepted blob '" << b.name << "'";
      return status;
    }
  }
  return absl::OkStatus();
}

// Streams every blob into `db`, then the blob index (listing the
// referenced blobs too, in name order), and closes `db` (which makes it
// durable).
absl::StatusOr<Written> WriteBlobs(DB* db, const std::vector<BlobToSave>& blobs,
                                   const CheckpointDbOptions& options) {
  JG_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, db->NewWriter());
  BlobIndexBuilder builder(options.node, options.epoch);
  builder.SetFilesListed(db->ListsFiles());
  builder.ExpectBlobs(blobs.size() + options.referenced.size());
  auto next_referenced = options.referenced.begin();
  auto reference_up_to = [&](absl::string_view name) {
    for (; next_referenced != options.referenced.end() &&
           next_referenced->name() < name;
         ++next_referenced) {
      builder.AddReferenced(*next_referenced);
    }
  };
  for (const BlobToSave& b : blobs) {
    reference_up_to(b.name);
    DescribeBlob(b.name, *b.blob, builder.StartBlob());
    // Each value checksummed once, for the index and the database's own
    // blocks. A tensor's elements are not copied: the database may write
    // them from the blob's memory until it is closed, below, and `blobs`
    // stay unchanged while this runs (WriteCheckpointDb's contract).
    JG_RETURN_IF_ERROR(SerializeBlobBorrowing(
        b.name, *b.blob, options.serialization,
        [&](std::string key, std::string head, absl::string_view body) {
          const uint32_t body_crc = Crc32c(body);
          builder.AddValueWithCrc(
              key, head.size() + body.size(),
              crc32c::Combine(Crc32c(head), body_crc, body.size()));
          return writer->PutBorrowed(key, head, body, body_crc);
        }));
  }
  // The referenced blobs after the last one written (an empty name is no
  // blob's: every name sorts after it, so pass the end).
  for (; next_referenced != options.referenced.end(); ++next_referenced) {
    builder.AddReferenced(*next_referenced);
  }
  Written written;
  written.total_bytes = builder.total_bytes();
  JG_ASSIGN_OR_RETURN(written.blob_index, builder.Finish());
  // Last, so that its presence proves every value before it was written.
  JG_RETURN_IF_ERROR(writer->Put(kBlobIndexKey, written.blob_index));
  JG_RETURN_IF_ERROR(writer->Flush());
  writer.reset();
  JG_RETURN_IF_ERROR(db->Close());
  return written;
}

absl::StatusOr<Written> OpenAndWrite(const DbType& type,
                                     const std::string& path,
                                     const std::vector<BlobToSave>& blobs,
                                     const CheckpointDbOptions& options) {
  // Nothing reads the database before it is closed.
  DbOptions db_options = options.db;
  db_options.write_only = true;
  JG_ASSIGN_OR_RETURN(std::unique_ptr<DB> db,
                      type.Open(path, DbMode::kNew, db_options));
  // On error `db` is destroyed without Close(): nothing is made durable.
  return WriteBlobs(db.get(), blobs, options);
}

// Removes what a failed save or copy left at `temp`, if anything.
void RemoveTemp(const DbType& type, const std::string& temp) {
  absl::Status status = type.Remove(temp);
  if (!status.ok() && !absl::IsNotFound(status)) {
    LOG(WARNING) << "cannot remove the temporary database " << temp
                 << " of a failed save or copy: " << status;
  }
}

// Steps 1-3 of WriteCheckpointDb.
absl::StatusOr<Written> WriteAndInstall(const DbType& type,
                                        const SplitPath& split,
                                        const std::vector<BlobToSave>& blobs,
                                        const CheckpointDbOptions& options) {
  Written written;
  JG_RETURN_IF_ERROR(temp_db::InstallThroughTemp(
      type, split, "save.after_db_write",
      [&](const std::string& temp) -> absl::Status {
        JG_ASSIGN_OR_RETURN(written, OpenAndWrite(type, temp, blobs, options));
        return absl::OkStatus();
      }));
  JG_RETURN_IF_ERROR(Failpoint("save.after_rename"));
  return written;
}

}  // namespace

namespace temp_db {

absl::StatusOr<SplitPath> Split(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t slash = trimmed.rfind('/');
  std::string base =
      slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path,
                     "' cannot name a checkpoint database: it has no last "
                     "component to write under"));
  }
  return SplitPath{trimmed, ParentDir(trimmed), std::move(base)};
}

absl::Status InstallThroughTemp(
    const DbType& type, const SplitPath& split, absl::string_view failpoint,
    const std::function<absl::Status(const std::string& temp)>& write) {
  // Fail before writing anything if `path` cannot take the database.
  JG_RETURN_IF_ERROR(type.CheckInstallable(split.path));
  const std::string temp = TempPath(split);
  // Only a crashed process with the same pid leaves this exact name.
  absl::Status stale = type.Remove(temp);
  if (!stale.ok() && !absl::IsNotFound(stale)) return stale;

  absl::Status status = write(temp);
  if (status.ok()) status = Failpoint(failpoint);
  if (status.ok()) status = type.Install(temp, split.path);
  if (!status.ok()) {
    // If Install swapped the databases but could not make that durable,
    // `temp` holds the old copy; removing it is right either way.
    RemoveTemp(type, temp);
    return status;
  }
  return absl::OkStatus();
}

}  // namespace temp_db

bool IsSaveTempName(absl::string_view basename) {
  if (!absl::ConsumePrefix(&basename, ".")) return false;
  const size_t marker = basename.rfind(kTempMarker);
  if (marker == absl::string_view::npos || marker == 0) return false;
  absl::string_view suffix = basename.substr(marker + kTempMarker.size());
  const size_t dash = suffix.find('-');
  if (dash == absl::string_view::npos) return false;
  auto all_digits = [](absl::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
  };
  return all_digits(suffix.substr(0, dash)) &&
         all_digits(suffix.substr(dash + 1));
}

absl::StatusOr<int64_t> WriteCheckpointDb(const DbType& type,
                                          const std::string& path,
                                          std::vector<BlobToSave> blobs,
                                          const CheckpointDbOptions& options,
                                          std::string* blob_index) {
  absl::StatusOr<Written> written = [&]() -> absl::StatusOr<Written> {
    JG_ASSIGN_OR_RETURN(SplitPath split, temp_db::Split(path));
    // LevelDB writes keys that arrive in sorted order fastest (tables need
    // no compaction); blob order is all Save controls. Sorted, duplicates
    // are neighbours.
    std::stable_sort(blobs.begin(), blobs.end(),
                     [](const BlobToSave& a, const BlobToSave& b) {
                       return a.name < b.name;
                     });
    auto by_name = [](const CheckpointBlobInfo& a,
                      const CheckpointBlobInfo& b) {
      return a.name() < b.name();
    };
    if (!std::is_sorted(options.referenced.begin(), options.referenced.end(),
                        by_name)) {
      CheckpointDbOptions sorted = options;
      std::sort(sorted.referenced.begin(), sorted.referenced.end(), by_name);
      JG_RETURN_IF_ERROR(
          CheckBlobs(blobs, sorted.referenced, sorted.serialization));
      return WriteAndInstall(type, split, blobs, sorted);
    }
    JG_RETURN_IF_ERROR(
        CheckBlobs(blobs, options.referenced, options.serialization));
    return WriteAndInstall(type, split, blobs, options);
  }();
  if (!written.ok()) {
    return absl::Status(written.status().code(),
                        absl::StrCat("saving checkpoint ", path, ": ",
                                     written.status().message()));
  }
  if (blob_index != nullptr) *blob_index = std::move(written->blob_index);
  return written->total_bytes;
}

absl::StatusOr<int64_t> WriteCheckpointDb(absl::string_view db_type,
                                          const std::string& path,
                                          std::vector<BlobToSave> blobs,
                                          const CheckpointDbOptions& options,
                                          std::string* blob_index) {
  absl::StatusOr<const DbType*> type = DbRegistry::Global().Find(db_type);
  if (!type.ok()) {
    return absl::Status(type.status().code(),
                        absl::StrCat("saving checkpoint ", path, ": ",
                                     type.status().message()));
  }
  return WriteCheckpointDb(**type, path, std::move(blobs), options, blob_index);
}

namespace {

// Save(blobs...): see save_load_ops.h.
class SaveOp final : public OperatorBase {
 public:
  using OperatorBase::OperatorBase;

  absl::Status Init() override {
    JG_RETURN_IF_ERROR(CheckArity(1, kUnbounded, 0, 1));
    JG_ASSIGN_OR_RETURN(db_, GetRequiredStringArg("db", "the database path"));
    JG_ASSIGN_OR_RETURN(db_type_, GetDbTypeArg(*this));
    if (HasArg("chunk_size")) {
      return Error(absl::StatusCode::kInvalidArgument,
                   "argument 'chunk_size' (elements) is not supported; "
                   "chunks are bounded by 'chunk_bytes'");
    }
    options_.node = GetArg<std::string>("node", "");
    options_.epoch = GetArg<int64_t>("epoch", 0);
    options_.serialization.chunk_bytes =
        GetArg<int64_t>("chunk_bytes", options_.serialization.chunk_bytes);
    if (options_.serialization.chunk_bytes <= 0 ||
        options_.serialization.chunk_bytes > kMaxChunkBytes) {
      return Error(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("chunk_bytes must be in [1, ", kMaxChunkBytes,
                                "], got ", options_.serialization.chunk_bytes));
    }
    return ComputeNames();
  }

  absl::Status Run() override {
    std::vector<BlobToSave> blobs;
    blobs.reserve(InputSize());
    for (int i = 0; i < InputSize(); ++i) {
      blobs.push_back({names_[i], InputBlob(i)});
    }
    absl::StatusOr<int64_t> written =
        WriteCheckpointDb(db_type_, db_, std::move(blobs), options_);
    if (!written.ok()) {
      return Annotate(written.status());
    }
    // The optional output tells the caller what was written without
    // opening the database again.
    if (OutputSize() == 1) *Output(0) = Tensor::Scalar<int64_t>(*written);
    return absl::OkStatus();
  }

 private:
  // The stored name of each input, from strip_prefix or
  // blob_name_overrides, checked for uniqueness.
  absl::Status ComputeNames() {
    const std::string strip_prefix = GetArg<std::string>("strip_prefix", "");
    const std::vector<std::string> overrides =
        GetRepeatedArg<std::string>("blob_name_overrides");
    if (!overrides.empty()) {
      if (!strip_prefix.empty()) {
        return Error(absl::StatusCode::kInvalidArgument,
                     "blob_name_overrides and strip_prefix cannot be used "
                     "together");
      }
      if (static_cast<int>(overrides.size()) != InputSize()) {
        return Error(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("blob_name_overrides has ", overrides.size(),
                                  " names for ", InputSize(), " inputs"));
      }
      renamed_ = overrides;
      names_.assign(renamed_.begin(), renamed_.end());
    } else {
      // Views of the input names (or of their ends): a save of 100,000
      // blobs keeps no second copy of their names.
      names_.reserve(InputSize());
      for (int i = 0; i < InputSize(); ++i) {
        absl::string_view name = InputName(i);
        const size_t pos = strip_prefix.empty() ? absl::string_view::npos
                                                : name.find(strip_prefix);
        if (pos != absl::string_view::npos) {
          name.remove_prefix(pos + strip_prefix.size());
        }
        names_.push_back(name);
      }
    }
    absl::flat_hash_map<absl::string_view, int> first_input;
    first_input.reserve(InputSize());
    for (int i = 0; i < InputSize(); ++i) {
      const absl::string_view name = names_[i];
      absl::string_view problem;
      if (name.empty()) {
        problem = "an empty name";
      } else if (absl::StrContains(name, kChunkSeparator)) {
        problem = "a name containing the chunk separator '#%'";
      } else if (name == kBlobIndexKey) {
        problem = "the name reserved for the database's blob index";
      }
      if (!problem.empty()) {
        return Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat("input '", InputName(i), "' would be stored under ",
                         problem, " ('", name, "')"));
      }
      auto [it, inserted] = first_input.emplace(name, i);
      if (!inserted) {
        return Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat("duplicated blob name '", name, "' (inputs '",
                         InputName(it->second), "' and '", InputName(i), "')"));
      }
    }
    return absl::OkStatus();
  }

  std::string db_;
  std::string db_type_;
  CheckpointDbOptions options_;
  // The stored name of each input: views of InputName(i) or of renamed_.
  std::vector<absl::string_view> names_;
  std::vector<std::string> renamed_;  // blob_name_overrides
};

JG_REGISTER_OPERATOR(Save, SaveOp);

}  // namespace
}  // namespace jobgraph

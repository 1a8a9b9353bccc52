// The commands that take one or two databases: show, dump and diff.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/db/db.h"
#include "checkpoint/db/db_registry.h"
#include "checkpoint/ops/blob_index.h"
#include "engine/blob.h"
#include "engine/counter.h"
#include "engine/data/file_cursor.h"
#include "engine/data/shuffle_cursor.h"
#include "engine/data/tree_cursor.h"
#include "engine/serialization.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "proto/jobgraph.pb.h"
#include "tools/ckpt/ckpt.h"
#include "tools/ckpt/crc32c_combine.h"
#include "tools/ckpt/output.h"
#include "tools/ckpt/references.h"

namespace jobgraph {
namespace ckpt {
namespace {

// Reads the blob index of database `path`; on failure prints the error and
// returns nullopt (the command then exits with kExitUsage: a database that
// does not open or lacks a blob index is unreadable input here; `verify`
// judges damage).
std::optional<BlobIndex> ReadBlobIndexOrReport(const std::string& db_type,
                                               const std::string& path,
                                               std::ostream& err) {
  absl::StatusOr<BlobIndex> index = ReadBlobIndexAt(db_type, path);
  if (!index.ok()) {
    err << "ckpt: " << index.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(index);
}

bool IsTensor(const CheckpointBlobInfo& blob) {
  return blob.type() == kTensorTypeName;
}

int64_t BlobBytes(const CheckpointBlobInfo& blob) {
  int64_t total = 0;
  for (int64_t bytes : blob.value_bytes()) total += bytes;
  return total;
}

// The CRC-32C of the blob's values concatenated in blob index order; for a
// single value, that value's CRC-32C.
uint32_t BlobCrc(const CheckpointBlobInfo& blob) {
  uint32_t crc = 0;  // the CRC-32C of no bytes
  for (int i = 0; i < blob.key_size(); ++i) {
    crc = Crc32cCombine(crc, blob.value_crc32c(i),
                        static_cast<uint64_t>(blob.value_bytes(i)));
  }
  return crc;
}

std::vector<int64_t> ReferencedEpochs(const BlobIndex& index) {
  return {index.referenced_epoch().begin(), index.referenced_epoch().end()};
}

std::string DtypeOf(const CheckpointBlobInfo& blob) {
  return IsTensor(blob) ? DataTypeName(blob.data_type()) : "-";
}

std::string ShapeOf(const CheckpointBlobInfo& blob) {
  return IsTensor(blob) ? ShapeString(blob.dims()) : "-";
}

// "Tensor float[3,5]", or the type of a non-tensor blob.
std::string Describe(const CheckpointBlobInfo& blob) {
  if (!IsTensor(blob)) return Printable(blob.type());
  return absl::StrCat("Tensor ", DtypeOf(blob), ShapeOf(blob));
}

// ---------------------------------------------------------------------------
// dump: readable forms of blob values.

// `s` escaped and cut to `max_bytes` bytes, in quotes.
std::string QuotedPrefix(absl::string_view s, int64_t max_bytes) {
  const bool cut = static_cast<int64_t>(s.size()) > max_bytes;
  std::string out = absl::StrCat(
      "\"", Printable(cut ? s.substr(0, max_bytes) : s), cut ? "...\"" : "\"");
  if (cut) absl::StrAppend(&out, " (", s.size(), " bytes)");
  return out;
}

std::string FieldList(const std::vector<std::string>& fields) {
  std::vector<std::string> printable;
  for (const std::string& f : fields) printable.push_back(Printable(f));
  return absl::StrCat("[", absl::StrJoin(printable, ", "), "]");
}

// Tensor::DebugString, except that string elements are escaped and cut,
// as they may hold anything.
std::string TensorString(const Tensor& tensor, int64_t max_elements) {
  if (tensor.dtype() != STRING) return tensor.DebugString(max_elements);
  std::string out = absl::StrCat(DataTypeName(tensor.dtype()),
                                 ShapeString(tensor.shape()), " {");
  const int64_t shown = std::min(tensor.numel(), max_elements);
  const std::string* values = tensor.data<std::string>();
  for (int64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += QuotedPrefix(values[i], 8 * max_elements);
  }
  if (shown < tensor.numel()) {
    absl::StrAppend(&out, ", ... (", tensor.numel(), " in all)");
  }
  return out + "}";
}

// The value of a deserialized blob, or nullopt for a type this tool has no
// display for.
std::optional<std::string> ValueString(const Blob& blob, int64_t max_elements) {
  if (blob.IsType<Tensor>()) {
    return TensorString(blob.Get<Tensor>(), max_elements);
  }
  if (blob.IsType<Counter>()) {
    return absl::StrCat("counter ", blob.Get<Counter>().Retrieve());
  }
  if (blob.IsType<std::string>()) {
    return QuotedPrefix(blob.Get<std::string>(), 8 * max_elements);
  }
  if (blob.IsType<TreeCursor>()) {
    const TreeCursor& cursor = blob.Get<TreeCursor>();
    return absl::StrCat("TreeCursor offset ", cursor.offset(), ", fields ",
                        FieldList(cursor.fields()));
  }
  if (blob.IsType<ShuffleCursor>()) {
    const ShuffleCursor& cursor = blob.Get<ShuffleCursor>();
    const ShuffleCursor::State s = cursor.state();
    return absl::StrCat("ShuffleCursor seed ", s.seed, ", epoch ", s.epoch,
                        ", position ", s.position, ", num_rows ", s.num_rows,
                        ", exhausted ", s.exhausted ? "true" : "false",
                        ", fields ", FieldList(cursor.fields()));
  }
  if (blob.IsType<FileCursor>()) {
    const FileCursor& cursor = blob.Get<FileCursor>();
    return absl::StrCat("FileCursor path ", QuotedPrefix(cursor.path(), 4096),
                        ", offset ", cursor.offset());
  }
  return std::nullopt;
}

// "node trainer_0, epoch 3", and what references hold when they hold any.
std::string DiffHeader(const BlobIndex& index) {
  std::string header =
      absl::StrCat("node ", Printable(index.node()), ", epoch ", index.epoch());
  if (index.referenced_epoch_size() > 0) {
    absl::StrAppend(
        &header, ", ",
        ReferencedText(index.referenced_bytes(), ReferencedEpochs(index)));
  }
  return header;
}

// Reads every value that `index` (of the database at `path`) lists by
// reference from its holder, checked against the entry: OK for a database
// without references, without reading anything.
absl::Status CheckReferencedValues(const std::string& db_type,
                                   const std::string& path,
                                   const BlobIndex& index) {
  if (index.referenced_epoch_size() == 0) return absl::OkStatus();
  std::optional<CompactBlobIndex> compact =
      CompactBlobIndex::Decode(index.SerializeAsString());
  if (!compact.has_value()) {
    // ReadBlobIndex decoded it this way: only a bug gets here.
    return absl::InternalError(
        absl::StrCat("the blob index of ", path, " does not decode again"));
  }
  std::vector<int> all(compact->blob_size());
  std::iota(all.begin(), all.end(), 0);
  for (const auto& [epoch, blobs] : SplitByHolder(*compact, all).referenced) {
    JG_RETURN_IF_ERROR(ScanReferenced(
        db_type, path, *compact, epoch, blobs, VerifyDepth::kValues,
        [](int, int, absl::string_view) { return absl::OkStatus(); }));
  }
  return absl::OkStatus();
}

}  // namespace

int Show(const ShowOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<BlobIndex> index =
      ReadBlobIndexOrReport(options.db_type, options.db, err);
  if (!index.has_value()) return kExitUsage;
  const bool references = index->referenced_epoch_size() > 0;

  if (options.format == OutputFormat::kJson) {
    JsonWriter json(out);
    json.BeginObject();
    json.Field("path", options.db);
    json.Field("format_version", index->format_version());
    json.Field("node", index->node());
    json.Field("epoch", index->epoch());
    json.Field("created_unix_micros", index->created_unix_micros());
    json.Field("total_bytes", index->total_bytes());
    // Only for a database with references: the output of the others stays
    // as it was before references existed.
    if (references) {
      json.Field("referenced_bytes", index->referenced_bytes());
      json.IntArray("referenced_epochs", ReferencedEpochs(*index));
    }
    json.Key("blobs");
    json.BeginArray();
    for (const CheckpointBlobInfo& blob : index->blob()) {
      json.BeginObject();
      json.Field("name", blob.name());
      json.Field("type", blob.type());
      json.Key("dtype");
      if (IsTensor(blob)) {
        json.String(DataTypeName(blob.data_type()));
        json.IntArray("shape", std::vector<int64_t>(blob.dims().begin(),
                                                    blob.dims().end()));
      } else {
        json.Null();
        json.Key("shape");
        json.Null();
      }
      json.Field("values", blob.key_size());
      json.Field("bytes", BlobBytes(blob));
      json.Field("crc32c", CrcHex(BlobCrc(blob)));
      if (blob.has_stored_in_epoch()) {
        json.Field("stored_in_epoch", blob.stored_in_epoch());
      }
      json.Key("keys");
      json.BeginArray();
      for (int i = 0; i < blob.key_size(); ++i) {
        json.BeginObject();
        json.Field("key", blob.key(i));
        json.Field("bytes", blob.value_bytes(i));
        json.Field("crc32c", CrcHex(blob.value_crc32c(i)));
        json.EndObject();
      }
      json.EndArray();
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    out << "\n";
    return kExitOk;
  }

  int64_t values = 0;
  for (const CheckpointBlobInfo& blob : index->blob()) {
    values += blob.key_size();
  }
  out << "database " << options.db << "\n"
      << "node " << Printable(index->node()) << ", epoch " << index->epoch()
      << ", format version " << index->format_version() << ", saved "
      << FormatUnixMicros(index->created_unix_micros()) << "\n"
      << index->blob_size() << " blobs, " << values << " values, "
      << index->total_bytes() << " bytes";
  if (references) {
    out << " ("
        << ReferencedText(index->referenced_bytes(), ReferencedEpochs(*index))
        << ")";
  }
  out << "\n";
  // A column for where each blob's values are, only when some are elsewhere.
  std::vector<std::string> headers = {"NAME",   "TYPE",  "DTYPE", "SHAPE",
                                      "VALUES", "BYTES", "CRC32C"};
  std::vector<bool> right_aligned = {false, false, false, false,
                                     true,  true,  false};
  if (references) {
    headers.push_back("HELD IN");
    right_aligned.push_back(false);
  }
  TextTable table(std::move(headers), std::move(right_aligned));
  for (const CheckpointBlobInfo& blob : index->blob()) {
    std::vector<std::string> row = {Printable(blob.name()),
                                    Printable(blob.type()),
                                    DtypeOf(blob),
                                    ShapeOf(blob),
                                    absl::StrCat(blob.key_size()),
                                    absl::StrCat(BlobBytes(blob)),
                                    CrcHex(BlobCrc(blob))};
    if (references) {
      row.push_back(blob.has_stored_in_epoch()
                        ? absl::StrCat("epoch ", blob.stored_in_epoch())
                        : "-");
    }
    table.AddRow(std::move(row));
    if (!options.keys) continue;
    for (int i = 0; i < blob.key_size(); ++i) {
      std::vector<std::string> key_row = {
          absl::StrCat("  ", Printable(blob.key(i))),
          "",
          "",
          "",
          "",
          absl::StrCat(blob.value_bytes(i)),
          CrcHex(blob.value_crc32c(i))};
      if (references) key_row.push_back("");
      table.AddRow(std::move(key_row));
    }
  }
  table.Print(out);
  return kExitOk;
}

int Dump(const DumpOptions& options, std::ostream& out, std::ostream& err) {
  DbOptions db_options;
  // Every value's CRC-32C is checked against the blob index below.
  db_options.verify_checksums = false;
  absl::StatusOr<std::unique_ptr<DB>> db = DbRegistry::Global().Open(
      options.db_type, options.db, DbMode::kRead, db_options);
  if (!db.ok()) {
    err << "ckpt: " << db.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<CompactBlobIndex> index = ReadCompactBlobIndex(db->get());
  if (!index.ok()) {
    err << "ckpt: " << index.status().message() << "\n";
    return kExitUsage;
  }
  int found = -1;
  std::vector<std::string> names;
  for (int b = 0; b < index->blob_size(); ++b) {
    if (index->name(b) == options.blob) found = b;
    names.push_back(Printable(index->name(b)));
  }
  if (found < 0) {
    err << "ckpt: database " << options.db << " has no blob '"
        << Printable(options.blob)
        << "'; it has: " << absl::StrJoin(names, ", ") << "\n";
    return kExitUsage;
  }
  const CheckpointBlobInfo info = index->Entry(found);
  out << "blob: " << Printable(info.name()) << "\n"
      << "type: " << Printable(info.type()) << "\n"
      << "stored: " << info.key_size() << " value"
      << (info.key_size() == 1 ? "" : "s") << ", " << BlobBytes(info)
      << " bytes\n";
  if (index->referenced(found)) {
    // Before the value, so that an error reading it is known to be the
    // holder's.
    const int64_t epoch = index->stored_in_epoch(found);
    out << "held in: epoch " << epoch << " ("
        << ReferencedDbPath(options.db, index->node(), epoch) << ")\n";
  }
  if (FindBlobSerializer(info.type()) == nullptr) {
    out << "value: (cannot be shown: no deserializer for type '"
        << Printable(info.type()) << "' is linked into ckpt)\n";
    return kExitOk;
  }

  BlobAssembler assembler;
  Blob blob;
  absl::Status deserialize_error;
  absl::Status scan =
      ScanThroughReferences(options.db_type, db->get(), options.db, *index,
                            {found}, [&](int, int, absl::string_view value) {
                              deserialize_error = assembler.Add(
                                  info.name(), value, &blob, BlobBytes(info));
                              return deserialize_error;
                            });
  if (scan.ok()) scan = assembler.Finish();
  if (!deserialize_error.ok() && !absl::IsDataLoss(deserialize_error)) {
    // Readable, intact bytes that this build cannot turn into a value (for
    // example a Caffe2 cursor over a nested record).
    out << "value: (cannot be shown: " << deserialize_error.message() << ")\n";
    return kExitOk;
  }
  if (!scan.ok()) {
    err << "ckpt: " << scan.message() << "\n";
    return absl::IsDataLoss(scan) ? kExitProblem : kExitUsage;
  }
  std::optional<std::string> value = ValueString(blob, options.max_elements);
  if (value.has_value()) {
    out << "value: " << *value << "\n";
  } else {
    out << "value: (cannot be shown: ckpt has no display for "
        << blob.TypeName() << ")\n";
  }
  return kExitOk;
}

int Diff(const DiffOptions& options, std::ostream& out, std::ostream& err) {
  std::optional<BlobIndex> before =
      ReadBlobIndexOrReport(options.db_type, options.db1, err);
  if (!before.has_value()) return kExitUsage;
  std::optional<BlobIndex> after =
      ReadBlobIndexOrReport(options.db_type, options.db2, err);
  if (!after.has_value()) return kExitUsage;
  // Blobs are compared by the sizes and CRC-32Cs their entries list; those
  // of a blob held by reference must be what its holder has, as a load
  // would read it.
  for (const auto& [path, index] : {std::make_pair(&options.db1, &*before),
                                    std::make_pair(&options.db2, &*after)}) {
    absl::Status readable =
        CheckReferencedValues(options.db_type, *path, *index);
    if (!readable.ok()) {
      err << "ckpt: " << readable.message() << "\n";
      return absl::IsDataLoss(readable) ? kExitProblem : kExitUsage;
    }
  }

  std::map<std::string, const CheckpointBlobInfo*> old_blobs;
  std::map<std::string, const CheckpointBlobInfo*> new_blobs;
  for (const CheckpointBlobInfo& b : before->blob()) old_blobs[b.name()] = &b;
  for (const CheckpointBlobInfo& b : after->blob()) new_blobs[b.name()] = &b;

  out << "--- " << options.db1 << " (" << DiffHeader(*before) << ")\n"
      << "+++ " << options.db2 << " (" << DiffHeader(*after) << ")\n";
  int added = 0;
  int removed = 0;
  int changed = 0;
  int same = 0;
  std::map<std::string, int> all;  // every name, in order
  for (const auto& [name, blob] : old_blobs) all[name] |= 1;
  for (const auto& [name, blob] : new_blobs) all[name] |= 2;
  for (const auto& [name, where] : all) {
    if (where == 1) {
      out << "- " << Printable(name) << " (" << Describe(*old_blobs[name])
          << ")\n";
      ++removed;
      continue;
    }
    if (where == 2) {
      out << "+ " << Printable(name) << " (" << Describe(*new_blobs[name])
          << ")\n";
      ++added;
      continue;
    }
    const CheckpointBlobInfo& a = *old_blobs[name];
    const CheckpointBlobInfo& b = *new_blobs[name];
    std::vector<std::string> reasons;
    if (a.type() != b.type()) {
      reasons.push_back(absl::StrCat("type ", Printable(a.type()), " -> ",
                                     Printable(b.type())));
    } else if (IsTensor(a)) {
      if (a.data_type() != b.data_type()) {
        reasons.push_back(
            absl::StrCat("dtype ", DtypeOf(a), " -> ", DtypeOf(b)));
      }
      if (!std::equal(a.dims().begin(), a.dims().end(), b.dims().begin(),
                      b.dims().end())) {
        reasons.push_back(
            absl::StrCat("shape ", ShapeOf(a), " -> ", ShapeOf(b)));
      }
    }
    if (!std::equal(a.key().begin(), a.key().end(), b.key().begin(),
                    b.key().end())) {
      reasons.push_back(absl::StrCat("stored as ", a.key_size(), " -> ",
                                     b.key_size(), " values"));
    } else {
      int differing = 0;
      for (int i = 0; i < a.key_size(); ++i) {
        if (a.value_bytes(i) != b.value_bytes(i) ||
            a.value_crc32c(i) != b.value_crc32c(i)) {
          ++differing;
        }
      }
      if (differing > 0) {
        reasons.push_back(absl::StrCat(
            differing, " of ", a.key_size(), " values differ (CRC-32C ",
            CrcHex(BlobCrc(a)), " -> ", CrcHex(BlobCrc(b)), ")"));
      }
    }
    if (reasons.empty()) {
      ++same;
      continue;
    }
    out << "~ " << Printable(name) << ": " << absl::StrJoin(reasons, "; ")
        << "\n";
    ++changed;
  }
  if (added + removed + changed == 0) {
    out << "identical: " << same << " blobs\n";
    return kExitOk;
  }
  out << added << " added, " << removed << " removed, " << changed
      << " changed, " << same << " unchanged\n";
  return kExitProblem;
}

}  // namespace ckpt
}  // namespace jobgraph

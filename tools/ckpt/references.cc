#include "tools/ckpt/references.h"

#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "tools/ckpt/output.h"

namespace jobgraph {
namespace ckpt {
namespace {

// Enough names for a person to find the blobs; the rest are counted.
constexpr size_t kNamesShown = 3;

std::vector<int> AllBlobs(const CompactBlobIndex& index) {
  std::vector<int> all(index.blob_size());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

}  // namespace

std::string EpochsText(absl::Span<const int64_t> epochs) {
  return absl::StrCat(epochs.size() == 1 ? "epoch " : "epochs ",
                      absl::StrJoin(epochs, ", "));
}

std::string ReferencedText(int64_t bytes, absl::Span<const int64_t> epochs) {
  return absl::StrCat(bytes, " held by reference in ", EpochsText(epochs));
}

std::string BlobNames(absl::Span<const std::string> names) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    shown.push_back(absl::StrCat("'", Printable(names[i]), "'"));
  }
  std::string text = absl::StrCat(names.size() == 1 ? "blob " : "blobs ",
                                  absl::StrJoin(shown, ", "));
  if (names.size() > kNamesShown) {
    absl::StrAppend(&text, " and ", names.size() - kNamesShown, " more");
  }
  return text;
}

std::string BlobNames(const CompactBlobIndex& index,
                      absl::Span<const int> blobs) {
  std::vector<std::string> names;
  for (int b : blobs) names.emplace_back(index.name(b));
  return BlobNames(names);
}

absl::Status ScanReferenced(const std::string& db_type, const std::string& path,
                            const CompactBlobIndex& index, int64_t epoch,
                            absl::Span<const int> blobs, VerifyDepth depth,
                            const DbValueVisitor& visit) {
  const std::string holder = ReferencedDbPath(path, index.node(), epoch);
  const std::string names = BlobNames(index, blobs);
  // The files' contents are read after the values, as VerifyDb does, so
  // that damage to a value is reported naming its blob.
  absl::StatusOr<std::unique_ptr<DB>> db =
      OpenReferencedDb(db_type, path, index, epoch, VerifyDepth::kValues);
  if (absl::IsDataLoss(db.status())) {
    // The message names both databases and both epochs already.
    return absl::DataLossError(absl::StrCat(db.status().message(), " (", names,
                                            blobs.size() == 1 ? " is" : " are",
                                            " held there)"));
  }
  auto in_holder = [&](const absl::Status& status) {
    return absl::Status(
        status.code(),
        absl::StrCat("checkpoint ", path, " refers to ", names, " in ", holder,
                     " (epoch ", epoch, "): ", status.message()));
  };
  if (!db.ok()) return in_holder(db.status());
  absl::Status scanned =
      ScanDbValues(db->get(), index, blobs, /*verify_crc=*/true, visit);
  if (scanned.ok() && depth == VerifyDepth::kValuesAndFiles) {
    // The holder's own blob index says whether it recorded its files,
    // which VerifyRecordedFiles then requires.
    absl::StatusOr<CompactBlobIndex> own = ReadCompactBlobIndex(db->get());
    scanned =
        own.ok() ? VerifyRecordedFiles(db->get(), *own, depth) : own.status();
  }
  absl::Status closed = (*db)->Close();
  if (scanned.ok()) scanned = closed;
  return scanned.ok() ? scanned : in_holder(scanned);
}

absl::Status ScanThroughReferences(const std::string& db_type, DB* db,
                                   const std::string& path,
                                   const CompactBlobIndex& index,
                                   absl::Span<const int> blobs,
                                   const DbValueVisitor& visit) {
  const HeldAndReferenced split = SplitByHolder(index, blobs);
  JG_RETURN_IF_ERROR(
      ScanDbValues(db, index, split.held, /*verify_crc=*/true, visit));
  for (const auto& [epoch, held_there] : split.referenced) {
    // What a load reads: the values, and the holder's record of its files.
    JG_RETURN_IF_ERROR(ScanReferenced(db_type, path, index, epoch, held_there,
                                      VerifyDepth::kValues, visit));
  }
  return absl::OkStatus();
}

absl::StatusOr<CompactBlobIndex> DbVerifier::Verify(const std::string& path,
                                                    const std::string& node,
                                                    int64_t epoch) {
  // VerifyCheckpointDb's steps, with the references checked here.
  JG_ASSIGN_OR_RETURN(CompactBlobIndex index,
                      VerifyDbAt(db_type_, path, VerifyDepth::kValuesAndFiles));
  JG_RETURN_IF_ERROR(CheckIndexOwner(path, index, node, epoch));
  files_verified_.insert(path);
  const std::vector<int> all = AllBlobs(index);
  for (const auto& [held_in, blobs] : SplitByHolder(index, all).referenced) {
    const std::string holder = ReferencedDbPath(path, index.node(), held_in);
    const VerifyDepth depth = files_verified_.contains(holder)
                                  ? VerifyDepth::kValues
                                  : VerifyDepth::kValuesAndFiles;
    JG_RETURN_IF_ERROR(ScanReferenced(
        db_type_, path, index, held_in, blobs, depth,
        [](int, int, absl::string_view) { return absl::OkStatus(); }));
    files_verified_.insert(holder);
  }
  return index;
}

}  // namespace ckpt
}  // namespace jobgraph

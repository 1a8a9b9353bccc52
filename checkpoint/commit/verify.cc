#include "checkpoint/commit/verify.h"

#include "absl/strings/str_cat.h"
#include "checkpoint/commit/checkpoint_paths.h"
#include "checkpoint/ops/blob_index.h"
#include "engine/status_macros.h"

namespace jobgraph {

absl::StatusOr<CompactBlobIndex> VerifyCheckpointDb(
    const std::string& db_type, const std::string& path,
    std::optional<std::string> node, std::optional<int64_t> epoch,
    VerifyDepth depth) {
  JG_ASSIGN_OR_RETURN(CompactBlobIndex index, VerifyDbAt(db_type, path, depth));
  JG_RETURN_IF_ERROR(CheckIndexOwner(path, index, node, epoch));
  // What a load of it reads from the databases it references, too.
  JG_RETURN_IF_ERROR(VerifyReferencedValues(db_type, path, index, depth));
  return index;
}

absl::Status VerifyCommittedEpoch(const std::string& dir,
                                  const std::string& db_type,
                                  const std::vector<std::string>& nodes,
                                  int64_t epoch) {
  for (const std::string& node : nodes) {
    const std::string path = CheckpointDbPath(dir, node, epoch);
    absl::StatusOr<CompactBlobIndex> db =
        // Everything a load then reads is checked; the files' own checksums
        // (a second full read) are `ckpt verify`'s.
        VerifyCheckpointDb(db_type, path, node, epoch, VerifyDepth::kValues);
    // The commit log says this database was committed, so anything missing
    // from it (the directory, a table file) is data loss.
    if (absl::IsNotFound(db.status())) {
      return absl::DataLossError(absl::StrCat(
          "committed epoch ", epoch, " is damaged: ", db.status().message()));
    }
    if (!db.ok()) return db.status();
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

// Verification of checkpoint databases: every value a database's blob index
// lists is present with the recorded size and CRC-32C, and the database
// belongs to the expected node and epoch.
//
// Functions only; thread-compatible (each call opens its own database).

#ifndef JOBGRAPH_CHECKPOINT_COMMIT_VERIFY_H_
#define JOBGRAPH_CHECKPOINT_COMMIT_VERIFY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/ops/blob_index.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

// Reads and checks one node's database: it opens, holds the blob index for
// `node` and `epoch` (when given), and every key the index lists is present
// with the recorded size and CRC-32C, in this database or, for blobs it
// holds by reference, in the database that holds them. Errors name the
// database path and the damaged key (or, for the backend's own checks, the
// file); damage in a referenced database is DataLoss naming both. `depth`:
// kValuesAndFiles for tools that look for any damage (`ckpt verify`),
// kValues where only what a load reads matters (choosing a resume epoch).
absl::StatusOr<CompactBlobIndex> VerifyCheckpointDb(
    const std::string& db_type, const std::string& path,
    std::optional<std::string> node = std::nullopt,
    std::optional<int64_t> epoch = std::nullopt,
    VerifyDepth depth = VerifyDepth::kValuesAndFiles);

// Every node's database of committed `epoch` in `dir` verifies. A database
// that is missing although the commit log lists the epoch is DataLoss.
absl::Status VerifyCommittedEpoch(const std::string& dir,
                                  const std::string& db_type,
                                  const std::vector<std::string>& nodes,
                                  int64_t epoch);

}  // namespace jobgraph

#endif  // JOBGRAPH_CHECKPOINT_COMMIT_VERIFY_H_

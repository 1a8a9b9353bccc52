// Helpers for the //engine/data tests: operators that observe what a pipe
// reads, a checkpoint stand-in that moves a node's root workspace through the
// serialization registry, and fetch shorthands.
//
// Test ops (registered when this library is linked):
//   TestCollectRows (batch) -> ()      args: tag
//     Appends the batch's elements (int64 or string) to the list `tag`.
//   TestAccumulateRows (batch, sum, count) -> (sum, count)
//     sum += sum of the int64 batch, count += its rows; sum and count are
//     int64 [1] tensors.
// Both take one process-wide lock, so concurrent pipe instances may share
// the lists and blobs: the thread-safe way to write shared results.

#ifndef JOBGRAPH_ENGINE_DATA_DATA_TEST_UTIL_H_
#define JOBGRAPH_ENGINE_DATA_DATA_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/net_builder.h"
#include "engine/session.h"

namespace jobgraph {
namespace data_test {

// Adds TestCollectRows(batch) with `tag` to `net`.
void CollectRows(NetBuilder& net, const BlobRef& batch, const std::string& tag);
// Adds TestAccumulateRows(batch, sum, count -> sum, count) to `net`.
void AccumulateRows(NetBuilder& net, const BlobRef& batch, const BlobRef& sum,
                    const BlobRef& count);

std::vector<int64_t> CollectedInts(const std::string& tag);
std::vector<std::string> CollectedStrings(const std::string& tag);
// Forgets every list.
void ClearCollected();

// What a checkpoint and a restore do to one node: serializes every blob of
// `node`'s root workspace in `from` through the serialization registry and
// loads the pieces into `node`'s root workspace in `to`. Fails if any blob
// has no serializer. Returns the names moved, sorted.
absl::StatusOr<std::vector<std::string>> CheckpointAndRestore(
    LocalSession& from, LocalSession& to, absl::string_view node);

absl::StatusOr<int64_t> FetchInt(const Session& session, absl::string_view node,
                                 absl::string_view blob);
absl::StatusOr<bool> FetchBool(const Session& session, absl::string_view node,
                               absl::string_view blob);

}  // namespace data_test
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_DATA_TEST_UTIL_H_

// The MPI exchanges under MpiSession (mpi_session.h) and its side channels:
// the one lock every MPI call of the process holds, the all-gather and the
// all-to-all of strings, and the side channel's communicator. Internal to
// engine/mpi.

#ifndef JOBGRAPH_ENGINE_MPI_MPI_EXCHANGE_H_
#define JOBGRAPH_ENGINE_MPI_MPI_EXCHANGE_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/session.h"

namespace jobgraph {
namespace mpi_exchange {

// The most bytes one message of AllToAll carries: well under MPI's int
// counts. A larger piece goes as several messages.
inline constexpr int64_t kAllToAllRoundBytes = int64_t{512} << 20;

// Every MPI call of the process is made holding this lock (see the comment
// at its definition).
std::mutex& MpiMutex();

// OK, or Unavailable naming `what` and MPI's message for `code`.
absl::Status CheckMpi(int code, absl::string_view what);

// Session::AllGather over `comm`, under MpiMutex.
absl::StatusOr<std::vector<std::string>> AllGatherOn(MPI_Comm comm,
                                                     absl::string_view value);

// Session::AllToAll over `comm`, of which this process is rank `rank`, in
// messages of at most `round_bytes` (>= 1) each. `side`: for a side
// channel's thread, which holds MpiMutex for one call at a time (the
// session's thread holds it throughout) and waits for the other ranks'
// sizes in naps.
absl::StatusOr<std::vector<std::string>> AllToAllOn(
    MPI_Comm comm, int rank, std::vector<std::string> to_each,
    int64_t round_bytes, bool side = false);

// A side channel over `comm` (a duplicate of a session's communicator, which
// it frees), of which this process is rank `rank` of `size`.
std::unique_ptr<SideChannel> NewMpiSideChannel(MPI_Comm comm, int rank,
                                               int size, int64_t round_bytes);

}  // namespace mpi_exchange
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_MPI_MPI_EXCHANGE_H_

#include "engine/mpi/mpi_exchange.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace mpi_exchange {
namespace {

// The tag of AllToAll's messages on their communicator, which carries no
// other point-to-point traffic.
constexpr int kAllToAllTag = 7301;

// Waits for `requests`, each test under MpiMutex. With `nap`, sleeps
// between tests (growing to 2 ms), for a wait for other ranks to arrive,
// which leaves the cores to the job; else yields, for messages that move
// now (every test progresses them).
absl::Status WaitTesting(std::vector<MPI_Request>& requests, bool nap,
                         absl::string_view what) {
  absl::Duration pause = absl::Microseconds(20);
  while (true) {
    int done = 0;
    {
      std::lock_guard<std::mutex> lock(MpiMutex());
      JG_RETURN_IF_ERROR(
          CheckMpi(MPI_Testall(static_cast<int>(requests.size()),
                               requests.data(), &done, MPI_STATUSES_IGNORE),
                   what));
    }
    if (done) return absl::OkStatus();
    if (nap) {
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Milliseconds(2));
    } else {
      std::this_thread::yield();
    }
  }
}

// A communicator of its own, duplicated from the session's: its messages
// (the same tag included) never match the session's.
class MpiSideChannel : public SideChannel {
 public:
  MpiSideChannel(MPI_Comm comm, int rank, int size, int64_t round_bytes)
      : comm_(comm), rank_(rank), size_(size), round_bytes_(round_bytes) {}
  ~MpiSideChannel() override {
    std::lock_guard<std::mutex> lock(MpiMutex());
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int num_ranks() const override { return size_; }
  absl::StatusOr<std::vector<std::string>> AllToAll(
      std::vector<std::string> to_each) override {
    return AllToAllOn(comm_, rank_, std::move(to_each), round_bytes_,
                      /*side=*/true);
  }

 private:
  MPI_Comm comm_;
  const int rank_;
  const int size_;
  const int64_t round_bytes_;
};

}  // namespace

// Every MPI call of the process is made holding this lock, so MPI runs at
// MPI_THREAD_SERIALIZED while two threads call it: the job's (and its node
// threads') and a side channel's. A blocking call holds it for its whole
// wait, during which MPI's progress also moves a side channel's pending
// messages; a side channel holds it for one nonblocking call at a time and
// never waits for other ranks with it, so no rank's wait depends on a lock
// held on another. It also shows ThreadSanitizer, which does not see inside
// Open MPI, that a message one thread's call completed happens before the
// thread that posted it reads it. A leaf: nothing else is locked under it.
std::mutex& MpiMutex() {
  static auto* const mu = new std::mutex;
  return *mu;
}

absl::Status CheckMpi(int code, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return absl::UnavailableError(
      absl::StrCat(what, " failed: ", absl::string_view(text, length)));
}

absl::StatusOr<std::vector<std::string>> AllGatherOn(MPI_Comm comm,
                                                     absl::string_view value) {
  std::lock_guard<std::mutex> lock(MpiMutex());
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (value.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot send ", value.size(),
                     " bytes between ranks at once (2 GiB "
                     "at most)"));
  }
  int mine = static_cast<int>(value.size());
  std::vector<int> sizes(size);
  JG_RETURN_IF_ERROR(
      CheckMpi(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm),
               "MPI_Allgather"));
  std::vector<int> offsets(size);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = static_cast<int>(total);
    total += sizes[r];
  }
  if (total > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ranks' contributions total ", total, " bytes, over 2 GiB"));
  }
  std::string all(total, '\0');
  JG_RETURN_IF_ERROR(
      CheckMpi(MPI_Allgatherv(value.data(), mine, MPI_BYTE, all.data(),
                              sizes.data(), offsets.data(), MPI_BYTE, comm),
               "MPI_Allgatherv"));
  std::vector<std::string> result(size);
  for (int r = 0; r < size; ++r) result[r] = all.substr(offsets[r], sizes[r]);
  return result;
}

// Session::AllToAll over `comm`, of which this process is rank `rank`, in
// messages of at most `round_bytes` (>= 1) each. `side`: for a side
// channel's thread, which holds MpiMutex for one call at a time (the
// session's thread holds it throughout) and waits for the other ranks'
// sizes in naps (WaitTesting).
absl::StatusOr<std::vector<std::string>> AllToAllOn(
    MPI_Comm comm, int rank, std::vector<std::string> to_each,
    int64_t round_bytes, bool side) {
  std::unique_lock<std::mutex> lock(MpiMutex());
  int size = 0;
  MPI_Comm_size(comm, &size);
  // Before any exchange, so that ranks which all pass the same wrong count
  // all return this error instead of some waiting in a collective.
  if (to_each.size() != static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllToAll needs one piece per rank (", size,
                     " ranks), got ", to_each.size()));
  }
  std::vector<int64_t> send_sizes(size);
  for (int r = 0; r < size; ++r) {
    send_sizes[r] = static_cast<int64_t>(to_each[r].size());
  }
  std::vector<int64_t> recv_sizes(size);
  std::vector<MPI_Request> requests(1);
  JG_RETURN_IF_ERROR(CheckMpi(
      MPI_Ialltoall(send_sizes.data(), 1, MPI_INT64_T, recv_sizes.data(), 1,
                    MPI_INT64_T, comm, &requests[0]),
      "MPI_Ialltoall"));
  if (side) {
    lock.unlock();
    JG_RETURN_IF_ERROR(WaitTesting(requests, /*nap=*/true, "MPI_Ialltoall"));
    lock.lock();
  } else {
    JG_RETURN_IF_ERROR(
        CheckMpi(MPI_Wait(&requests[0], MPI_STATUS_IGNORE), "MPI_Ialltoall"));
  }
  std::vector<std::string> received(size);
  // This rank's own piece needs no MPI.
  received[rank] = std::move(to_each[rank]);
  // Each piece moves straight from the sender's string into the receiver's
  // (sized first), with no packing buffer in between: the pieces are whole
  // databases, and every copy of one costs as much as its transfer. The
  // messages of one pair arrive in the order they were sent (MPI does not
  // let messages with the same source, tag and communicator overtake).
  const int64_t chunk =
      std::max<int64_t>(1, std::min<int64_t>(round_bytes, INT_MAX));
  requests.clear();
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    received[r].resize(static_cast<size_t>(recv_sizes[r]));
    for (int64_t at = 0; at < recv_sizes[r]; at += chunk) {
      requests.emplace_back();
      JG_RETURN_IF_ERROR(CheckMpi(
          MPI_Irecv(received[r].data() + at,
                    static_cast<int>(std::min(chunk, recv_sizes[r] - at)),
                    MPI_BYTE, r, kAllToAllTag, comm, &requests.back()),
          "MPI_Irecv"));
    }
  }
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    for (int64_t at = 0; at < send_sizes[r]; at += chunk) {
      requests.emplace_back();
      JG_RETURN_IF_ERROR(CheckMpi(
          MPI_Isend(to_each[r].data() + at,
                    static_cast<int>(std::min(chunk, send_sizes[r] - at)),
                    MPI_BYTE, r, kAllToAllTag, comm, &requests.back()),
          "MPI_Isend"));
    }
  }
  if (side) {
    lock.unlock();
    JG_RETURN_IF_ERROR(WaitTesting(requests, /*nap=*/false, "MPI_Testall"));
  } else {
    JG_RETURN_IF_ERROR(
        CheckMpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                             MPI_STATUSES_IGNORE),
                 "MPI_Waitall"));
  }
  return received;
}

std::unique_ptr<SideChannel> NewMpiSideChannel(MPI_Comm comm, int rank,
                                               int size, int64_t round_bytes) {
  return std::make_unique<MpiSideChannel>(comm, rank, size, round_bytes);
}

}  // namespace mpi_exchange
}  // namespace jobgraph

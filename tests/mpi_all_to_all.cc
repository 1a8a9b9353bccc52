// MpiSession::AllToAll under mpirun: tests/mpi_test.cc runs this binary with
// `mpirun -np N` for N = 1, 2, 4, where every rank runs every test (SPMD) and
// a failure on any rank fails the run. Each piece's size and bytes depend on
// its (sending rank, receiving rank) pair, so a piece delivered to the wrong
// rank, from the wrong rank, or cut or reordered between rounds shows.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/mpi/mpi_session.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using ::testing::HasSubstr;

// As many nodes as the most ranks mpi_test starts, so that every rank hosts
// one.
std::unique_ptr<MpiSession> NewSession() {
  absl::StatusOr<std::unique_ptr<MpiSession>> session =
      MpiSession::Create({"n0", "n1", "n2", "n3"});
  CHECK(session.ok()) << session.status();
  return *std::move(session);
}

enum class Sizes {
  // Small, every pair a different size.
  kDistinct,
  // Every piece empty: no round at all.
  kEmpty,
  // A few MiB for some pairs, empty for others, small for the rest (with
  // one rank, its own piece is the large one).
  kMixed,
};

int64_t PieceSize(Sizes sizes, int from, int to) {
  switch (sizes) {
    case Sizes::kDistinct:
      return 1 + 37 * from + 1009 * to;
    case Sizes::kEmpty:
      return 0;
    case Sizes::kMixed:
      if ((from + to) % 2 == 0) return (int64_t{3} << 20) + 1000 * from + to;
      if ((from + to) % 3 == 1) return 0;
      return 100 + 10 * from + to;
  }
  return 0;
}

// The piece rank `from` sends rank `to`.
std::string Piece(Sizes sizes, int from, int to) {
  std::string piece(PieceSize(sizes, from, to), '\0');
  for (size_t i = 0; i < piece.size(); ++i) {
    // i / 251 keeps the pattern from repeating with any power-of-two period.
    piece[i] = static_cast<char>(i * 31 + i / 251 + from * 7 + to * 13);
  }
  return piece;
}

// Every rank sends every rank its piece; checks what this rank received.
// Failures name `sizes` themselves: SCOPED_TRACE would leave gtest's
// thread-local trace stack allocated, which LeakSanitizer reports under
// mpi_test (it runs the ranks with LSAN_OPTIONS=use_tls=0).
void ExchangeAndCheck(const MpiSession& session, Sizes sizes) {
  const int n = session.num_ranks();
  const int me = session.rank();
  std::vector<std::string> to_each;
  for (int to = 0; to < n; ++to) to_each.push_back(Piece(sizes, me, to));
  absl::StatusOr<std::vector<std::string>> got = session.AllToAll(to_each);
  const int which = static_cast<int>(sizes);
  ASSERT_TRUE(got.ok()) << got.status() << " (sizes " << which << ")";
  ASSERT_EQ(got->size(), static_cast<size_t>(n)) << "sizes " << which;
  for (int from = 0; from < n; ++from) {
    const std::string want = Piece(sizes, from, me);
    const std::string& have = (*got)[from];
    // Not EXPECT_EQ: a mismatch of MiB-long strings would flood the log.
    EXPECT_EQ(have.size(), want.size())
        << "sizes " << which << ", from rank " << from;
    EXPECT_TRUE(have == want) << "sizes " << which << ": rank " << me
                              << " got the wrong bytes from rank " << from;
  }
}

TEST(MpiAllToAll, EveryRankGetsEachRanksPiece) {
  std::unique_ptr<MpiSession> session = NewSession();
  for (Sizes sizes : {Sizes::kDistinct, Sizes::kEmpty, Sizes::kMixed}) {
    ExchangeAndCheck(*session, sizes);
  }
}

// Pieces larger than a round take several rounds; round sizes that divide
// no piece's size leave a short last chunk, and pieces of different sizes
// finish in different rounds.
TEST(MpiAllToAll, PiecesLargerThanARoundTakeSeveralRounds) {
  std::unique_ptr<MpiSession> session = NewSession();
  session->SetAllToAllRoundBytesForTesting(1027);
  ExchangeAndCheck(*session, Sizes::kDistinct);
  ExchangeAndCheck(*session, Sizes::kEmpty);
  session->SetAllToAllRoundBytesForTesting(65537);
  ExchangeAndCheck(*session, Sizes::kMixed);
  session->SetAllToAllRoundBytesForTesting(1);
  ExchangeAndCheck(*session, Sizes::kDistinct);
}

// The same wrong count on every rank is an error on every rank, raised
// before any exchange, so the session still works afterwards.
TEST(MpiAllToAll, WrongCountIsAnErrorOnEveryRank) {
  std::unique_ptr<MpiSession> session = NewSession();
  const int n = session->num_ranks();
  for (int count : {n - 1, n + 1}) {
    absl::StatusOr<std::vector<std::string>> got =
        session->AllToAll(std::vector<std::string>(count, "piece"));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << count;
    EXPECT_THAT(got.status().message(),
                HasSubstr(absl::StrCat("(", n, " ranks), got ", count)));
  }
  ExchangeAndCheck(*session, Sizes::kDistinct);
}

}  // namespace
}  // namespace jobgraph

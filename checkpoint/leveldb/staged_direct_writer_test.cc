#include "checkpoint/leveldb/staged_direct_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/util/io_faults.h"
#include "checkpoint/util/test_util.h"
#include "gtest/gtest.h"

namespace jobgraph {
namespace {

using testing_util::TempDir;

constexpr size_t kSmall = StagedDirectWriter::kSmallBufferBytes;
constexpr size_t kLarge = StagedDirectWriter::kLargeBufferBytes;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Bytes that differ from their neighbours' (a misplaced buffer shows).
std::string Pattern(size_t size, uint32_t seed) {
  std::string bytes(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : bytes) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return bytes;
}

class StagedDirectWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // O_DIRECT needs a file system that takes it (most do).
    const int fd = Open("probe");
    const bool direct = StagedDirectWriter::Start(fd, "probe") != nullptr;
    ::close(fd);
    if (!direct) {
      GTEST_SKIP() << "the file system of " << dir_.path()
                   << " does not take O_DIRECT";
    }
  }
  void TearDown() override { io_faults::Disarm(); }

  int Open(const std::string& name) {
    const int fd = ::open(dir_.Join(name).c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    CHECK_GE(fd, 0) << dir_.Join(name);
    return fd;
  }

  // Writes `pieces` to a new file through a writer and returns its bytes.
  std::string WriteThrough(const std::string& name,
                           const std::vector<std::string>& pieces,
                           bool large = false) {
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name), large);
    EXPECT_NE(writer, nullptr);
    EXPECT_NE(::fcntl(fd, F_GETFL) & O_DIRECT, 0);
    uint64_t appended = 0;
    for (const std::string& piece : pieces) {
      EXPECT_TRUE(writer->Append(piece).ok());
      appended += piece.size();
      EXPECT_EQ(writer->size(), appended);
    }
    EXPECT_TRUE(writer->Finish().ok());
    writer.reset();
    EXPECT_EQ(::close(fd), 0);
    return ReadFile(dir_.Join(name));
  }

  // The message of a write of the file `name` that found the disk full.
  std::string NoSpace(const std::string& name) {
    return absl::StrCat("write ", dir_.Join(name), ": No space left on ",
                        "device");
  }

  TempDir dir_;
};

TEST_F(StagedDirectWriterTest, WritesExactlyWhatWasAppended) {
  const std::vector<size_t> sizes = {
      0, 1, 4095, 4096, 4097, kSmall - 1, kSmall, kSmall + 1, 3 * kSmall + 5};
  for (size_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    const std::string bytes = Pattern(size, static_cast<uint32_t>(size));
    EXPECT_EQ(WriteThrough(absl::StrCat("one_", size), {bytes}), bytes);
  }
}

// Small and large appends mixed, past the size where the buffers grow.
TEST_F(StagedDirectWriterTest, ManyAppendsAcrossBothBufferSizes) {
  std::vector<std::string> pieces;
  std::string expected;
  uint32_t seed = 1;
  while (expected.size() < StagedDirectWriter::kLargeAfterBytes + 3 * kLarge) {
    const size_t size = seed % 5 == 0 ? kLarge + seed : seed * 37 % 9000;
    pieces.push_back(Pattern(size, seed++));
    expected += pieces.back();
  }
  pieces.push_back("tail");
  expected += "tail";
  EXPECT_EQ(WriteThrough("mixed", pieces), expected);
  EXPECT_EQ(WriteThrough("mixed_large", pieces, /*large=*/true), expected);
}

// The n-th write fails (a full disk): Append or Finish returns the error,
// naming the file, whichever thread made the write.
TEST_F(StagedDirectWriterTest, AFailedWriteIsReturned) {
  // Five full buffers, then the last one's aligned part and its tail.
  const std::string bytes = Pattern(5 * kSmall + 4096 + 100, 7);
  for (int64_t fail_at = 1; fail_at <= 7; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("full_", fail_at);
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name));
    ASSERT_NE(writer, nullptr);
    io_faults::Arm(fail_at, ENOSPC);
    absl::Status status = writer->Append(bytes);
    if (status.ok()) status = writer->Finish();
    EXPECT_EQ(io_faults::Calls(), fail_at) << "a write after the failed one";
    io_faults::Disarm();
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(status.message(), NoSpace(name));
    writer.reset();
    ::close(fd);
  }
}

// A large file keeps several writes in flight: whichever of them fails,
// Append or Finish returns that error, and so does every call after it.
// (Writes already handed to other threads may still be made, so the count
// of write calls is not exact here.)
TEST_F(StagedDirectWriterTest, AFailedWriteAmongSeveralInFlightIsReturned) {
  constexpr int kInFlight = StagedDirectWriter::kLargeWritesInFlight;
  const std::string bytes = Pattern(3 * kInFlight * kLarge + 4096 + 100, 9);
  const int64_t writes = 3 * kInFlight + 2;
  for (int64_t fail_at = 1; fail_at <= writes; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("large_full_", fail_at);
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name), /*large=*/true);
    ASSERT_NE(writer, nullptr);
    io_faults::Arm(fail_at, ENOSPC);
    absl::Status status = writer->Append(bytes);
    if (status.ok()) {
      status = writer->Finish();
    } else {
      // Once Append returned an error, every call returns it.
      EXPECT_EQ(writer->Append("more"), status);
      EXPECT_EQ(writer->Finish(), status);
    }
    io_faults::Disarm();
    EXPECT_GE(io_faults::Calls(), fail_at);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(status.message(), NoSpace(name));
    writer.reset();
    ::close(fd);
  }
}

// Without a failure the bytes of a large file take one write per buffer
// and its end.
TEST_F(StagedDirectWriterTest, ALargeFileWritesWholeBuffersThenTheEnd) {
  const std::string bytes = Pattern(9 * kLarge + 4096 + 100, 11);
  io_faults::Arm(1000, EIO);
  EXPECT_EQ(WriteThrough("large_counted", {bytes}, /*large=*/true), bytes);
  EXPECT_EQ(io_faults::Calls(), 11);
}

// Without a failure the same bytes take exactly seven writes.
TEST_F(StagedDirectWriterTest, WritesWholeBuffersThenTheEnd) {
  const std::string bytes = Pattern(5 * kSmall + 4096 + 100, 7);
  io_faults::Arm(1000, EIO);
  EXPECT_EQ(WriteThrough("counted", {bytes}), bytes);
  EXPECT_EQ(io_faults::Calls(), 7);
}

// Filled in place (Reserve, then Commit), in pieces of every size up to the
// whole free space and mixed with Appends, across the switch to large
// buffers: the file holds the bytes in order, and the writes are whole
// buffers, as with Append alone.
TEST_F(StagedDirectWriterTest, FilledInPlaceWritesWhatWasCommitted) {
  const std::string bytes = Pattern(
      StagedDirectWriter::kLargeAfterBytes + 3 * kLarge + 4096 + 777, 13);
  const std::string name = "in_place";
  const int fd = Open(name);
  std::unique_ptr<StagedDirectWriter> writer =
      StagedDirectWriter::Start(fd, dir_.Join(name));
  ASSERT_NE(writer, nullptr);
  io_faults::Arm(1000, EIO);
  size_t done = 0;
  for (uint32_t step = 0; done < bytes.size(); ++step) {
    if (step % 7 == 3) {  // an Append now and then
      const size_t n = std::min<size_t>(bytes.size() - done, 5000);
      ASSERT_TRUE(
          writer->Append(absl::string_view(bytes).substr(done, n)).ok());
      done += n;
      continue;
    }
    absl::StatusOr<absl::Span<char>> space = writer->Reserve();
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_FALSE(space->empty());
    // The whole free space, one byte, or a share of it.
    const size_t want = step % 3 == 0   ? space->size()
                        : step % 3 == 1 ? 1
                                        : space->size() / 3 + 1;
    const size_t n = std::min(want, bytes.size() - done);
    std::memcpy(space->data(), bytes.data() + done, n);
    ASSERT_TRUE(writer->Commit(n).ok());
    done += n;
    EXPECT_EQ(writer->size(), done);
  }
  ASSERT_TRUE(writer->Finish().ok());
  // 16 MiB in 64 small buffers, 3 large ones, then the end: its whole
  // pages and its unaligned tail.
  EXPECT_EQ(io_faults::Calls(),
            StagedDirectWriter::kLargeAfterBytes / kSmall + 3 + 2);
  io_faults::Disarm();
  writer.reset();
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(ReadFile(dir_.Join(name)), bytes);
}

// Three buffers filled in place, three writes: a failed one is returned by the
// Commit that handed it over or by Finish, and by every call after it.
TEST_F(StagedDirectWriterTest, AFailedWriteIsReturnedToCommit) {
  for (int64_t fail_at = 1; fail_at <= 3; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("in_place_full_", fail_at);
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name));
    ASSERT_NE(writer, nullptr);
    io_faults::Arm(fail_at, ENOSPC);
    absl::Status status;
    for (int buffer = 0; buffer < 3 && status.ok(); ++buffer) {
      absl::StatusOr<absl::Span<char>> space = writer->Reserve();
      ASSERT_TRUE(space.ok()) << space.status();
      ASSERT_EQ(space->size(), kSmall);
      std::memset(space->data(), 'x', space->size());
      status = writer->Commit(space->size());
    }
    if (status.ok()) {
      status = writer->Finish();
    } else {
      EXPECT_EQ(writer->Reserve().status(), status);
      EXPECT_EQ(writer->Commit(0), status);
      EXPECT_EQ(writer->Finish(), status);
    }
    io_faults::Disarm();
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(status.message(), NoSpace(name));
    writer.reset();
    ::close(fd);
  }
}

// Writers::kCaller: no threads; each full buffer is written by the call
// that filled it, a large file's in kCallerBufferBytes, so the writes are
// counted exactly and the file holds what was appended.
TEST_F(StagedDirectWriterTest, TheCallerWritesEachFullBuffer) {
  constexpr size_t kCaller = StagedDirectWriter::kCallerBufferBytes;
  const std::string bytes = Pattern(3 * kCaller + 4096 + 100, 17);
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "filled in place" : "appended");
    const std::string name = in_place ? "caller_in_place" : "caller";
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name), /*large=*/true,
                                  StagedDirectWriter::Writers::kCaller);
    ASSERT_NE(writer, nullptr);
    io_faults::Arm(1000, EIO);
    if (in_place) {
      for (size_t done = 0; done < bytes.size();) {
        absl::StatusOr<absl::Span<char>> space = writer->Reserve();
        ASSERT_TRUE(space.ok()) << space.status();
        if (done % kCaller == 0) ASSERT_EQ(space->size(), kCaller);
        const size_t n = std::min(space->size(), bytes.size() - done);
        std::memcpy(space->data(), bytes.data() + done, n);
        ASSERT_TRUE(writer->Commit(n).ok());
        done += n;
        // Each full buffer was written before Commit returned.
        EXPECT_EQ(io_faults::Calls(), static_cast<int64_t>(done / kCaller));
      }
    } else {
      ASSERT_TRUE(writer->Append(bytes).ok());
      EXPECT_EQ(io_faults::Calls(), 3);
    }
    ASSERT_TRUE(writer->Finish().ok());
    // Three full buffers, then the end: its whole page and its tail.
    EXPECT_EQ(io_faults::Calls(), 5);
    io_faults::Disarm();
    writer.reset();
    EXPECT_EQ(::close(fd), 0);
    EXPECT_EQ(ReadFile(dir_.Join(name)), bytes);
  }
}

// Writers::kCaller: a failed write is returned by the very Commit that
// filled its buffer, and nothing is written after it.
TEST_F(StagedDirectWriterTest, TheCallersFailedWriteIsReturnedAtOnce) {
  for (int64_t fail_at = 1; fail_at <= 3; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("caller_full_", fail_at);
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name), /*large=*/false,
                                  StagedDirectWriter::Writers::kCaller);
    ASSERT_NE(writer, nullptr);
    io_faults::Arm(fail_at, ENOSPC);
    for (int64_t buffer = 1; buffer <= 3; ++buffer) {
      absl::StatusOr<absl::Span<char>> space = writer->Reserve();
      ASSERT_TRUE(space.ok()) << space.status();
      ASSERT_EQ(space->size(), kSmall);
      std::memset(space->data(), 'x', space->size());
      const absl::Status status = writer->Commit(space->size());
      if (buffer < fail_at) {
        ASSERT_TRUE(status.ok()) << status;
        continue;
      }
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(status.message(), NoSpace(name));
      EXPECT_EQ(writer->Reserve().status(), status);
      EXPECT_EQ(writer->Finish(), status);
      break;
    }
    EXPECT_EQ(io_faults::Calls(), fail_at);
    io_faults::Disarm();
    writer.reset();
    ::close(fd);
  }
}

// `bytes` copied to memory that starts `shift` bytes past a page boundary.
class Placed {
 public:
  Placed(const std::string& bytes, size_t shift)
      : memory_(static_cast<char*>(std::aligned_alloc(
            4096, (shift + bytes.size() + 4095) / 4096 * 4096))) {
    std::memcpy(memory_.get() + shift, bytes.data(), bytes.size());
    view_ = absl::string_view(memory_.get() + shift, bytes.size());
  }
  absl::string_view view() const { return view_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> memory_;
  absl::string_view view_;
};

// Whatever the buffer's alignment and whatever came before it, the padding
// PaddingToBorrow asks for lets AppendBorrowed write every whole page of the
// buffer from the buffer itself; the file holds exactly what was appended.
TEST_F(StagedDirectWriterTest, BorrowedAppendsWriteWholePagesFromTheCaller) {
  const size_t body_size = StagedDirectWriter::kBorrowedWriteBytes + 12345;
  for (size_t shift : {0, 1, 100, 4095}) {
    for (size_t before : {size_t{0}, size_t{10}, size_t{4096}, kSmall + 7}) {
      SCOPED_TRACE(absl::StrCat("shift ", shift, ", before ", before));
      const std::string name = absl::StrCat("borrowed_", shift, "_", before);
      const Placed body(Pattern(body_size, shift + before), shift);
      const int fd = Open(name);
      std::unique_ptr<StagedDirectWriter> writer =
          StagedDirectWriter::Start(fd, dir_.Join(name));
      ASSERT_NE(writer, nullptr);
      std::string expected = Pattern(before, 3);
      ASSERT_TRUE(writer->Append(expected).ok());
      const size_t padding =
          StagedDirectWriter::PaddingToBorrow(writer->size(), body.view());
      const uint64_t address = reinterpret_cast<uintptr_t>(body.view().data());
      EXPECT_LT(padding, 4096u);
      EXPECT_EQ((writer->size() + padding) % 4096, address % 4096);
      ASSERT_TRUE(writer->Append(std::string(padding, 'p')).ok());
      ASSERT_TRUE(writer->AppendBorrowed(body.view()).ok());
      ASSERT_TRUE(writer->Append("tail").ok());
      expected += std::string(padding, 'p');
      expected.append(body.view().data(), body.view().size());
      expected += "tail";
      // Every page of the body that starts in it.
      const size_t lead = (4096 - shift) % 4096;
      EXPECT_EQ(writer->borrowed_bytes(), (body_size - lead) / 4096 * 4096);
      EXPECT_EQ(writer->size(), expected.size());
      ASSERT_TRUE(writer->Finish().ok());
      writer.reset();
      EXPECT_EQ(::close(fd), 0);
      EXPECT_TRUE(ReadFile(dir_.Join(name)) == expected);
    }
  }
}

// A large file (several writes in flight) mixes borrowed pages with staged
// buffers, which finish in any order; the file is still exactly what was
// appended, also when one of the writes fails (then that error is returned).
TEST_F(StagedDirectWriterTest, ALargeFileMixesBorrowedAndStagedWrites) {
  const Placed first(Pattern(20 * (1 << 20) + 777, 21), 100);
  const Placed second(Pattern(5 * (1 << 20) + 3, 22), 7);
  const std::string staged = Pattern(3 * kLarge + 11, 23);
  const auto write = [&](const std::string& name, int64_t fail_at) {
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name), /*large=*/true);
    EXPECT_NE(writer, nullptr);
    std::string expected;
    if (fail_at > 0) io_faults::Arm(fail_at, ENOSPC);
    absl::Status status = absl::OkStatus();
    const auto append = [&](absl::string_view bytes, bool borrow) {
      if (!status.ok()) return;
      status = borrow ? writer->AppendBorrowed(bytes) : writer->Append(bytes);
      expected.append(bytes.data(), bytes.size());
    };
    const auto pad = [&](const Placed& next) {
      append(std::string(StagedDirectWriter::PaddingToBorrow(writer->size(),
                                                             next.view()),
                         '\0'),
             false);
    };
    append("x", false);
    pad(first);
    append(first.view(), true);
    append(staged, false);
    pad(second);
    append(second.view(), true);
    append(staged, false);
    if (status.ok()) {
      EXPECT_EQ(writer->borrowed_bytes(),
                (first.view().size() - 3996) / 4096 * 4096 +
                    (second.view().size() - 4089) / 4096 * 4096);
      status = writer->Finish();
    }
    io_faults::Disarm();
    writer.reset();
    EXPECT_EQ(::close(fd), 0);
    return std::make_pair(status, expected);
  };
  const auto [status, expected] = write("mixed_borrowed", 0);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(ReadFile(dir_.Join("mixed_borrowed")) == expected);
  // A failure at each of the first 14 writes, borrowed (7) or staged.
  for (int64_t fail_at = 1; fail_at <= 14; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("mixed_full_", fail_at);
    EXPECT_EQ(write(name, fail_at).first.code(),
              absl::StatusCode::kResourceExhausted);
  }
}

// A buffer whose address does not agree with the file's position, or that
// is too short to be worth it, is copied like any append.
TEST_F(StagedDirectWriterTest, BorrowedAppendsCopyWhatTheyCannotBorrow) {
  const Placed large(Pattern(StagedDirectWriter::kMinBorrowedBytes + 5, 1), 0);
  const Placed short_one(Pattern(StagedDirectWriter::kMinBorrowedBytes - 1, 2),
                         0);
  EXPECT_EQ(StagedDirectWriter::PaddingToBorrow(7, short_one.view()), 0u);
  EXPECT_EQ(StagedDirectWriter::PaddingToBorrow(7, large.view()), 4089u);
  const int fd = Open("copied");
  std::unique_ptr<StagedDirectWriter> writer =
      StagedDirectWriter::Start(fd, dir_.Join("copied"));
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Append("7 bytes").ok());
  ASSERT_TRUE(writer->AppendBorrowed(large.view()).ok());  // position 7
  ASSERT_TRUE(writer->Append(std::string(4096 - 7 - 5, 'p')).ok());
  // Aligned now, but too short.
  ASSERT_TRUE(writer->AppendBorrowed(short_one.view()).ok());
  EXPECT_EQ(writer->borrowed_bytes(), 0u);
  ASSERT_TRUE(writer->Finish().ok());
  writer.reset();
  EXPECT_EQ(::close(fd), 0);
  const std::string expected =
      absl::StrCat("7 bytes", large.view(), std::string(4096 - 7 - 5, 'p'),
                   short_one.view());
  EXPECT_TRUE(ReadFile(dir_.Join("copied")) == expected);
}

// A write of borrowed pages that fails (a full disk) is returned by an
// append or by Finish, naming the file; after an append returned it, every
// call returns it.
TEST_F(StagedDirectWriterTest, AFailedBorrowedWriteIsReturned) {
  const Placed body(Pattern(3 * StagedDirectWriter::kBorrowedWriteBytes, 5), 0);
  // Three borrowed writes, the staged "head" and "tail".
  for (int64_t fail_at = 1; fail_at <= 5; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("write ", fail_at, " fails"));
    const std::string name = absl::StrCat("borrowed_full_", fail_at);
    const int fd = Open(name);
    std::unique_ptr<StagedDirectWriter> writer =
        StagedDirectWriter::Start(fd, dir_.Join(name));
    ASSERT_NE(writer, nullptr);
    ASSERT_TRUE(writer->Append(std::string(4096, 'h')).ok());
    io_faults::Arm(fail_at, ENOSPC);
    absl::Status status = writer->AppendBorrowed(body.view());
    if (status.ok()) status = writer->Append("tail");
    if (status.ok()) {
      status = writer->Finish();
    } else {
      // Once an append returned an error, every call returns it.
      EXPECT_EQ(writer->Append("more"), status);
      EXPECT_EQ(writer->Finish(), status);
    }
    io_faults::Disarm();
    EXPECT_GE(io_faults::Calls(), fail_at);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(status.message(), NoSpace(name));
    writer.reset();
    ::close(fd);
  }
}

}  // namespace
}  // namespace jobgraph

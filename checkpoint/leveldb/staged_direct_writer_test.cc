#include "checkpoint/leveldb/staged_direct_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
    EXPECT_EQ(status.message(), absl::StrCat("write ", dir_.Join(name),
                                             ": No space left on ", "device"));
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
    EXPECT_EQ(status.message(), absl::StrCat("write ", dir_.Join(name),
                                             ": No space left on ", "device"));
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

}  // namespace
}  // namespace jobgraph

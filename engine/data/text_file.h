// TextFile: a newline-delimited text file as a data source. Each line is one
// record with the single string field "line" (without its '\n').
//
// The reader's position is the byte offset of the next line, in the cursor
// blob "<name>_cursor" that NewReader's op creates in `init_net` (pass a
// GLOBAL init task so it lands in the node's root workspace and is
// checkpointed). The file is opened by the first read, not by the init task,
// and read a buffer at a time from the offset, so files larger than memory
// are fine. Run-time errors fail the reading task and name the path:
// NotFound / PermissionDenied when it cannot be opened, DataLoss (with the
// byte offset) for a last line without its trailing newline. See
// file_cursor.h.
//
// Blob names: cursor "<name>_cursor", batch "<name>/read/line", should_stop
// "<name>/read/empty".
//
// Example:
//   TextFile file("/data/train.txt", "train_file");
//   Reader reader = file.NewReader(init.net(), /*batch_size=*/64);
//
// An immutable value.

#ifndef JOBGRAPH_ENGINE_DATA_TEXT_FILE_H_
#define JOBGRAPH_ENGINE_DATA_TEXT_FILE_H_

#include <cstdint>
#include <string>

#include "engine/data/reader.h"
#include "engine/net_builder.h"

namespace jobgraph {

class TextFile {
 public:
  static constexpr int64_t kDefaultBufferBytes = int64_t{64} << 10;

  explicit TextFile(std::string path, std::string name = "text_file")
      : path_(std::move(path)), name_(std::move(name)) {}

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }

  // Reads up to `batch_size` lines per read, `buffer_bytes` from the file at
  // a time; an empty batch at the end of the file. Reset rewinds to byte 0.
  Reader NewReader(NetBuilder& init_net, int64_t batch_size = 1,
                   int64_t buffer_bytes = kDefaultBufferBytes) const;

 private:
  std::string path_;
  std::string name_;
};

}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_TEXT_FILE_H_

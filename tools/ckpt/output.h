// Output helpers of the `ckpt` tool: a minimal JSON writer, aligned text
// tables, and the formatting of sizes, durations, times and checksums that
// every command shares.
//
// The JSON is written by hand because the tool's output must be stable
// (fixed key order, no dependence on a library's pretty-printer) and the
// project has no JSON library. Strings are escaped per RFC 8259; bytes that
// are not valid UTF-8 (names and keys are arbitrary bytes) are written as
// \u00XX with the byte's value, so the output is always valid JSON.
//
// Not thread-safe: a writer or table is used by one thread.

#ifndef JOBGRAPH_TOOLS_CKPT_OUTPUT_H_
#define JOBGRAPH_TOOLS_CKPT_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jobgraph {
namespace ckpt {

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view s);

// Writes one JSON value to a stream, compactly ({"a":1,"b":[2,3]}). The
// caller nests Begin/End calls correctly and gives every object member a
// Key() first; mistakes are fatal (CHECK), as they are bugs of the tool.
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(absl::string_view key);
  void String(absl::string_view value);
  void Int(int64_t value);
  void Bool(bool value);
  void Null();

  // Key(key) followed by the value.
  void Field(absl::string_view key, absl::string_view value);
  void Field(absl::string_view key, const char* value);
  void Field(absl::string_view key, const std::string& value);
  void Field(absl::string_view key, int64_t value);
  void Field(absl::string_view key, int value) {
    Field(key, static_cast<int64_t>(value));
  }
  void Field(absl::string_view key, bool value);
  // A number, or null when absent.
  void Field(absl::string_view key, std::optional<int64_t> value);
  // An array of strings / numbers.
  void StringArray(absl::string_view key, absl::Span<const std::string> values);
  void IntArray(absl::string_view key, absl::Span<const int64_t> values);

  // True once the outermost value is complete.
  bool done() const { return done_; }

 private:
  // Writes the separator a new value needs at this point.
  void BeforeValue();

  struct Level {
    bool is_object;
    bool empty = true;
  };
  std::ostream& out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
  bool done_ = false;
};

// A table of text cells printed with aligned columns, two spaces apart,
// without trailing spaces.
class TextTable {
 public:
  // `right_aligned[i]` says whether column i is right-aligned (numbers).
  TextTable(std::vector<std::string> headers, std::vector<bool> right_aligned);

  // `cells` has one entry per column.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_aligned_;
  std::vector<std::vector<std::string>> rows_;
};

// `s` with control characters, backslashes and bytes >= 0x7f escaped
// (\n, \x01, ...), for names printed in text output.
std::string Printable(absl::string_view s);

// A CRC-32C as 8 lower-case hex digits.
std::string CrcHex(uint32_t crc);

// A duration: "850 us", "12.3 ms", "4.56 s".
std::string FormatMicros(int64_t micros);

// Microseconds since the Unix epoch as "2024-05-01 12:34:56 UTC"; "-" for 0.
std::string FormatUnixMicros(int64_t unix_micros);

}  // namespace ckpt
}  // namespace jobgraph

#endif  // JOBGRAPH_TOOLS_CKPT_OUTPUT_H_

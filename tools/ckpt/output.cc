#include "tools/ckpt/output.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace jobgraph {
namespace ckpt {
namespace {

// The length of the valid UTF-8 sequence that starts at s[i], or 0 if the
// bytes there are not one (overlong forms, surrogates and code points above
// U+10FFFF are invalid, as RFC 3629 says).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  size_t n;
  uint32_t code;
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
    code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && code < 0x800) || (n == 4 && code < 0x10000) ||
      (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
    return 0;
  }
  return n;
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\u%04x", c);
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      // Not UTF-8: keep the byte's value visible and the JSON valid.
      out += absl::StrFormat("\\u%04x", c);
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out += "\"";
  return out;
}

void JsonWriter::BeforeValue() {
  CHECK(!done_) << "JSON value written after the outermost one";
  if (stack_.empty()) return;
  Level& level = stack_.back();
  if (level.is_object) {
    CHECK(after_key_) << "JSON object member without a key";
    after_key_ = false;
    return;
  }
  if (!level.empty) out_ << ',';
  level.empty = false;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ << '{';
  stack_.push_back({/*is_object=*/true});
}

void JsonWriter::EndObject() {
  CHECK(!stack_.empty() && stack_.back().is_object && !after_key_);
  stack_.pop_back();
  out_ << '}';
  if (stack_.empty()) done_ = true;
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ << '[';
  stack_.push_back({/*is_object=*/false});
}

void JsonWriter::EndArray() {
  CHECK(!stack_.empty() && !stack_.back().is_object);
  stack_.pop_back();
  out_ << ']';
  if (stack_.empty()) done_ = true;
}

void JsonWriter::Key(absl::string_view key) {
  CHECK(!stack_.empty() && stack_.back().is_object && !after_key_)
      << "JSON key '" << key << "' outside an object";
  Level& level = stack_.back();
  if (!level.empty) out_ << ',';
  level.empty = false;
  out_ << JsonQuote(key) << ':';
  after_key_ = true;
}

void JsonWriter::String(absl::string_view value) {
  BeforeValue();
  out_ << JsonQuote(value);
  if (stack_.empty()) done_ = true;
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ << value;
  if (stack_.empty()) done_ = true;
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ << (value ? "true" : "false");
  if (stack_.empty()) done_ = true;
}

void JsonWriter::Null() {
  BeforeValue();
  out_ << "null";
  if (stack_.empty()) done_ = true;
}

void JsonWriter::Field(absl::string_view key, absl::string_view value) {
  Key(key);
  String(value);
}

void JsonWriter::Field(absl::string_view key, const char* value) {
  Field(key, absl::string_view(value));
}

void JsonWriter::Field(absl::string_view key, const std::string& value) {
  Field(key, absl::string_view(value));
}

void JsonWriter::Field(absl::string_view key, int64_t value) {
  Key(key);
  Int(value);
}

void JsonWriter::Field(absl::string_view key, bool value) {
  Key(key);
  Bool(value);
}

void JsonWriter::Field(absl::string_view key, std::optional<int64_t> value) {
  Key(key);
  if (value.has_value()) {
    Int(*value);
  } else {
    Null();
  }
}

void JsonWriter::StringArray(absl::string_view key,
                             absl::Span<const std::string> values) {
  Key(key);
  BeginArray();
  for (const std::string& v : values) String(v);
  EndArray();
}

void JsonWriter::IntArray(absl::string_view key,
                          absl::Span<const int64_t> values) {
  Key(key);
  BeginArray();
  for (int64_t v : values) Int(v);
  EndArray();
}

TextTable::TextTable(std::vector<std::string> headers,
                     std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_aligned_(std::move(right_aligned)) {
  CHECK_EQ(headers_.size(), right_aligned_.size());
}

void TextTable::AddRow(std::vector<std::string> cells) {
  CHECK_EQ(cells.size(), headers_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::Print(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(widths[c] - row[c].size(), ' ');
      line += right_aligned_[c] ? pad + row[c] : row[c] + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  };
  print_row(headers_);
  for (const auto& row : rows_) print_row(row);
}

std::string Printable(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::string CrcHex(uint32_t crc) { return absl::StrFormat("%08x", crc); }

std::string FormatMicros(int64_t micros) {
  if (micros < 1000) return absl::StrCat(micros, " us");
  if (micros < 1000000) return absl::StrFormat("%.1f ms", micros / 1e3);
  return absl::StrFormat("%.2f s", micros / 1e6);
}

std::string FormatUnixMicros(int64_t unix_micros) {
  if (unix_micros == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMicros(unix_micros),
                          absl::UTCTimeZone());
}

}  // namespace ckpt
}  // namespace jobgraph

// LevelDbType::Pack and Unpack (leveldb_db.h): a finished database as one
// string for another machine, and that string as a database again. Checked
// and made durable by the steps of the local copy (leveldb_copy.h), so that
// a database moved between machines is as trustworthy as one copied on one.
//
// The packed layout (all integers little-endian):
//
//   magic     8 bytes  "JGLDBPK\n"
//   version   4 bytes  kPackVersion
//   list      8-byte length, then the database's JOBGRAPH_FILES, verbatim
//   per file, in the list's order:
//     name    8-byte length, then the name
//     data    8-byte length, then the file's bytes
//   crc       4 bytes  CRC-32C of everything before it
//
// The list travels verbatim so that the copy's JOBGRAPH_FILES is the
// original's, byte for byte, as with Copy.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/leveldb/leveldb_copy.h"
#include "checkpoint/leveldb/leveldb_db.h"
#include "checkpoint/leveldb/leveldb_file_list.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/leveldb/leveldb_held.h"
#include "checkpoint/leveldb/leveldb_options.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"

namespace jobgraph {
namespace {

using leveldb_copy::CheckListedBytes;
using leveldb_copy::CopiedFile;
using leveldb_copy::Damaged;
using leveldb_copy::OpenListedFile;
using leveldb_copy::ScopedFd;
using leveldb_copy::StatListedFile;

constexpr absl::string_view kPackMagic("JGLDBPK\n", 8);
// Bumped when the layout changes: an Unpack that does not know the version
// refuses the string instead of misreading it.
constexpr uint32_t kPackVersion = 1;
constexpr size_t kVersionBytes = 4;
constexpr size_t kHeaderBytes = kPackMagic.size() + kVersionBytes;
constexpr size_t kLengthBytes = 8;
constexpr size_t kCrcBytes = 4;
// Header, the list's length, and the CRC: a packed database is never
// shorter.
constexpr size_t kMinPackedBytes = kHeaderBytes + kLengthBytes + kCrcBytes;

// The most one read(2) asks for: Linux returns at most 0x7ffff000 bytes
// from one anyway, and a file may be larger.
constexpr size_t kMaxReadBytes = size_t{1} << 30;

void AppendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  char field[8];
  for (size_t i = 0; i < bytes; ++i) {
    field[i] = static_cast<char>(value >> (8 * i));
  }
  out->append(field, bytes);
}

uint64_t LoadLittleEndian(const char* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) {
    value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return value;
}

std::string Hex8(uint32_t crc) {
  return absl::StrCat(absl::Hex(crc, absl::kZeroPad8));
}

// Appends the bytes of `source`, the file `listed` of a database, to `out`
// and returns their CRC-32C, checked against the record as they are read.
absl::StatusOr<uint32_t> AppendListedFile(const std::string& source,
                                          const ListedFile& listed,
                                          std::string* out) {
  JG_ASSIGN_OR_RETURN(ScopedFd in, OpenListedFile(source, listed));
  // Read in place: each byte is copied once, from the file into the string.
  const size_t start = out->size();
  out->resize(start + listed.size);
  char* const data = &(*out)[start];
  uint64_t size = 0;
  uint32_t crc = 0;
  while (size < listed.size) {
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(listed.size - size, kMaxReadBytes));
    const ssize_t n = ::read(in.get(), data + size, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", source));
    }
    if (n == 0) break;  // shorter than listed: CheckListedBytes says so
    crc = crc32c::Extend(crc, data + size, static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
  }
  if (size == listed.size) {
    // The file may have grown since it was opened: a byte past the recorded
    // size is one the record does not cover.
    char extra;
    ssize_t n;
    do {
      n = ::read(in.get(), &extra, 1);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", source));
    }
    if (n > 0) {
      return Damaged(source,
                     absl::StrCat("has more than ", listed.size, " bytes, ",
                                  kDbFileListName, " records ", listed.size));
    }
  }
  JG_RETURN_IF_ERROR(CheckListedBytes(source, listed, size, crc));
  return crc;
}

// One file of a packed database, pointing into the packed string.
struct PackedFile {
  absl::string_view name;
  absl::string_view contents;
  uint32_t crc = 0;  // of `contents`
};

struct Unpacked {
  absl::string_view list_bytes;
  std::vector<PackedFile> files;
  uint32_t crc = 0;  // of everything before the recorded CRC
  uint32_t recorded_crc = 0;
};

absl::Status PackDamaged(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("the packed database is damaged: ", what));
}

absl::Status CrcMismatch(uint32_t actual, uint32_t recorded) {
  return PackDamaged(absl::StrCat("it has CRC-32C ", Hex8(actual),
                                  ", its last ", kCrcBytes, " bytes record ",
                                  Hex8(recorded)));
}

// Takes the fields of a packed database front to back, keeping the CRC-32C
// of everything taken.
class PackReader {
 public:
  explicit PackReader(absl::string_view body) : rest_(body) {}

  bool empty() const { return rest_.empty(); }
  uint32_t crc() const { return crc_; }

  // The next `n` bytes; false, with nothing taken, when fewer are left.
  bool Take(uint64_t n, absl::string_view* bytes) {
    if (n > rest_.size()) return false;
    *bytes = rest_.substr(0, static_cast<size_t>(n));
    rest_.remove_prefix(static_cast<size_t>(n));
    crc_ = crc32c::Extend(crc_, bytes->data(), bytes->size());
    return true;
  }

  // A length and the bytes it counts.
  bool TakeField(absl::string_view* field) {
    uint64_t length;
    return TakeLength(&length) && Take(length, field);
  }

  // TakeField for a file's contents, whose CRC-32C goes to `*crc` and into
  // the running CRC by combination: each byte is checksummed once.
  bool TakeContents(absl::string_view* contents, uint32_t* crc) {
    uint64_t length;
    if (!TakeLength(&length) || length > rest_.size()) return false;
    *contents = rest_.substr(0, static_cast<size_t>(length));
    rest_.remove_prefix(static_cast<size_t>(length));
    *crc = Crc32c(*contents);
    crc_ = crc32c::Combine(crc_, *crc, length);
    return true;
  }

 private:
  bool TakeLength(uint64_t* length) {
    absl::string_view field;
    if (!Take(kLengthBytes, &field)) return false;
    *length = LoadLittleEndian(field.data(), kLengthBytes);
    return true;
  }

  absl::string_view rest_;
  uint32_t crc_ = 0;
};

// The fields of `packed` and its CRC, after checking its header. The CRC is
// compared after the files are checked against the list (CheckAgainstList),
// so that damage to a file is reported naming it.
absl::StatusOr<Unpacked> ParsePacked(absl::string_view packed) {
  if (packed.size() < kMinPackedBytes) {
    return PackDamaged(absl::StrCat("it is shorter than the ", kMinPackedBytes,
                                    " bytes of an empty one"));
  }
  if (!absl::StartsWith(packed, kPackMagic)) {
    return PackDamaged(absl::StrCat("it does not start with \"",
                                    absl::CHexEscape(kPackMagic), "\""));
  }
  const absl::string_view body = packed.substr(0, packed.size() - kCrcBytes);
  const uint32_t recorded = static_cast<uint32_t>(
      LoadLittleEndian(packed.data() + body.size(), kCrcBytes));
  const uint32_t version = static_cast<uint32_t>(
      LoadLittleEndian(packed.data() + kPackMagic.size(), kVersionBytes));
  if (version != kPackVersion) {
    // A damaged version field, or another layout: only the CRC tells which.
    const uint32_t actual = Crc32c(body);
    if (actual != recorded) return CrcMismatch(actual, recorded);
    return absl::FailedPreconditionError(
        absl::StrCat("the packed database has format version ", version,
                     "; this program reads version ", kPackVersion));
  }

  PackReader reader(body);
  absl::string_view header;
  reader.Take(kHeaderBytes, &header);  // checked above
  Unpacked unpacked;
  if (!reader.TakeField(&unpacked.list_bytes)) {
    return PackDamaged(
        absl::StrCat("its file list ", kDbFileListName, " runs past its end"));
  }
  while (!reader.empty()) {
    PackedFile file;
    if (!reader.TakeField(&file.name)) {
      return PackDamaged(absl::StrCat("the name of its file #",
                                      unpacked.files.size() + 1,
                                      " runs past its end"));
    }
    if (!reader.TakeContents(&file.contents, &file.crc)) {
      return PackDamaged(absl::StrCat("the contents of its file '",
                                      absl::CHexEscape(file.name),
                                      "' run past its end"));
    }
    unpacked.files.push_back(file);
  }
  unpacked.crc = reader.crc();
  unpacked.recorded_crc = recorded;
  return unpacked;
}

// DataLoss unless `unpacked` carries every file its list records, once,
// with the recorded size and CRC-32C, and nothing else. The names are then
// those of the list, which ParseLevelDbFileList checked are plain file names:
// no file is written outside the database.
absl::Status CheckAgainstList(const Unpacked& unpacked,
                              const std::vector<ListedFile>& listed) {
  std::map<absl::string_view, const ListedFile*> by_name;
  for (const ListedFile& file : listed) by_name[file.name] = &file;
  std::set<absl::string_view> carried;
  for (const PackedFile& file : unpacked.files) {
    auto it = by_name.find(file.name);
    if (it == by_name.end()) {
      return PackDamaged(
          absl::StrCat("it carries a file '", absl::CHexEscape(file.name),
                       "' that its ", kDbFileListName, " does not list"));
    }
    if (!carried.insert(file.name).second) {
      return PackDamaged(absl::StrCat("it carries ", file.name, " twice"));
    }
    const ListedFile& record = *it->second;
    if (file.contents.size() != record.size) {
      return PackDamaged(absl::StrCat(
          "its file ", file.name, " has ", file.contents.size(), " bytes, its ",
          kDbFileListName, " records ", record.size));
    }
    if (file.crc != record.crc) {
      return PackDamaged(absl::StrCat("its file ", file.name, " has CRC-32C ",
                                      Hex8(file.crc), ", its ", kDbFileListName,
                                      " records ", Hex8(record.crc)));
    }
  }
  for (const ListedFile& file : listed) {
    if (carried.count(file.name) == 0) {
      return PackDamaged(absl::StrCat("it lacks ", file.name, ", which its ",
                                      kDbFileListName, " lists"));
    }
  }
  return absl::OkStatus();
}

// What Unpack does once `to` exists: the files, their fsyncs, then the list,
// as Copy writes its copy. Returns the bytes of the files written.
absl::StatusOr<int64_t> WriteUnpacked(const std::string& to,
                                      const Unpacked& unpacked,
                                      bool direct_io) {
  int64_t bytes = static_cast<int64_t>(unpacked.list_bytes.size());
  for (const PackedFile& file : unpacked.files) {
    JG_ASSIGN_OR_RETURN(std::unique_ptr<CopiedFile> out,
                        CopiedFile::Create(JoinPath(to, file.name),
                                           file.contents.size(), direct_io));
    JG_RETURN_IF_ERROR(out->Append(file.contents));
    JG_RETURN_IF_ERROR(out->Close());
    bytes += static_cast<int64_t>(file.contents.size());
  }
  JG_RETURN_IF_ERROR(leveldb_copy::FinishCopy(to, unpacked.list_bytes));
  return bytes;
}

}  // namespace

absl::StatusOr<std::string> LevelDbType::Pack(const std::string& from) const {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(
        status.code(), absl::StrCat("cannot pack LevelDB database ", from, ": ",
                                    status.message()));
  };
  std::string list_bytes;
  absl::StatusOr<std::vector<ListedFile>> files =
      leveldb_copy::ReadFileListToCopy(from, &list_bytes);
  if (!files.ok()) return failed(files.status());
  // Every size first: a truncated or extended file fails before anything is
  // read, and the string is allocated once, at the size the files have.
  uint64_t total = kHeaderBytes + kLengthBytes + list_bytes.size() + kCrcBytes;
  for (const ListedFile& file : *files) {
    absl::Status status = StatListedFile(JoinPath(from, file.name), file);
    if (!status.ok()) return failed(status);
    total += 2 * kLengthBytes + file.name.size() + file.size;
  }
  std::string packed;
  if (total > packed.max_size()) {
    return failed(absl::ResourceExhaustedError(
        absl::StrCat("its ", total, " packed bytes do not fit in a string")));
  }
  packed.reserve(static_cast<size_t>(total));
  packed.append(kPackMagic.data(), kPackMagic.size());
  AppendLittleEndian(kPackVersion, kVersionBytes, &packed);
  AppendLittleEndian(list_bytes.size(), kLengthBytes, &packed);
  packed.append(list_bytes);
  uint32_t crc = Crc32c(packed);
  for (const ListedFile& file : *files) {
    const size_t entry = packed.size();
    AppendLittleEndian(file.name.size(), kLengthBytes, &packed);
    packed.append(file.name);
    AppendLittleEndian(file.size, kLengthBytes, &packed);
    crc = crc32c::Extend(crc, packed.data() + entry, packed.size() - entry);
    absl::StatusOr<uint32_t> file_crc =
        AppendListedFile(JoinPath(from, file.name), file, &packed);
    if (!file_crc.ok()) return failed(file_crc.status());
    // Each byte of the files is checksummed once, as it is read.
    crc = crc32c::Combine(crc, *file_crc, file.size);
  }
  AppendLittleEndian(crc, kCrcBytes, &packed);
  return packed;
}

namespace {

// `packed` parsed and checked: every file against the list it carries, the
// rest against its CRC.
absl::StatusOr<Unpacked> ParseAndCheck(absl::string_view packed) {
  JG_ASSIGN_OR_RETURN(Unpacked unpacked, ParsePacked(packed));
  JG_ASSIGN_OR_RETURN(
      std::vector<ListedFile> listed,
      ParseLevelDbFileList(
          unpacked.list_bytes,
          absl::StrCat("the packed database's file list ", kDbFileListName)));
  JG_RETURN_IF_ERROR(CheckAgainstList(unpacked, listed));
  // What the files' checks do not cover: the header, the lengths and
  // names, the CRC itself.
  if (unpacked.crc != unpacked.recorded_crc) {
    return CrcMismatch(unpacked.crc, unpacked.recorded_crc);
  }
  return unpacked;
}

}  // namespace

absl::StatusOr<int64_t> LevelDbType::Unpack(absl::string_view packed,
                                            const std::string& to) const {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(
        status.code(),
        absl::StrCat("cannot unpack a LevelDB database (", packed.size(),
                     " packed bytes) into ", to, ": ", status.message()));
  };
  // Everything is checked before anything is written.
  absl::StatusOr<Unpacked> unpacked = ParseAndCheck(packed);
  if (!unpacked.ok()) return failed(unpacked.status());
  absl::Status status;
  absl::StatusOr<bool> direct_io = DirectIoSetting(options_.direct_io);
  if (!direct_io.ok()) return failed(direct_io.status());

  // Nothing may be at `to`, and what is there is left alone.
  status = leveldb_copy::CreateCopyDir(to);
  if (!status.ok()) return failed(status);
  absl::StatusOr<int64_t> bytes = WriteUnpacked(to, *unpacked, *direct_io);
  if (!bytes.ok()) {
    leveldb_copy::RemovePartialCopy(to, "a packed LevelDB database");
    return failed(bytes.status());
  }
  return bytes;
}

absl::StatusOr<int64_t> LevelDbType::HoldPacked(std::string packed,
                                                const std::string& path) const {
  auto held = std::make_shared<HeldLevelDb>();
  held->packed = std::move(packed);  // the views below point into it
  absl::StatusOr<Unpacked> unpacked = ParseAndCheck(held->packed);
  if (!unpacked.ok()) {
    return absl::Status(
        unpacked.status().code(),
        absl::StrCat("cannot hold a packed LevelDB database (",
                     held->packed.size(), " bytes) in memory as ", path, ": ",
                     unpacked.status().message()));
  }
  int64_t bytes = static_cast<int64_t>(unpacked->list_bytes.size());
  held->files.emplace(kDbFileListName, unpacked->list_bytes);
  for (const PackedFile& file : unpacked->files) {
    held->files.emplace(std::string(file.name), file.contents);
    bytes += static_cast<int64_t>(file.contents.size());
  }
  JG_RETURN_IF_ERROR(RegisterHeldLevelDb(path, std::move(held)));
  return bytes;
}

void LevelDbType::ReleaseHeld(const std::string& path) const {
  ForgetHeldLevelDb(path);
}

}  // namespace jobgraph

#include "checkpoint/leveldb/leveldb_file_list.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "checkpoint/leveldb/leveldb_files.h"
#include "checkpoint/util/checksummed.h"
#include "checkpoint/util/crc32c.h"
#include "checkpoint/util/file_util.h"
#include "engine/status_macros.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {

absl::StatusOr<std::vector<ListedFile>> ParseLevelDbFileList(
    absl::string_view bytes, absl::string_view what) {
  JG_ASSIGN_OR_RETURN(Unframed unframed, UnframeChecksummed(bytes, what));
  DbFileList list;
  if (!list.ParseFromString(unframed.payload)) {
    return absl::DataLossError(absl::StrCat(what, " does not parse"));
  }
  std::vector<ListedFile> files;
  files.reserve(list.file_size());
  std::set<std::string> seen;
  for (const DbFile& file : list.file()) {
    const std::string& name = file.name();
    // Every reader joins the name to the database's path: a name that
    // leads elsewhere would make it read (or a copy write) outside it.
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos ||
        name == kDbFileListName) {
      return absl::DataLossError(
          absl::StrCat(what, " is damaged: it lists '", absl::CHexEscape(name),
                       "', which is not a file of the database"));
    }
    if (!seen.insert(name).second) {
      return absl::DataLossError(
          absl::StrCat(what, " is damaged: it lists ", name, " twice"));
    }
    if (file.size() < 0) {
      return absl::DataLossError(absl::StrCat(
          what, " is damaged: it records ", file.size(), " bytes for ", name));
    }
    files.push_back({name, static_cast<uint64_t>(file.size()), file.crc32c()});
  }
  return files;
}

absl::StatusOr<std::vector<ListedFile>> ReadLevelDbFileList(
    const std::string& path, std::string* bytes) {
  const std::string list_path = JoinPath(path, kDbFileListName);
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(list_path));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("LevelDB database ", path,
                                            " has no file list ", list_path));
  }
  JG_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(list_path));
  JG_ASSIGN_OR_RETURN(
      std::vector<ListedFile> files,
      ParseLevelDbFileList(contents, absl::StrCat("file list ", list_path)));
  if (bytes != nullptr) *bytes = std::move(contents);
  return files;
}

absl::Status VerifyLevelDbFileList(const std::string& path,
                                   const DB::FileCheck& check) {
  absl::StatusOr<std::vector<ListedFile>> list = ReadLevelDbFileList(path);
  if (absl::IsNotFound(list.status())) {
    if (!check.record_required) return absl::OkStatus();
    return absl::DataLossError(
        absl::StrCat("LevelDB database ", path, " is damaged: its file list ",
                     kDbFileListName,
                     " is missing (its blob index says the list was written)"));
  }
  if (!list.ok()) return list.status();
  // A log or table the database was not written with would be read too
  // (LevelDB's recovery replays every log it finds).
  std::set<std::string> listed;
  for (const ListedFile& file : *list) listed.insert(file.name);
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    absl::string_view stem = name;
    uint64_t number = 0;
    const bool leveldb_data = (absl::ConsumeSuffix(&stem, ".log") ||
                               absl::ConsumeSuffix(&stem, ".ldb") ||
                               absl::ConsumeSuffix(&stem, ".sst")) &&
                              absl::SimpleAtoi(stem, &number);
    if (leveldb_data && listed.count(name) == 0) {
      return absl::DataLossError(
          absl::StrCat("LevelDB database ", path, " is damaged: it holds ",
                       name, ", which it was not written with (",
                       kDbFileListName, " does not list it)"));
    }
  }
  for (const ListedFile& file : *list) {
    const std::string file_path = JoinPath(path, file.name);
    struct stat st;
    if (::stat(file_path.c_str(), &st) != 0) {
      return absl::DataLossError(absl::StrCat("LevelDB database ", path,
                                              " is damaged: its file ",
                                              file.name, " is missing"));
    }
    if (static_cast<uint64_t>(st.st_size) != file.size) {
      return absl::DataLossError(absl::StrCat(
          "LevelDB database ", path, " is damaged: ", file_path, " has ",
          st.st_size, " bytes, ", file.size, " were written"));
    }
    if (!check.read_contents) continue;
    JG_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(file_path));
    const uint32_t crc = Crc32c(contents);
    if (crc != file.crc) {
      return absl::DataLossError(
          absl::StrCat("LevelDB database ", path, " is damaged: ", file_path,
                       " has CRC-32C ", absl::Hex(crc, absl::kZeroPad8), ", ",
                       absl::Hex(file.crc, absl::kZeroPad8), " was written"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteLevelDbFileList(
    const std::string& path,
    const std::function<std::optional<WrittenFile>(const std::string&)>&
        recorded) {
  JG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
  DbFileList list;
  for (const std::string& name : names) {
    if (name == kDbFileListName) continue;
    const std::string file = JoinPath(path, name);
    std::optional<WrittenFile> written = recorded(file);
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("stat ", file));
    }
    if (!written.has_value() ||
        written->size != static_cast<uint64_t>(st.st_size)) {
      JG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(file));
      written = WrittenFile{bytes.size(), Crc32c(bytes)};
    }
    DbFile* entry = list.add_file();
    entry->set_name(name);
    entry->set_size(static_cast<int64_t>(written->size));
    entry->set_crc32c(written->crc);
  }
  return WriteFileAtomically(JoinPath(path, kDbFileListName),
                             FrameChecksummed(list.SerializeAsString()));
}

}  // namespace jobgraph

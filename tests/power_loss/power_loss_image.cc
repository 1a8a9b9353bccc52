#include "tests/power_loss/power_loss_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/power_loss/shadow_store.h"

namespace jobgraph {
namespace power_loss {
namespace {

constexpr int64_t kPage = 4096;

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errno("open", path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return Errno("write", path);
  return absl::OkStatus();
}

struct Entry {
  bool dir = false;
  std::string key;
  std::string name;
};

// The entries of the directory `path` as they are now, by name.
absl::StatusOr<std::vector<Entry>> ListNow(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return Errno("opendir", path);
  std::vector<Entry> entries;
  while (struct dirent* d = ::readdir(dir)) {
    const std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    Entry entry;
    bool regular = false;
    if (!StatKey(::dirfd(dir), name.c_str(), 0, &entry.key, &entry.dir,
                 &regular)) {
      ::closedir(dir);
      return Errno("statx", absl::StrCat(path, "/", name));
    }
    if (!entry.dir && !regular) continue;
    entry.name = name;
    entries.push_back(std::move(entry));
  }
  ::closedir(dir);
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

std::string Listing(const std::vector<Entry>& entries) {
  std::string listing;
  for (const Entry& e : entries) {
    absl::StrAppend(&listing, e.dir ? "d " : "f ", e.key, " ", e.name, "\n");
  }
  return listing;
}

absl::StatusOr<std::vector<Entry>> ParseListing(const std::string& listing,
                                                const std::string& path) {
  std::vector<Entry> entries;
  for (absl::string_view line : absl::StrSplit(listing, '\n')) {
    if (line.empty()) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() < 3 || (parts[0] != "d" && parts[0] != "f")) {
      return absl::DataLossError(
          absl::StrCat("bad line in ", path, ": ", line));
    }
    Entry entry;
    entry.dir = parts[0] == "d";
    entry.key = std::string(parts[1]);
    // A name may hold spaces: everything after the second one.
    entry.name =
        std::string(line.substr(parts[0].size() + parts[1].size() + 2));
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::Status Record(const std::string& path, const std::string& shadow) {
  absl::StatusOr<std::vector<Entry>> entries = ListNow(path);
  if (!entries.ok()) return entries.status();
  std::string key;
  bool dir = false, regular = false;
  if (!StatKey(AT_FDCWD, path.c_str(), 0, &key, &dir, &regular)) {
    return Errno("statx", path);
  }
  if (absl::Status s =
          WriteAll(absl::StrCat(shadow, "/dirs/", key), Listing(*entries));
      !s.ok()) {
    return s;
  }
  for (const Entry& e : *entries) {
    const std::string child = absl::StrCat(path, "/", e.name);
    if (e.dir) {
      if (absl::Status s = Record(child, shadow); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<std::string> bytes = ReadAll(child);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s =
            WriteAll(absl::StrCat(shadow, "/files/", e.key), *bytes);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Where each inode is under `root` now, by key (for torn images).
absl::Status IndexNow(const std::string& path,
                      std::map<std::string, std::string>* where) {
  absl::StatusOr<std::vector<Entry>> entries = ListNow(path);
  if (!entries.ok()) return entries.status();
  for (const Entry& e : *entries) {
    const std::string child = absl::StrCat(path, "/", e.name);
    if (e.dir) {
      if (absl::Status s = IndexNow(child, where); !s.ok()) return s;
    } else {
      where->emplace(e.key, child);
    }
  }
  return absl::OkStatus();
}

struct Builder {
  std::string shadow;
  ImageOptions options;
  std::map<std::string, std::string> now;     // key -> path under root
  std::map<std::string, std::string> placed;  // key -> path in the image
  std::mt19937 rng;
  ImageStats stats;

  absl::StatusOr<std::string> DurableBytes(const std::string& key) {
    const std::string path = absl::StrCat(shadow, "/files/", key);
    if (::access(path.c_str(), F_OK) != 0)
      return std::string();  // never synced
    return ReadAll(path);
  }

  absl::Status File(const std::string& key, const std::string& out) {
    if (auto it = placed.find(key); it != placed.end()) {
      if (::link(it->second.c_str(), out.c_str()) != 0) {
        return Errno("link", out);
      }
      return absl::OkStatus();
    }
    absl::StatusOr<std::string> bytes = DurableBytes(key);
    if (!bytes.ok()) return bytes.status();
    if (options.torn) {
      if (auto it = now.find(key); it != now.end()) {
        absl::StatusOr<std::string> current = ReadAll(it->second);
        if (!current.ok()) return current.status();
        const int64_t synced = static_cast<int64_t>(bytes->size());
        const int64_t size = static_cast<int64_t>(current->size());
        if (size > synced && current->compare(0, synced, *bytes) == 0) {
          // The page holding the synced end, then whole pages, may have
          // reached the disk; a cut inside the rest lands on a page boundary.
          const int64_t first = (synced + kPage - 1) / kPage * kPage;
          const int64_t pages = (size - first + kPage - 1) / kPage;
          const int64_t keep_pages = std::uniform_int_distribution<int64_t>(
              0, std::max<int64_t>(pages, 0))(rng);
          const int64_t keep =
              std::min(size, std::max(synced, first + keep_pages * kPage));
          stats.torn_bytes += keep - synced;
          *bytes = current->substr(0, static_cast<size_t>(keep));
        }
      }
    }
    if (absl::Status s = WriteAll(out, *bytes); !s.ok()) return s;
    placed.emplace(key, out);
    ++stats.files;
    return absl::OkStatus();
  }

  absl::Status Directory(const std::string& key, const std::string& out) {
    if (::mkdir(out.c_str(), 0755) != 0) return Errno("mkdir", out);
    ++stats.directories;
    const std::string listing_path = absl::StrCat(shadow, "/dirs/", key);
    if (::access(listing_path.c_str(), F_OK) != 0) {
      return absl::OkStatus();  // created, never synced: empty
    }
    absl::StatusOr<std::string> listing = ReadAll(listing_path);
    if (!listing.ok()) return listing.status();
    absl::StatusOr<std::vector<Entry>> entries =
        ParseListing(*listing, listing_path);
    if (!entries.ok()) return entries.status();
    for (const Entry& e : *entries) {
      const std::string child = absl::StrCat(out, "/", e.name);
      absl::Status s = e.dir ? Directory(e.key, child) : File(e.key, child);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status Start(const std::string& root, const std::string& shadow) {
  for (const std::string& dir :
       {shadow, shadow + "/files", shadow + "/dirs", shadow + "/events"}) {
    if (::mkdir(dir.c_str(), 0755) != 0) return Errno("mkdir", dir);
  }
  std::string key;
  bool dir = false, regular = false;
  if (!StatKey(AT_FDCWD, root.c_str(), 0, &key, &dir, &regular) || !dir) {
    return absl::InvalidArgumentError(
        absl::StrCat("power loss root ", root, " is not a directory"));
  }
  if (absl::Status s = WriteAll(shadow + "/root", key + "\n"); !s.ok()) {
    return s;
  }
  return Record(root, shadow);
}

std::vector<std::string> Environment(const std::string& preload_library,
                                     const std::string& root,
                                     const std::string& shadow,
                                     int64_t crash_at, int crash_rank,
                                     int64_t sigterm_at) {
  std::vector<std::string> env = {absl::StrCat("LD_PRELOAD=", preload_library),
                                  absl::StrCat(kRootEnv, "=", root),
                                  absl::StrCat(kShadowEnv, "=", shadow),
                                  absl::StrCat(kCrashAtEnv, "=", crash_at),
                                  absl::StrCat(kSigtermAtEnv, "=", sigterm_at)};
  if (crash_rank >= 0)
    env.push_back(absl::StrCat(kCrashRankEnv, "=", crash_rank));
  return env;
}

absl::StatusOr<std::vector<ProcessEvents>> ReadEvents(
    const std::string& shadow) {
  const std::string dir = shadow + "/events";
  absl::StatusOr<std::vector<Entry>> files = ListNow(dir);
  if (!files.ok()) return files.status();
  std::vector<ProcessEvents> processes;
  for (const Entry& file : *files) {
    ProcessEvents process;
    absl::string_view name = file.name;  // rank<r>.<pid>
    std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
    if (parts.size() != 2 || !absl::ConsumePrefix(&parts[0], "rank") ||
        !absl::SimpleAtoi(parts[0], &process.rank)) {
      return absl::DataLossError(absl::StrCat("bad events file ", file.name));
    }
    absl::StatusOr<std::string> text = ReadAll(absl::StrCat(dir, "/", name));
    if (!text.ok()) return text.status();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (line.empty()) continue;
      const size_t space = line.find(' ');
      int64_t n = 0;
      if (space == line.npos || !absl::SimpleAtoi(line.substr(0, space), &n) ||
          n != static_cast<int64_t>(process.events.size()) + 1) {
        return absl::DataLossError(
            absl::StrCat("bad event in ", file.name, ": ", line));
      }
      process.events.emplace_back(line.substr(space + 1));
    }
    processes.push_back(std::move(process));
  }
  return processes;
}

bool PowerWasCut(const std::string& shadow) {
  return ::access((shadow + "/frozen").c_str(), F_OK) == 0;
}

absl::StatusOr<ImageStats> BuildImage(const std::string& shadow,
                                      const std::string& image,
                                      const std::string& root,
                                      const ImageOptions& options) {
  absl::StatusOr<std::string> root_key = ReadAll(shadow + "/root");
  if (!root_key.ok()) return root_key.status();
  Builder builder;
  builder.shadow = shadow;
  builder.options = options;
  builder.rng.seed(options.seed);
  if (options.torn) {
    if (absl::Status s = IndexNow(root, &builder.now); !s.ok()) return s;
  }
  std::string key = *root_key;
  while (!key.empty() && key.back() == '\n') key.pop_back();
  if (absl::Status s = builder.Directory(key, image); !s.ok()) return s;
  return builder.stats;
}

}  // namespace power_loss
}  // namespace jobgraph

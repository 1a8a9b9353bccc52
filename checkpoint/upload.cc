#include "checkpoint/upload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/ops/blob_index.h"
#include "checkpoint/util/file_util.h"
#include "engine/net_builder.h"
#include "engine/ops/function_op.h"
#include "engine/status_macros.h"
#include "glog/logging.h"

namespace jobgraph {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status CopyFile(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY);
  if (in < 0) return Errno("cannot open", from);
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (out < 0) {
    absl::Status s = Errno("cannot create", to);
    ::close(in);
    return s;
  }
  std::vector<char> buffer(size_t{4} << 20);
  absl::Status status;
  while (status.ok()) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = Errno("cannot read", from);
      break;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buffer.data() + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        status = Errno("cannot write", to);
        break;
      }
      done += w;
    }
  }
  if (status.ok() && ::fsync(out) != 0) status = Errno("cannot fsync", to);
  ::close(in);
  ::close(out);
  return status;
}

// Copies `from` under a temporary name beside `to`, then puts it in place
// atomically: a rename, or, when `to` exists (a re-run publishing into the
// same directory, as Caffe2 allows), an exchange followed by the deletion of
// the old copy. A reader of `to` sees the old copy or the new one, never a
// mix, and a failed copy leaves `to` as it was.
absl::Status CopyIntoPlace(const std::string& from, const std::string& to) {
  const std::string temp = absl::StrCat(to, ".tmp-upload-", ::getpid());
  JG_ASSIGN_OR_RETURN(bool stale, PathExists(temp));
  if (stale) JG_RETURN_IF_ERROR(RemoveRecursively(temp));
  absl::Status copied = CopyRecursively(from, temp);
  if (!copied.ok()) {
    absl::Status removed = RemoveRecursively(temp);
    if (!removed.ok()) LOG(WARNING) << removed;
    return copied;
  }
  JG_ASSIGN_OR_RETURN(bool replace, PathExists(to));
  if (!replace) return RenameAndSync(temp, to);
  JG_RETURN_IF_ERROR(ExchangeAndSync(temp, to));
  return RemoveRecursively(temp);
}

absl::Status CopyCheckpointFunction(FunctionContext& context) {
  const std::string from = context.GetArg<std::string>("from", "");
  const std::string db_type = context.GetArg<std::string>("db_type", "");
  if (!db_type.empty()) {
    // A database of an incremental save reads blobs from its neighbours:
    // a copy of it alone would not restore.
    JG_ASSIGN_OR_RETURN(BlobIndex index, ReadBlobIndexAt(db_type, from));
    if (index.referenced_epoch_size() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot upload ", from, ": it holds blobs by reference to epoch",
          index.referenced_epoch_size() > 1 ? "s " : " ",
          absl::StrJoin(index.referenced_epoch(), ", "),
          " (an incremental save by a run without an upload); resume from an "
          "earlier epoch with the upload so that the last epoch is saved in "
          "full"));
    }
  }
  return CopyIntoPlace(from, context.GetArg<std::string>("to", ""));
}

const bool kCopyRegistered = [] {
  absl::Status s = FunctionRegistry::Global().Register(
      "jobgraph.copy_checkpoint", CopyCheckpointFunction);
  CHECK(s.ok()) << s;
  return true;
}();

}  // namespace

absl::Status CopyRecursively(const std::string& from, const std::string& to) {
  struct stat st;
  if (::lstat(from.c_str(), &st) != 0) return Errno("cannot read", from);
  JG_ASSIGN_OR_RETURN(bool exists, PathExists(to));
  if (exists) {
    return absl::AlreadyExistsError(
        absl::StrCat("cannot copy ", from, " to ", to, ": it already exists"));
  }
  if (!S_ISDIR(st.st_mode)) return CopyFile(from, to);
  JG_RETURN_IF_ERROR(CreateDir(to));
  JG_ASSIGN_OR_RETURN(std::vector<std::string> entries, ListDir(from));
  for (const std::string& entry : entries) {
    JG_RETURN_IF_ERROR(
        CopyRecursively(JoinPath(from, entry), JoinPath(to, entry)));
  }
  return FsyncDir(to);
}

absl::StatusOr<TaskGroup> UploadToLocalDirectory::Build(
    int64_t epoch, const Checkpointer& checkpointer) {
  TaskGroup group("upload", GLOBAL);
  for (const std::string& node : checkpointer.nodes()) {
    // The copy runs on the node that wrote the database and is named like
    // the database, without the epoch.
    const std::string& name = checkpointer.options().node_name.empty()
                                  ? node
                                  : checkpointer.options().node_name;
    Task& task = group.NewTask(Node(node), {.name = "upload"});
    task.net().Op("Function", {}, std::vector<BlobRef>{},
                  {MakeArg("func", "jobgraph.copy_checkpoint"),
                   MakeArg("from", *checkpointer.DbPath(node, epoch)),
                   MakeArg("db_type", checkpointer.options().db_type),
                   MakeArg("to", JoinPath(directory_, name))});
  }
  return group;
}

}  // namespace jobgraph

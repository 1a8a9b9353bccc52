#include "engine/data/text_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/data/cursor_reader.h"

namespace jobgraph {

Reader TextFile::NewReader(NetBuilder& init_net, int64_t batch_size,
                           int64_t buffer_bytes) const {
  data_internal::CursorReaderSpec spec;
  spec.name = name_;
  spec.cursor = init_net.Op("CreateFileCursor", {},
                            {BlobRef(absl::StrCat(name_, "_cursor"))},
                            {MakeArg("path", path_)})[0];
  spec.read_op = "ReadLines";
  spec.fields = {"line"};
  spec.read_args = {MakeArg("batch_size", batch_size),
                    MakeArg("buffer_bytes", buffer_bytes)};
  spec.reset_op = "ResetCursor";
  return data_internal::MakeCursorReader(std::move(spec));
}

}  // namespace jobgraph

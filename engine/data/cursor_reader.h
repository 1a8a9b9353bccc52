// The Reader shared by every cursor-based source (Dataset, shuffled Dataset,
// text file): one read op takes the cursor (and the source's field blobs) and
// writes the batch; should_stop = IsEmpty(first batch field).
//
// Internal to //engine/data: sources fill in a CursorReaderSpec.
// Immutable; see reader.h for thread-safety.

#ifndef JOBGRAPH_ENGINE_DATA_CURSOR_READER_H_
#define JOBGRAPH_ENGINE_DATA_CURSOR_READER_H_

#include <string>
#include <vector>

#include "engine/data/reader.h"
#include "engine/net_builder.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace data_internal {

struct CursorReaderSpec {
  // The reader's name. Batch blobs are "<name>/read/<field>", the
  // should_stop blob "<name>/read/empty".
  std::string name;
  BlobRef cursor;
  // The read op: inputs (cursor, sources...), one output per field.
  std::string read_op;
  std::vector<BlobRef> sources;
  std::vector<std::string> fields;
  std::vector<Argument> read_args;
  // An op on the cursor alone, added to the task init nets by SetupEx;
  // empty for none.
  std::string setup_op;
  std::vector<Argument> setup_args;
  // The op on the cursor alone that Reset adds.
  std::string reset_op;
  std::vector<Argument> reset_args;
};

Reader MakeCursorReader(CursorReaderSpec spec);

}  // namespace data_internal
}  // namespace jobgraph

#endif  // JOBGRAPH_ENGINE_DATA_CURSOR_READER_H_

#include "tests/caffe2_pipeline.h"

#include "absl/strings/str_cat.h"
#include "engine/data/dataset.h"
#include "engine/data/pipe.h"
#include "engine/data/reader_with_limit.h"
#include "engine/data/record.h"
#include "glog/logging.h"

namespace jobgraph {
namespace testing {

void BuildCaffe2Pipeline(Job& job, int id) {
  Node node(absl::StrCat("trainer_", id));
  Task& init = job.init_group().NewTask(node);
  Record data = ConstRecord(init.net(), {{"val", Tensor::Iota<int64_t>(10)}});
  Reader reader =
      Dataset(data, absl::StrCat("dataset:", id)).NewReader(init.net());
  BlobRef total = init.net().Const<int64_t>("total", {100});
  ReaderWithLimit limited(reader, /*num_iter=*/3);
  Pipe(job.epoch_group(), node, limited,
       [total](NetBuilder& net, const Record& row) {
         net.Add(total, row.Field("val"), total);
       });
  job.AddStopCondition(limited.data_finished());
}

int64_t Caffe2Total(const Session& session, int id) {
  absl::StatusOr<Tensor> total =
      session.FetchBlob(absl::StrCat("trainer_", id), "total");
  CHECK(total.ok()) << total.status();
  return total->data<int64_t>()[0];
}

}  // namespace testing
}  // namespace jobgraph

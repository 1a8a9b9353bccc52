// Write generations at the operator level: an operator that writes a tensor
// leaves it with a new generation (Tensor::generation), and a tensor it only
// reads keeps its own, so that an incremental checkpoint may skip what a run
// did not write. Each op runs several times through one operator object, as
// a net runs it: the first run may allocate its outputs, the later ones
// write into storage that already has the right type and shape, where only
// the mutable accessors move the generation on. A write path that forgot to
// take a fresh generation fails here.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/blob.h"
#include "engine/net_builder.h"
#include "engine/operator.h"
#include "engine/ops/test_util.h"
#include "engine/session.h"
#include "engine/task.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::FloatArg;
using ::jobgraph::ops_test::FloatsArg;
using ::jobgraph::ops_test::IntArg;
using ::jobgraph::ops_test::IntsArg;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::StringArg;
using ::jobgraph::ops_test::StringsArg;
using ::jobgraph::ops_test::TensorOf;

// What a workspace's tensors held under each generation seen: a tensor seen
// again with a known generation must hold the same, bit for bit (the
// guarantee itself; copies may carry their source's generation).
class ContentsByGeneration {
 public:
  void Check(const Workspace& ws) {
    for (const std::string& name : ws.BlobNames()) {
      const Blob* blob = ws.GetBlob(name);
      if (blob == nullptr || !blob->IsType<Tensor>()) continue;
      const Tensor& t = blob->Get<Tensor>();
      EXPECT_NE(t.generation(), 0u) << name;
      auto [it, added] = contents_.try_emplace(t.generation(), t);
      EXPECT_TRUE(added || it->second.BitwiseEquals(t))
          << "'" << name << "' holds " << t.DebugString()
          << " under generation " << t.generation() << ", which stood for "
          << it->second.DebugString();
    }
  }

 private:
  std::unordered_map<uint64_t, Tensor> contents_;
};

class GenerationTest : public ::testing::Test {
 protected:
  // Runs `def` `runs` times through one operator object. After each run,
  // every output that holds a tensor has a generation it did not have before
  // the run, and every tensor input that is not also an output kept its own.
  void RunAndCheck(const OperatorDef& def, int runs = 3) {
    SCOPED_TRACE(def.ShortDebugString());
    absl::StatusOr<std::unique_ptr<OperatorBase>> op = CreateOp(def, &ws_);
    ASSERT_TRUE(op.ok()) << op.status();
    const std::set<std::string> outputs(def.output().begin(),
                                        def.output().end());
    std::set<std::string> read_only;
    for (const std::string& name : def.input()) {
      if (outputs.count(name) == 0) read_only.insert(name);
    }
    for (int run = 0; run < runs; ++run) {
      SCOPED_TRACE(absl::StrCat("run ", run));
      std::unordered_map<std::string, uint64_t> before;
      for (const std::string& name : def.input()) Remember(name, &before);
      for (const std::string& name : outputs) Remember(name, &before);
      const absl::Status status = (*op)->Run();
      ASSERT_TRUE(status.ok()) << status;
      for (const std::string& name : outputs) {
        const Tensor* t = TensorIn(name);
        if (t == nullptr) continue;  // a counter, cursor, timer
        auto it = before.find(name);
        if (it == before.end()) continue;  // created by this run
        EXPECT_NE(t->generation(), it->second)
            << "output '" << name << "' was written but kept its generation";
      }
      for (const std::string& name : read_only) {
        const Tensor* t = TensorIn(name);
        if (t == nullptr) continue;
        EXPECT_EQ(t->generation(), before.at(name))
            << "input '" << name << "' was only read but its generation moved";
      }
      contents_.Check(ws_);
    }
  }

  // Records the generation of the tensor in blob `name`, if it holds one.
  void Remember(const std::string& name,
                std::unordered_map<std::string, uint64_t>* generations) const {
    if (const Tensor* t = TensorIn(name); t != nullptr) {
      (*generations)[name] = t->generation();
    }
  }

  // The tensor in blob `name`, or null when the blob holds something else
  // or does not exist.
  const Tensor* TensorIn(const std::string& name) const {
    const Blob* blob = ws_.GetBlob(name);
    return blob != nullptr && blob->IsType<Tensor>() ? &blob->Get<Tensor>()
                                                     : nullptr;
  }

  Workspace ws_;
  ContentsByGeneration contents_;
};

TEST_F(GenerationTest, FillOps) {
  ws_.SetTensor("like", Tensor(INT32, {2, 2}));
  RunAndCheck(MakeOp("ConstantFill", {}, {"f"},
                     {IntsArg("shape", {3}), FloatArg("value", 2)}));
  RunAndCheck(MakeOp("ConstantFill", {"like"}, {"i"},
                     {IntArg("dtype", INT64), IntArg("value", 7)}));
  RunAndCheck(MakeOp("ConstantFill", {}, {"s"},
                     {IntsArg("shape", {2}), IntArg("dtype", STRING),
                      StringArg("value", "x")}));
  RunAndCheck(
      MakeOp("GivenTensorFill", {}, {"g"}, {FloatsArg("values", {1, 2, 3})}));
  RunAndCheck(
      MakeOp("GivenTensorInt64Fill", {}, {"g64"}, {IntsArg("values", {4, 5})}));
  RunAndCheck(
      MakeOp("GivenTensorBoolFill", {}, {"gb"}, {IntsArg("values", {1, 0})}));
  RunAndCheck(MakeOp("GivenTensorStringFill", {}, {"gs"},
                     {StringsArg("values", {"a", "b"})}));
}

TEST_F(GenerationTest, ElementwiseOps) {
  ws_.SetTensor("a", Tensor::FromVector<float>({1, 2, 3}));
  ws_.SetTensor("b", Tensor::FromVector<float>({4, 5, 6}));
  ws_.SetTensor("two", Tensor::Scalar<float>(2));
  ws_.SetTensor("i", Tensor::FromVector<int64_t>({7, 8}));
  ws_.SetTensor("p", Tensor::FromVector<bool>({true, false}));
  ws_.SetTensor("q", Tensor::FromVector<bool>({true, true}));
  RunAndCheck(MakeOp("Add", {"a", "b"}, {"sum"}));
  RunAndCheck(MakeOp("Sub", {"a", "two"}, {"diff"}));  // broadcast
  RunAndCheck(MakeOp("Mul", {"i", "i"}, {"square"}));
  RunAndCheck(MakeOp("Div", {"b", "a"}, {"ratio"}));
  RunAndCheck(MakeOp("LT", {"a", "b"}, {"lt"}));
  RunAndCheck(MakeOp("EQ", {"i", "i"}, {"eq"}));
  RunAndCheck(MakeOp("And", {"p", "q"}, {"and"}));
  RunAndCheck(MakeOp("Or", {"p", "q"}, {"or"}));
  RunAndCheck(MakeOp("Not", {"p"}, {"not"}));
}

// Output == input: the op reads and writes one tensor.
TEST_F(GenerationTest, InPlaceOps) {
  ws_.SetTensor("a", Tensor::FromVector<float>({1, 2, 3}));
  ws_.SetTensor("b", Tensor::FromVector<float>({4, 5, 6}));
  ws_.SetTensor("i", Tensor::FromVector<int64_t>({7, 8}));
  ws_.SetTensor("p", Tensor::FromVector<bool>({true, false}));
  ws_.SetTensor("flag", Tensor::Scalar<bool>(false));
  ws_.SetTensor("yes", Tensor::Scalar<bool>(true));
  RunAndCheck(MakeOp("Add", {"a", "b"}, {"a"}));
  RunAndCheck(MakeOp("Mul", {"i", "i"}, {"i"}));
  RunAndCheck(MakeOp("Not", {"p"}, {"p"}));
  RunAndCheck(MakeOp("AtomicOr", {"flag", "yes"}, {"flag"}));
  // A result of another shape than the input it replaces.
  ws_.SetTensor("s", Tensor::Scalar<float>(1));
  RunAndCheck(MakeOp("Add", {"s", "b"}, {"s"}));
}

TEST_F(GenerationTest, CopyAndMiscOps) {
  ws_.SetTensor("x", Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2}));
  ws_.SetTensor("words", Tensor::FromVector<std::string>({"a", "bc"}));
  ws_.SetTensor("old_words", Tensor::FromVector<std::string>({"", ""}));
  RunAndCheck(MakeOp("Copy", {"x"}, {"y"}));
  RunAndCheck(MakeOp("Copy", {"words"}, {"old_words"}));
  RunAndCheck(MakeOp("IsEmpty", {"x"}, {"empty"}));
  RunAndCheck(MakeOp("Print", {"x"}, {}));
  // A copy onto itself writes nothing, so the generation stays.
  const uint64_t x = TensorOf(ws_, "x").generation();
  ASSERT_TRUE(RunOp(MakeOp("Copy", {"x"}, {"x"}), &ws_).ok());
  EXPECT_EQ(TensorOf(ws_, "x").generation(), x);
}

TEST_F(GenerationTest, CounterAndTimerOps) {
  ASSERT_TRUE(
      RunOp(MakeOp("CreateCounter", {}, {"c"}, {IntArg("init_count", 100)}),
            &ws_)
          .ok());
  RunAndCheck(MakeOp("CountDown", {"c"}, {"done"}));
  RunAndCheck(MakeOp("CountUp", {"c"}, {"previous"}));
  RunAndCheck(MakeOp("RetrieveCount", {"c"}, {"count"}));
  RunAndCheck(MakeOp("CheckCounterDone", {"c"}, {"is_done"}));
  RunAndCheck(MakeOp("ResetCounter", {"c"}, {"before_reset"}));
  ASSERT_TRUE(RunOp(MakeOp("TimerBegin", {}, {"t"}), &ws_).ok());
  RunAndCheck(MakeOp("TimerGet", {"t"}, {"elapsed"}));
}

TEST_F(GenerationTest, DatasetAndReaderOps) {
  ws_.SetTensor("ids", Tensor::Iota<int64_t>(12));
  ws_.SetTensor("names", Tensor::FromVector<std::string>(
                             {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7",
                              "r8", "r9", "r10", "r11"}));
  const std::vector<std::string> fields = {"id", "name"};
  ASSERT_TRUE(RunOp(MakeOp("CreateTreeCursor", {}, {"cursor"},
                           {StringsArg("fields", fields)}),
                    &ws_)
                  .ok());
  RunAndCheck(MakeOp("ReadNextBatch", {"cursor", "ids", "names"},
                     {"batch_ids", "batch_names"}, {IntArg("batch_size", 2)}));
  ASSERT_TRUE(RunOp(MakeOp("CreateShuffleCursor", {}, {"shuffle"},
                           {StringsArg("fields", fields), IntArg("seed", 3)}),
                    &ws_)
                  .ok());
  RunAndCheck(MakeOp("ReadNextShuffledBatch", {"shuffle", "ids", "names"},
                     {"shuffled_ids", "shuffled_names"},
                     {IntArg("batch_size", 2)}));

  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/generation_lines.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 10; ++i) out << "line " << i << "\n";
  }
  ASSERT_TRUE(
      RunOp(MakeOp("CreateFileCursor", {}, {"file"}, {StringArg("path", path)}),
            &ws_)
          .ok());
  RunAndCheck(
      MakeOp("ReadLines", {"file"}, {"lines"}, {IntArg("batch_size", 2)}));
}

// The collective ops, through a LocalSession of two nodes: the session keeps
// each node's workspace from one run to the next.
TEST(CollectiveGenerationTest, AllreduceAndBroadcastWriteOnlyTheirOutputs) {
  LocalSession session;
  const std::vector<std::string> nodes = {"n0", "n1"};
  for (int i = 0; i < 2; ++i) {
    Workspace* ws = session.NodeWorkspace(nodes[i]);
    ws->SetTensor("x", Tensor::FromVector<float>({static_cast<float>(i), 1}));
    ws->SetTensor("sum", Tensor(FLOAT, {2}));
    ws->SetTensor("first", Tensor(FLOAT, {2}));
    ws->SetTensor("acc", Tensor::FromVector<int64_t>({i, 1}));
  }
  ContentsByGeneration contents;
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    TaskGroup group("g", GLOBAL);
    for (const std::string& node : nodes) {
      Task& task = group.NewTask(Node(node));
      task.net().Op("Allreduce", {BlobRef("x")}, {BlobRef("sum")});
      task.net().Op("Broadcast", {BlobRef("x")}, {BlobRef("first")});
      task.net().Op("Allreduce", {BlobRef("acc")}, {BlobRef("acc")});
    }
    std::unordered_map<std::string, uint64_t> before;
    for (const std::string& node : nodes) {
      const Workspace& ws = *session.NodeWorkspace(node);
      for (const char* name : {"x", "sum", "first", "acc"}) {
        before[absl::StrCat(node, "/", name)] = TensorOf(ws, name).generation();
      }
    }
    const absl::Status status = session.Run(group);
    ASSERT_TRUE(status.ok()) << status;
    for (const std::string& node : nodes) {
      SCOPED_TRACE(node);
      const Workspace& ws = *session.NodeWorkspace(node);
      EXPECT_EQ(TensorOf(ws, "x").generation(), before[node + "/x"]);
      for (const char* name : {"sum", "first", "acc"}) {
        EXPECT_NE(TensorOf(ws, name).generation(),
                  before[absl::StrCat(node, "/", name)])
            << name;
      }
      contents.Check(ws);
    }
  }
}

}  // namespace
}  // namespace jobgraph

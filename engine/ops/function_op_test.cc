#include "engine/ops/function_op.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/net.h"
#include "engine/ops/test_util.h"
#include "engine/status_macros.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::IntArg;
using ::jobgraph::ops_test::MakeOp;
using ::jobgraph::ops_test::RunOp;
using ::jobgraph::ops_test::StringArg;
using ::jobgraph::ops_test::TensorOf;
using ::jobgraph::ops_test::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

// Registered once for the whole test binary; the registry is process-wide.
class FunctionOpTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // scale(x -> y): y = x * arg `factor`, and records the blob names seen.
    ASSERT_TRUE(
        FunctionRegistry::Global()
            .Register("test.scale",
                      [](FunctionContext& ctx) -> absl::Status {
                        if (ctx.InputSize() != 1 || ctx.OutputSize() != 1) {
                          return absl::InvalidArgumentError(
                              "scale takes one input and one output");
                        }
                        JG_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
                        const int64_t factor = ctx.GetArg<int64_t>("factor", 1);
                        Tensor y = *x;
                        for (int64_t& v : absl::Span<int64_t>(
                                 y.mutable_data<int64_t>(), y.numel())) {
                          v *= factor;
                        }
                        *ctx.Output(0) = std::move(y);
                        ctx.workspace()->SetTensor(
                            "seen",
                            Tensor::Scalar<std::string>(absl::StrCat(
                                ctx.InputName(0), "->", ctx.OutputName(0))));
                        return absl::OkStatus();
                      })
            .ok());
    ASSERT_TRUE(FunctionRegistry::Global()
                    .Register("test.fail",
                              [](FunctionContext&) {
                                return absl::DataLossError("upload broke");
                              })
                    .ok());
  }
};

TEST_F(FunctionOpTest, RunsRegisteredFunction) {
  Workspace ws;
  ws.SetTensor("x", Tensor::FromVector<int64_t>({1, 2, 3}));
  ASSERT_TRUE(
      RunOp(MakeOp("Function", {"x"}, {"y"},
                   {StringArg("func", "test.scale"), IntArg("factor", 10)}),
            &ws)
          .ok());
  EXPECT_THAT(Values<int64_t>(TensorOf(ws, "y")), ElementsAre(10, 20, 30));
  EXPECT_EQ(TensorOf(ws, "seen").scalar<std::string>(), "x->y");
}

TEST_F(FunctionOpTest, ErrorsKeepTheirCodeAndNameTheOp) {
  Workspace ws;
  absl::Status s =
      RunOp(MakeOp("Function", {}, {}, {StringArg("func", "test.fail")}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(std::string(s.message()), "op Function( -> ): upload broke");
}

TEST_F(FunctionOpTest, InputErrorsNameTheOpOnce) {
  Workspace ws;
  ws.CreateBlob("x");
  absl::Status s = RunOp(
      MakeOp("Function", {"x"}, {"y"}, {StringArg("func", "test.scale")}), &ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(std::string(s.message()),
            "op Function(x -> y): input 'x' holds uninitialized, not a "
            "Tensor");
}

TEST_F(FunctionOpTest, UnknownNameFailsWhenTheNetIsBuilt) {
  Workspace ws;
  NetDef net;
  net.set_name("upload");
  *net.add_op() =
      MakeOp("Function", {}, {}, {StringArg("func", "test.no_such")});
  auto built = Net::Create(net, &ws);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("op Function( -> ): no function named 'test.no_such' "
                        "is registered; registered functions: "));
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("test.fail, test.scale"));
}

TEST_F(FunctionOpTest, MissingFuncArgument) {
  Workspace ws;
  auto op = CreateOp(MakeOp("Function", {}, {}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(op.status().message()), HasSubstr("'func'"));
}

TEST_F(FunctionOpTest, Registry) {
  FunctionRegistry& registry = FunctionRegistry::Global();
  EXPECT_TRUE(registry.IsRegistered("test.scale"));
  EXPECT_FALSE(registry.IsRegistered("test.no_such"));
  EXPECT_THAT(registry.Names(), IsSupersetOf({"test.fail", "test.scale"}));

  absl::Status s = registry.Register(
      "test.scale", [](FunctionContext&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'test.scale'"));
  EXPECT_EQ(
      registry.Register("", [](FunctionContext&) { return absl::OkStatus(); })
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("test.null", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Get("test.no_such").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(FunctionRegistryTest, NamesAreSortedInNotFound) {
  FunctionRegistry registry;
  auto ok = [](FunctionContext&) { return absl::OkStatus(); };
  ASSERT_TRUE(registry.Register("b", ok).ok());
  ASSERT_TRUE(registry.Register("c", ok).ok());
  ASSERT_TRUE(registry.Register("a", ok).ok());
  EXPECT_THAT(registry.Names(), ElementsAre("a", "b", "c"));
  absl::Status s = registry.Get("z").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(s.message()),
            "no function named 'z' is registered; registered functions: a, "
            "b, c");
  EXPECT_EQ(std::string(FunctionRegistry().Get("z").status().message()),
            "no function named 'z' is registered; registered functions: "
            "(none)");
}

}  // namespace
}  // namespace jobgraph

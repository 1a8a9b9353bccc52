// The operator set as a whole, through the global registry.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/operator.h"
#include "engine/ops/test_util.h"
#include "engine/workspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using ::jobgraph::ops_test::CreateOp;
using ::jobgraph::ops_test::MakeOp;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

TEST(OpsTest, EveryOperatorIsRegistered) {
  EXPECT_THAT(OperatorRegistry::Global().Types(),
              IsSupersetOf<std::vector<std::string>>({"Add",
                                                      "And",
                                                      "CheckCounterDone",
                                                      "ConstantFill",
                                                      "Copy",
                                                      "CountDown",
                                                      "CountUp",
                                                      "CreateCounter",
                                                      "Div",
                                                      "EQ",
                                                      "Function",
                                                      "GE",
                                                      "GT",
                                                      "GivenTensorBoolFill",
                                                      "GivenTensorDoubleFill",
                                                      "GivenTensorFill",
                                                      "GivenTensorInt64Fill",
                                                      "GivenTensorIntFill",
                                                      "GivenTensorStringFill",
                                                      "GivenTensorUInt8Fill",
                                                      "IsEmpty",
                                                      "LE",
                                                      "LT",
                                                      "Mul",
                                                      "NE",
                                                      "Not",
                                                      "Or",
                                                      "Print",
                                                      "ResetCounter",
                                                      "RetrieveCount",
                                                      "Sub",
                                                      "TimerBegin",
                                                      "TimerEnd",
                                                      "TimerGet",
                                                      "TimerGetAndEnd"}));
}

TEST(OpsTest, DuplicateRegistrationIsAlreadyExists) {
  absl::Status s = OperatorRegistry::Global().Register(
      "Add",
      [](const OperatorDef&, Workspace*) -> std::unique_ptr<OperatorBase> {
        return nullptr;
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(std::string(s.message()),
            "operator type 'Add' is already registered");
}

TEST(OpsTest, UnknownTypeListsKnownTypes) {
  Workspace ws;
  auto op = CreateOp(MakeOp("Addd", {}, {"y"}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kNotFound);
  const std::string message(op.status().message());
  EXPECT_THAT(message, HasSubstr("unknown operator type 'Addd'"));
  EXPECT_THAT(message,
              HasSubstr("known types: Add, Allreduce, And, Barrier, Broadcast, "
                        "CheckCounterDone, "));
  EXPECT_THAT(message, HasSubstr("TimerGetAndEnd"));
}

TEST(OpsTest, MissingInputFailsAtCreation) {
  Workspace ws(nullptr, "trainer_0");
  auto op = CreateOp(MakeOp("Copy", {"nope"}, {"y"}), &ws);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(op.status().message()), HasSubstr("'nope'"));
}

}  // namespace
}  // namespace jobgraph

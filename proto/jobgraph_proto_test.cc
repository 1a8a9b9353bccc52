// Every message in jobgraph.proto must survive a trip through text format
// (what --dump_plan prints and what people diff) and through the binary wire
// format, with every field set.

#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets every field of `msg` to a distinctive non-default value, recursing into
// sub-messages down to `depth` levels (ExecutionStep contains itself).
void FillAllFields(Message* msg, int depth) {
  const Descriptor* d = msg->GetDescriptor();
  const Reflection* r = msg->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const int v = f->number() * 10 + k + 1;
      switch (f->cpp_type()) {
#define JG_SET(CPPTYPE, SETTER, ADDER, VALUE) \
  case FieldDescriptor::CPPTYPE:              \
    if (f->is_repeated()) {                   \
      r->ADDER(msg, f, VALUE);                \
    } else {                                  \
      r->SETTER(msg, f, VALUE);               \
    }                                         \
    break;
        JG_SET(CPPTYPE_INT32, SetInt32, AddInt32, -v)
        JG_SET(CPPTYPE_INT64, SetInt64, AddInt64, -int64_t{v} << 33)
        JG_SET(CPPTYPE_UINT32, SetUInt32, AddUInt32, 4000000000u - v)
        JG_SET(CPPTYPE_UINT64, SetUInt64, AddUInt64, uint64_t{v} << 40)
        JG_SET(CPPTYPE_FLOAT, SetFloat, AddFloat, v + 0.25f)
        JG_SET(CPPTYPE_DOUBLE, SetDouble, AddDouble, v + 1e-9)
        JG_SET(CPPTYPE_BOOL, SetBool, AddBool, true)
        // proto3 `string` fields must hold UTF-8; `bytes` may hold anything.
        JG_SET(CPPTYPE_STRING, SetString, AddString,
               "v" + std::to_string(v) +
                   (f->type() == FieldDescriptor::TYPE_BYTES
                        ? std::string("\0\xff\n\"", 4)
                        : std::string("\0\xc3\xa9\n\"", 5)))
#undef JG_SET
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const auto* value = e->value(e->value_count() - 1);
          if (f->is_repeated()) {
            r->AddEnum(msg, f, value);
          } else {
            r->SetEnum(msg, f, value);
          }
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth > 0) {
            FillAllFields(f->is_repeated() ? r->AddMessage(msg, f)
                                           : r->MutableMessage(msg, f),
                          depth - 1);
          }
          break;
      }
    }
  }
}

TEST(JobgraphProto, EveryMessageRoundTripsThroughTextAndWireFormat) {
  const FileDescriptor* file = TensorProto::descriptor()->file();
  google::protobuf::DynamicMessageFactory factory;
  for (const char* name :
       {"TensorProto", "BlobProto", "Argument", "OperatorDef", "NetDef",
        "ExecutionStep", "PlanDef", "TaskDef", "TaskGroupDef", "JobDef",
        "CheckpointBlobInfo", "BlobIndex", "CommitLog"}) {
    EXPECT_NE(file->FindMessageTypeByName(name), nullptr) << name;
  }
  for (int i = 0; i < file->message_type_count(); ++i) {
    const Descriptor* d = file->message_type(i);
    SCOPED_TRACE(d->full_name());
    const Message* prototype =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(d);
    ASSERT_NE(prototype, nullptr);
    std::unique_ptr<Message> original(prototype->New());
    FillAllFields(original.get(), 3);
    ASSERT_GT(original->ByteSizeLong(), 0u);

    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(*original, &text));
    std::unique_ptr<Message> from_text(prototype->New());
    ASSERT_TRUE(
        google::protobuf::TextFormat::ParseFromString(text, from_text.get()))
        << text;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original,
                                                                   *from_text))
        << text;

    std::string wire;
    ASSERT_TRUE(original->SerializeToString(&wire));
    std::unique_ptr<Message> from_wire(prototype->New());
    ASSERT_TRUE(from_wire->ParseFromString(wire));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original,
                                                                   *from_wire));
  }
}

// Nested message definitions (TensorProto.Segment) are covered through their
// parents; this checks the recursion really reaches them.
TEST(JobgraphProto, FillReachesNestedMessages) {
  TensorProto t;
  FillAllFields(&t, 3);
  EXPECT_EQ(t.segment().begin(), -(int64_t{11} << 33));
  EXPECT_EQ(t.segment().end(), -(int64_t{21} << 33));
}

}  // namespace
}  // namespace jobgraph

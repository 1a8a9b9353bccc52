#include "engine/ops/test_util.h"

#include "gtest/gtest.h"

namespace jobgraph {
namespace ops_test {

Argument IntArg(absl::string_view name, int64_t value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_i(value);
  return arg;
}

Argument FloatArg(absl::string_view name, float value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_f(value);
  return arg;
}

Argument DoubleArg(absl::string_view name, double value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_d(value);
  return arg;
}

Argument StringArg(absl::string_view name, absl::string_view value) {
  Argument arg;
  arg.set_name(std::string(name));
  arg.set_s(std::string(value));
  return arg;
}

Argument IntsArg(absl::string_view name, const std::vector<int64_t>& values) {
  Argument arg;
  arg.set_name(std::string(name));
  for (int64_t v : values) arg.add_ints(v);
  return arg;
}

Argument FloatsArg(absl::string_view name, const std::vector<float>& values) {
  Argument arg;
  arg.set_name(std::string(name));
  for (float v : values) arg.add_floats(v);
  return arg;
}

Argument DoublesArg(absl::string_view name, const std::vector<double>& values) {
  Argument arg;
  arg.set_name(std::string(name));
  for (double v : values) arg.add_doubles(v);
  return arg;
}

Argument StringsArg(absl::string_view name,
                    const std::vector<std::string>& values) {
  Argument arg;
  arg.set_name(std::string(name));
  for (const std::string& v : values) arg.add_strings(v);
  return arg;
}

OperatorDef MakeOp(absl::string_view type,
                   const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs,
                   const std::vector<Argument>& args) {
  OperatorDef def;
  def.set_type(std::string(type));
  for (const std::string& in : inputs) def.add_input(in);
  for (const std::string& out : outputs) def.add_output(out);
  for (const Argument& arg : args) *def.add_arg() = arg;
  return def;
}

absl::StatusOr<std::unique_ptr<OperatorBase>> CreateOp(const OperatorDef& def,
                                                       Workspace* ws) {
  return OperatorRegistry::Global().Create(def, ws);
}

absl::Status RunOp(const OperatorDef& def, Workspace* ws) {
  absl::StatusOr<std::unique_ptr<OperatorBase>> op = CreateOp(def, ws);
  if (!op.ok()) return op.status();
  return (*op)->Run();
}

const Tensor& TensorOf(const Workspace& ws, absl::string_view name) {
  static const Tensor* const kEmpty = new Tensor;
  absl::StatusOr<const Tensor*> t = ws.GetTensor(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? **t : *kEmpty;
}

}  // namespace ops_test
}  // namespace jobgraph

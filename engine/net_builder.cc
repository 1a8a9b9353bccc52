#include "engine/net_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace jobgraph {

Argument MakeArg(const std::string& name, int64_t value) {
  Argument arg;
  arg.set_name(name);
  arg.set_i(value);
  return arg;
}
Argument MakeArg(const std::string& name, int value) {
  return MakeArg(name, static_cast<int64_t>(value));
}
Argument MakeArg(const std::string& name, bool value) {
  return MakeArg(name, static_cast<int64_t>(value ? 1 : 0));
}
Argument MakeArg(const std::string& name, float value) {
  Argument arg;
  arg.set_name(name);
  arg.set_f(value);
  return arg;
}
Argument MakeArg(const std::string& name, double value) {
  Argument arg;
  arg.set_name(name);
  arg.set_d(value);
  return arg;
}
Argument MakeArg(const std::string& name, const std::string& value) {
  Argument arg;
  arg.set_name(name);
  arg.set_s(value);
  return arg;
}
Argument MakeArg(const std::string& name, const char* value) {
  return MakeArg(name, std::string(value));
}
Argument MakeArg(const std::string& name, const std::vector<int64_t>& values) {
  Argument arg;
  arg.set_name(name);
  arg.mutable_ints()->Add(values.begin(), values.end());
  return arg;
}
Argument MakeArg(const std::string& name, const std::vector<float>& values) {
  Argument arg;
  arg.set_name(name);
  arg.mutable_floats()->Add(values.begin(), values.end());
  return arg;
}
Argument MakeArg(const std::string& name, const std::vector<double>& values) {
  Argument arg;
  arg.set_name(name);
  arg.mutable_doubles()->Add(values.begin(), values.end());
  return arg;
}
Argument MakeArg(const std::string& name,
                 const std::vector<std::string>& values) {
  Argument arg;
  arg.set_name(name);
  for (const std::string& v : values) arg.add_strings(v);
  return arg;
}

std::string NameScope::UniqueNetName(const std::string& base) {
  std::string name = base;
  for (int i = 1; !used_.insert(name).second; ++i) {
    name = absl::StrCat(base, "_", i);
  }
  return name;
}

NetBuilder::NetBuilder(std::string name, std::string node, NameScope* scope,
                       Task* task)
    : name_(std::move(name)),
      node_(std::move(node)),
      scope_(scope),
      task_(task) {}

NetBuilder::~NetBuilder() = default;

NetDef* NetBuilder::OpenNet() {
  if (open_net_ == nullptr) {
    Child child;
    child.net = std::make_unique<NetDef>();
    child.net->set_name(scope_->UniqueNetName(name_));
    open_net_ = child.net.get();
    children_.push_back(std::move(child));
  }
  return open_net_;
}

void NetBuilder::NewNet() { open_net_ = nullptr; }

std::vector<BlobRef> NetBuilder::Op(const std::string& type,
                                    const std::vector<BlobRef>& inputs,
                                    const std::vector<BlobRef>& outputs,
                                    std::vector<Argument> args) {
  NetDef* net = OpenNet();
  OperatorDef* op = net->add_op();
  op->set_type(type);
  for (const BlobRef& in : inputs) op->add_input(in.name());
  std::vector<BlobRef> result;
  for (const BlobRef& out : outputs) {
    op->add_output(out.name());
    result.push_back(Ref(out.name()));
  }
  for (Argument& arg : args) *op->add_arg() = std::move(arg);
  return result;
}

std::vector<BlobRef> NetBuilder::Op(const std::string& type,
                                    const std::vector<BlobRef>& inputs,
                                    int num_outputs,
                                    std::vector<Argument> args) {
  NetDef* net = OpenNet();
  int& seen = auto_names_[net->name()][type];
  ++seen;
  const std::string base = seen == 1 ? type : absl::StrCat(type, "_", seen);
  std::vector<BlobRef> outputs;
  for (int i = 0; i < num_outputs; ++i) {
    outputs.push_back(Ref(absl::StrCat(net->name(), "/", base, ":", i)));
  }
  return Op(type, inputs, outputs, std::move(args));
}

BlobRef NetBuilder::Const(const Tensor& value, const std::string& name) {
  std::string type;
  std::vector<Argument> args;
  args.push_back(MakeArg("shape", value.shape()));
  DispatchDataType(value.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float>) {
      type = "GivenTensorFill";
      args.push_back(MakeArg(
          "values", std::vector<float>(value.data<float>(),
                                       value.data<float>() + value.numel())));
    } else if constexpr (std::is_same_v<T, double>) {
      type = "GivenTensorDoubleFill";
      args.push_back(MakeArg(
          "values", std::vector<double>(value.data<double>(),
                                        value.data<double>() + value.numel())));
    } else if constexpr (std::is_same_v<T, std::string>) {
      type = "GivenTensorStringFill";
      args.push_back(MakeArg(
          "values",
          std::vector<std::string>(value.data<std::string>(),
                                   value.data<std::string>() + value.numel())));
    } else {
      if constexpr (std::is_same_v<T, int32_t>) type = "GivenTensorIntFill";
      if constexpr (std::is_same_v<T, int64_t>) type = "GivenTensorInt64Fill";
      if constexpr (std::is_same_v<T, bool>) type = "GivenTensorBoolFill";
      if constexpr (std::is_same_v<T, uint8_t>) type = "GivenTensorUInt8Fill";
      std::vector<int64_t> ints(value.numel());
      for (int64_t i = 0; i < value.numel(); ++i) {
        ints[i] = static_cast<int64_t>(value.data<T>()[i]);
      }
      args.push_back(MakeArg("values", ints));
    }
  });
  if (name.empty()) return Op(type, {}, 1, std::move(args))[0];
  return Op(type, {}, {BlobRef(name)}, std::move(args))[0];
}

BlobRef NetBuilder::Unary(const std::string& type, BlobRef a, BlobRef out) {
  if (!out.valid()) return Op(type, {a}, 1)[0];
  return Op(type, {a}, {out})[0];
}

BlobRef NetBuilder::Binary(const std::string& type, BlobRef a, BlobRef b,
                           BlobRef out) {
  if (!out.valid()) return Op(type, {a, b}, 1)[0];
  return Op(type, {a, b}, {out})[0];
}

BlobRef NetBuilder::Copy(BlobRef x, BlobRef out) {
  return Unary("Copy", x, out);
}
BlobRef NetBuilder::Add(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("Add", a, b, out);
}
BlobRef NetBuilder::Sub(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("Sub", a, b, out);
}
BlobRef NetBuilder::Mul(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("Mul", a, b, out);
}
BlobRef NetBuilder::Div(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("Div", a, b, out);
}
BlobRef NetBuilder::LT(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("LT", a, b, out);
}
BlobRef NetBuilder::LE(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("LE", a, b, out);
}
BlobRef NetBuilder::GT(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("GT", a, b, out);
}
BlobRef NetBuilder::GE(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("GE", a, b, out);
}
BlobRef NetBuilder::EQ(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("EQ", a, b, out);
}
BlobRef NetBuilder::And(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("And", a, b, out);
}
BlobRef NetBuilder::Or(BlobRef a, BlobRef b, BlobRef out) {
  return Binary("Or", a, b, out);
}
BlobRef NetBuilder::Not(BlobRef a, BlobRef out) { return Unary("Not", a, out); }
BlobRef NetBuilder::IsEmpty(BlobRef x, BlobRef out) {
  return Unary("IsEmpty", x, out);
}
void NetBuilder::Print(BlobRef x) { Op("Print", {x}, std::vector<BlobRef>{}); }

BlobRef NetBuilder::CreateCounter(int64_t init_count, BlobRef out) {
  std::vector<Argument> args = {MakeArg("init_count", init_count)};
  if (!out.valid()) return Op("CreateCounter", {}, 1, std::move(args))[0];
  return Op("CreateCounter", {}, {out}, std::move(args))[0];
}
BlobRef NetBuilder::CountDown(BlobRef counter, BlobRef out) {
  return Unary("CountDown", counter, out);
}
BlobRef NetBuilder::CountUp(BlobRef counter, BlobRef out) {
  return Unary("CountUp", counter, out);
}
BlobRef NetBuilder::RetrieveCount(BlobRef counter, BlobRef out) {
  return Unary("RetrieveCount", counter, out);
}
void NetBuilder::ResetCounter(BlobRef counter, int64_t init_count) {
  Op("ResetCounter", {counter}, std::vector<BlobRef>{},
     {MakeArg("init_count", init_count)});
}

std::vector<BlobRef> NetBuilder::Function(const std::string& function,
                                          const std::vector<BlobRef>& inputs,
                                          const std::vector<BlobRef>& outputs) {
  return Op("Function", inputs, outputs, {MakeArg("func", function)});
}

NetBuilder& NetBuilder::AddChild(const std::string& name) {
  NewNet();
  Child child;
  // The child's own first net takes this unique name, so reserve a distinct
  // builder name the same way nets are named.
  child.builder = std::make_unique<NetBuilder>(
      scope_->UniqueNetName(absl::StrCat(name_, "/", name)), node_, scope_,
      task_);
  NetBuilder* raw = child.builder.get();
  children_.push_back(std::move(child));
  return *raw;
}

BlobRef NetBuilder::EnsureStopBlob() {
  if (stop_blob_.valid()) return stop_blob_;
  stop_blob_ = Ref(absl::StrCat(name_, "/stop_blob"));
  requires_stop_ = true;
  // The reset goes into a net of its own at the front, so the blob exists
  // when the step is built and reads false at the start of every run.
  Child init;
  init.net = std::make_unique<NetDef>();
  init.net->set_name(scope_->UniqueNetName(absl::StrCat(name_, "/stop_init")));
  OperatorDef* fill = init.net->add_op();
  fill->set_type("ConstantFill");
  fill->add_output(stop_blob_.name());
  *fill->add_arg() = MakeArg("dtype", static_cast<int64_t>(BOOL));
  *fill->add_arg() = MakeArg("value", int64_t{0});
  children_.insert(children_.begin(), std::move(init));
  return stop_blob_;
}

void NetBuilder::StopIf(BlobRef condition) {
  BlobRef stop = EnsureStopBlob();
  Op("Or", {stop, condition}, {stop});
  NewNet();
}

void NetBuilder::Stop() {
  StopIf(ConstScalar<bool>(absl::StrCat(name_, "/stop_true"), true));
}

void NetBuilder::Loop(int64_t iterations,
                      const std::function<void(NetBuilder&)>& body) {
  NetBuilder& loop = AddChild("loop");
  const size_t loop_index = children_.size() - 1;
  body(loop);
  if (!loop.requires_stop_) {
    // -2 makes BuildStep report a loop that could never end.
    loop.num_iter_ = iterations >= 0 ? iterations : -2;
    return;
  }
  if (iterations < 0) return;
  // A StopIf inside a counted loop. A step cannot have both num_iter and a
  // stop blob, so count down in a net right after the stop blob's reset and
  // let the check after that net end the loop. The counter is created in a
  // net just before the loop, so it restarts whenever the enclosing step
  // runs again.
  Child create;
  create.net = std::make_unique<NetDef>();
  create.net->set_name(
      scope_->UniqueNetName(absl::StrCat(loop.name_, "/counter_init")));
  const std::string counter = absl::StrCat(create.net->name(), "/counter");
  OperatorDef* init = create.net->add_op();
  init->set_type("CreateCounter");
  init->add_output(counter);
  *init->add_arg() = MakeArg("init_count", iterations);
  children_.insert(children_.begin() + loop_index, std::move(create));

  Child check;
  check.net = std::make_unique<NetDef>();
  check.net->set_name(
      scope_->UniqueNetName(absl::StrCat(loop.name_, "/count")));
  const std::string exhausted = absl::StrCat(check.net->name(), "/exhausted");
  OperatorDef* count_down = check.net->add_op();
  count_down->set_type("CountDown");
  count_down->add_input(counter);
  count_down->add_output(exhausted);
  OperatorDef* merge = check.net->add_op();
  merge->set_type("Or");
  merge->add_input(loop.stop_blob_.name());
  merge->add_input(exhausted);
  merge->add_output(loop.stop_blob_.name());
  loop.children_.insert(loop.children_.begin() + 1, std::move(check));
}

absl::Status NetBuilder::BuildStep(PlanDef* plan, ExecutionStep* step) const {
  step->set_name(name_);
  if (num_iter_ == -2) {
    return absl::InvalidArgumentError(
        absl::StrCat("loop '", name_,
                     "' has no iteration count and never calls StopIf, "
                     "so it would never end"));
  }
  if (stop_blob_.valid()) {
    step->set_should_stop_blob(stop_blob_.name());
    step->set_only_once(only_once_);
  } else if (num_iter_ >= 0) {
    step->set_num_iter(num_iter_);
  }
  step->set_concurrent_substeps(concurrent_);
  bool only_nets = true;
  for (const Child& child : children_) only_nets &= child.net != nullptr;
  for (const Child& child : children_) {
    if (child.net != nullptr) {
      *plan->add_network() = *child.net;
      if (only_nets) {
        step->add_network(child.net->name());
      } else {
        ExecutionStep* sub = step->add_substep();
        sub->set_name(child.net->name());
        sub->add_network(child.net->name());
      }
    } else {
      JG_RETURN_IF_ERROR(child.builder->BuildStep(plan, step->add_substep()));
    }
  }
  return absl::OkStatus();
}

}  // namespace jobgraph

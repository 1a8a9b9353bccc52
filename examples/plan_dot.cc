#include "examples/plan_dot.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jobgraph {
namespace examples {
namespace {

// Most operators listed in a net's note, and most characters per operator,
// so that a net with a large constant does not swamp the picture.
constexpr int kMaxOpsShown = 8;
constexpr size_t kMaxOpChars = 100;

std::string WorkspaceTypeName(WorkspaceType type) {
  switch (type) {
    case GLOBAL:
      return "GLOBAL";
    case PRIVATE:
      return "PRIVATE";
    default:
      return "unset";
  }
}

std::string Truncate(std::string text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return absl::StrCat(text.substr(0, max_chars - 3), "...");
}

// "Add(total, val) -> total"; split after the inputs when that is too long.
std::string DescribeOp(const OperatorDef& op) {
  const std::string call =
      absl::StrCat(op.type(), "(", absl::StrJoin(op.input(), ", "), ")");
  if (op.output().empty()) return Truncate(call, kMaxOpChars);
  const std::string outputs =
      absl::StrCat("-> ", absl::StrJoin(op.output(), ", "));
  if (call.size() + 1 + outputs.size() <= kMaxOpChars) {
    return absl::StrCat(call, " ", outputs);
  }
  return absl::StrCat(Truncate(call, kMaxOpChars), "\n    ",
                      Truncate(outputs, kMaxOpChars));
}

// Writes the DOT text of one job; ids are numbered in the order things are
// drawn, so the output is deterministic.
class DotWriter {
 public:
  explicit DotWriter(const JobDef& job) : job_(job) {}

  std::string Write() {
    Line("digraph job {");
    ++depth_;
    std::vector<std::string> checkpointed(job_.nodes_to_checkpoint().begin(),
                                          job_.nodes_to_checkpoint().end());
    Line(absl::StrCat(
        "graph [compound=true, rankdir=TB, fontname=\"Helvetica\", "
        "labelloc=t, label=\"",
        DotQuote(absl::StrCat(
            "job; checkpointed nodes: ",
            checkpointed.empty() ? "none" : absl::StrJoin(checkpointed, ", "))),
        "\"];"));
    Line("node [fontname=\"Helvetica\", fontsize=10];");
    Line("edge [fontname=\"Helvetica\", fontsize=9];");

    const std::vector<std::pair<std::string, const TaskGroupDef*>> groups = {
        {"init (runs once, from scratch only)", &job_.init_group()},
        {"epoch (runs until a stop condition is true)", &job_.epoch_group()},
        {"download (after the last epoch)", &job_.download_group()},
        {"exit (last)", &job_.exit_group()},
    };
    std::vector<Anchor> anchors;
    for (size_t i = 0; i < groups.size(); ++i) {
      anchors.push_back(WriteGroup(i, groups[i].first, *groups[i].second));
    }

    // The run order: init -> epoch -> stop? -> download -> exit.
    const std::string stop = "stop";
    std::vector<std::string> conditions;
    for (const StopCondition& c : job_.stop_condition()) {
      conditions.push_back(absl::StrCat(c.node(), ": ", c.blob()));
    }
    Line(absl::StrCat(
        stop, " [shape=diamond, style=filled, fillcolor=\"#fff2cc\", label=\"",
        DotQuote(absl::StrCat("any true after the epoch?\n",
                              conditions.empty()
                                  ? "(no stop condition: runs forever)"
                                  : absl::StrJoin(conditions, "\n"))),
        "\"];"));
    Edge(anchors[0], anchors[1], "then");
    Line(absl::StrCat(anchors[1].node, " -> ", stop, " [ltail=",
                      anchors[1].cluster, ", label=\"after each epoch\"];"));
    Line(absl::StrCat(stop, " -> ", anchors[1].node,
                      " [lhead=", anchors[1].cluster,
                      ", label=\"no: next epoch\", style=dashed, "
                      "constraint=false];"));
    Line(absl::StrCat(stop, " -> ", anchors[2].node,
                      " [lhead=", anchors[2].cluster, ", label=\"yes\"];"));
    Edge(anchors[2], anchors[3], "then");
    --depth_;
    Line("}");
    return out_;
  }

 private:
  // A node inside a cluster, for edges between clusters.
  struct Anchor {
    std::string node;
    std::string cluster;
  };

  void Line(absl::string_view text) {
    absl::StrAppend(&out_, std::string(2 * depth_, ' '), text, "\n");
  }

  void Edge(const Anchor& from, const Anchor& to, absl::string_view label) {
    Line(absl::StrCat(from.node, " -> ", to.node, " [ltail=", from.cluster,
                      ", lhead=", to.cluster, ", label=\"", DotQuote(label),
                      "\"];"));
  }

  std::string NewId(absl::string_view prefix) {
    return absl::StrCat(prefix, next_id_++);
  }

  Anchor WriteGroup(size_t index, const std::string& title,
                    const TaskGroupDef& group) {
    Anchor anchor;
    anchor.cluster = absl::StrCat("cluster_group_", index);
    Line(absl::StrCat("subgraph ", anchor.cluster, " {"));
    ++depth_;
    std::string label = title;
    if (group.workspace_type() != WORKSPACE_TYPE_UNSET) {
      absl::StrAppend(&label, " [", WorkspaceTypeName(group.workspace_type()),
                      "]");
    }
    Line(absl::StrCat("label=\"", DotQuote(label),
                      "\"; style=\"rounded,filled\"; fillcolor=\"#f4f4f4\"; "
                      "fontsize=14;"));
    // Tasks by node, nodes in order of first appearance.
    std::vector<std::string> nodes;
    std::map<std::string, std::vector<const TaskDef*>> tasks_by_node;
    for (const TaskDef& task : group.task()) {
      if (tasks_by_node.find(task.node()) == tasks_by_node.end()) {
        nodes.push_back(task.node());
      }
      tasks_by_node[task.node()].push_back(&task);
    }
    if (nodes.empty()) {
      anchor.node = NewId("empty");
      Line(absl::StrCat(anchor.node,
                        " [shape=plaintext, label=\"(no tasks)\"];"));
    }
    for (const std::string& node : nodes) {
      Line(absl::StrCat("subgraph ", NewId("cluster_node_"), " {"));
      ++depth_;
      Line(absl::StrCat("label=\"", DotQuote(absl::StrCat("node ", node)),
                        "\"; style=\"dashed\"; fontsize=12;"));
      for (const TaskDef* task : tasks_by_node[node]) {
        std::string first = WriteTask(*task);
        if (anchor.node.empty()) anchor.node = first;
      }
      --depth_;
      Line("}");
    }
    --depth_;
    Line("}");
    return anchor;
  }

  // Returns the id of the task's top step (or placeholder).
  std::string WriteTask(const TaskDef& task) {
    Line(absl::StrCat("subgraph ", NewId("cluster_task_"), " {"));
    ++depth_;
    std::string label =
        absl::StrCat("task ", task.name(), " [",
                     WorkspaceTypeName(task.workspace_type()), "]");
    if (!task.output().empty()) {
      absl::StrAppend(&label,
                      "\noutputs: ", absl::StrJoin(task.output(), ", "));
    }
    Line(absl::StrCat("label=\"", DotQuote(label),
                      "\"; style=\"rounded,filled\"; fillcolor=white; "
                      "fontsize=11;"));
    std::map<std::string, const NetDef*> nets;
    for (const NetDef& net : task.plan().network()) nets[net.name()] = &net;
    std::map<std::string, std::string> net_ids;
    std::string first;
    for (const ExecutionStep& step : task.plan().execution_step()) {
      std::string id = WriteStep(step, nets, &net_ids);
      if (first.empty()) first = id;
    }
    if (first.empty()) {
      first = NewId("nostep");
      Line(absl::StrCat(first,
                        " [shape=plaintext, label=\"(publishes outputs "
                        "only)\"];"));
    }
    --depth_;
    Line("}");
    return first;
  }

  std::string StepLabel(const ExecutionStep& step) {
    std::vector<std::string> lines = {
        step.name().empty() ? std::string("(step)") : step.name()};
    if (step.has_num_iter()) {
      lines.push_back(absl::StrCat("num_iter=", step.num_iter()));
    }
    if (!step.should_stop_blob().empty()) {
      lines.push_back(absl::StrCat("should_stop=", step.should_stop_blob()));
    }
    if (step.only_once()) lines.push_back("only_once");
    if (step.concurrent_substeps()) lines.push_back("concurrent substeps");
    if (step.num_concurrent_instances() > 0) {
      lines.push_back(
          absl::StrCat(step.num_concurrent_instances(), " instances"));
    }
    if (step.has_run_every_ms()) {
      lines.push_back(
          absl::StrCat("reporter, every ", step.run_every_ms(), " ms"));
    }
    if (step.create_workspace()) lines.push_back("own workspace");
    return absl::StrJoin(lines, "\n");
  }

  std::string WriteStep(const ExecutionStep& step,
                        const std::map<std::string, const NetDef*>& nets,
                        std::map<std::string, std::string>* net_ids) {
    const std::string id = NewId("step");
    Line(absl::StrCat(id,
                      " [shape=box, style=\"rounded,filled\", "
                      "fillcolor=\"#dae8fc\", label=\"",
                      DotQuote(StepLabel(step)), "\"];"));
    const bool concurrent = step.concurrent_substeps();
    int position = 0;
    for (const ExecutionStep& substep : step.substep()) {
      const std::string child = WriteStep(substep, nets, net_ids);
      ++position;
      std::string attrs;
      if (substep.has_run_every_ms()) {
        attrs = "style=dotted, label=\"reports\"";
      } else if (concurrent) {
        attrs = "style=dashed, label=\"concurrent\"";
      } else {
        attrs = absl::StrCat("label=\"", position, "\"");
      }
      Line(absl::StrCat(id, " -> ", child, " [", attrs, "];"));
    }
    for (const std::string& name : step.network()) {
      ++position;
      Line(absl::StrCat(id, " -> ", NetNode(name, nets, net_ids), " [label=\"",
                        position, "\"];"));
    }
    return id;
  }

  // The note of net `name`, drawn once per task.
  std::string NetNode(const std::string& name,
                      const std::map<std::string, const NetDef*>& nets,
                      std::map<std::string, std::string>* net_ids) {
    auto it = net_ids->find(name);
    if (it != net_ids->end()) return it->second;
    const std::string id = NewId("net");
    (*net_ids)[name] = id;
    std::vector<std::string> lines = {absl::StrCat("net ", name)};
    auto net = nets.find(name);
    if (net == nets.end()) {
      lines.push_back("(not in the plan)");
    } else {
      const auto& ops = net->second->op();
      for (int i = 0; i < ops.size() && i < kMaxOpsShown; ++i) {
        lines.push_back(DescribeOp(ops[i]));
      }
      if (ops.size() > kMaxOpsShown) {
        lines.push_back(
            absl::StrCat("... ", ops.size() - kMaxOpsShown, " more"));
      }
    }
    Line(absl::StrCat(id, " [shape=note, label=\"",
                      DotQuote(absl::StrJoin(lines, "\n")), "\"];"));
    return id;
  }

  const JobDef& job_;
  std::string out_;
  int depth_ = 0;
  int next_id_ = 0;
};

}  // namespace

std::string DotQuote(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string JobToDot(const JobDef& job) { return DotWriter(job).Write(); }

}  // namespace examples
}  // namespace jobgraph

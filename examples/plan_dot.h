// A Graphviz view of a built Job (a JobDef), for --plan_dot.
//
// Layout: one cluster per task group (init, epoch, download, exit, in the
// order they run), inside it one cluster per node, inside that one cluster
// per task. A task's step tree is drawn as boxes (steps, labelled with their
// name and controls: num_iter, should_stop blob, only_once, concurrent
// substeps, concurrent instances, reporter interval, own workspace) with
// edges to their substeps and to notes (nets, listing their first operators).
// Edges between the groups show the run order; a diamond after the epoch
// group lists the stop conditions and loops back to it.
//
// Render with: dot -Tsvg plan.dot -o plan.svg
//
// The output depends only on the proto, so the same job always gives the
// same file. Pure functions; thread-safe.

#ifndef JOBGRAPH_EXAMPLES_PLAN_DOT_H_
#define JOBGRAPH_EXAMPLES_PLAN_DOT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/jobgraph.pb.h"

namespace jobgraph {
namespace examples {

// The job as a Graphviz "digraph" (DOT language).
std::string JobToDot(const JobDef& job);

// `text` as the contents of a double-quoted DOT string: backslashes and
// quotes escaped, newlines as "\n" (centred lines).
std::string DotQuote(absl::string_view text);

}  // namespace examples
}  // namespace jobgraph

#endif  // JOBGRAPH_EXAMPLES_PLAN_DOT_H_

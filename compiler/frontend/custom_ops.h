// Loading custom ops (docs/custom-ops.md): every *.xml of a job's folders,
// each op with the ops of its gradient and the kernel lowering of each, into
// one registry over the built-in ops: the job's op vocabulary. Graphs written
// in it carry it (Graph::vocabulary), so the passes, autodiff, the
// interpreter and the code generator treat the ops as built-in ones. Nothing
// is registered process-wide: two jobs of one process may define the same
// name differently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::frontend {

// Reads each folder's *.xml files in name order into a new registry over the
// built-in ops; no folder gives null (the built-in ops). Errors name the file
// (and for the compute its line and column). The same definition twice (a
// folder named by the job file and the command line) is loaded once; a name
// taken by a built-in op or by another definition is an error naming both
// places.
Expected<std::shared_ptr<const ops::OpRegistry>>
loadCustomOps(const std::vector<std::string> &dirs);
// The same for files already read (an artifact embeds the ones it uses).
Expected<std::shared_ptr<const ops::OpRegistry>>
loadCustomOpSources(const std::vector<ops::OpSourceFile> &files);

// The files that defined the custom ops `graph` uses, in the order the graph
// first uses them: what a compiled graph needs to be read again.
std::vector<ops::OpSourceFile> customOpSourcesFor(const Graph &graph);

} // namespace kiln::frontend

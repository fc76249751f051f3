// Loading custom ops (docs/custom-ops.md): every *.xml of a folder, each op
// registered with the op registry together with the ops of its gradient and
// the kernel lowering of each, so the passes, autodiff, the interpreter and
// the code generator treat them as built-in ops. Load them before reading a
// graph that uses them.
#pragma once

#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace kiln::frontend {

// One file of custom op definitions: its path (for messages) and its XML.
struct CustomOpSource {
  std::string path;
  std::string xml;
  bool operator==(const CustomOpSource &) const = default;
};

// Reads the folder's *.xml files in name order. Errors name the file (and
// for the compute its line and column); nothing of a folder that fails is
// registered. Loading the same definitions again (another job of the same
// process) changes nothing; a name taken by a built-in op or by another
// definition is an error naming both places.
Status loadCustomOps(const std::string &dir);
// The same for files already read (an artifact embeds the ones it uses).
Status loadCustomOpSources(const std::vector<CustomOpSource> &files);

// The files that defined the custom ops `graph` uses (gradient ops count as
// their op's), in load order: what a compiled graph needs to be read again.
std::vector<CustomOpSource> customOpSourcesFor(const Graph &graph);

// The custom ops loaded so far with, for each op without a gradient rule,
// why ("SumMax: ...: cannot derive the gradient in input 'x' ...").
std::vector<std::string> loadedCustomOps();
std::vector<std::string> customOpsWithoutGradient();

} // namespace kiln::frontend

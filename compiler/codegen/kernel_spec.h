// Cutting a compiled graph into kernels: each fusion group is one kernel and
// every node outside a group is a kernel of its own. A kernel's canonical
// text names nothing but ops, attributes, types and structure, so the 40
// identical layers of a model give one text, one cache key and one compile.
#pragma once

#include <string>
#include <vector>

#include "executable/kernel_spec.h"
#include "ir/graph.h"

namespace kiln::codegen {

// The kernels the partition makes are the executable's (executable/kernel_spec.h).
using executable::aliasesItsInput;
using executable::isReshapeView;
using executable::KernelSpec;

// The kernels of `graph` (compacted: groups contiguous), in execution order.
// Nodes whose results nobody reads (dead code left when DCE is off) get none.
std::vector<KernelSpec> partitionKernels(const Graph &graph);

// Node `node` as a kernel of its own, even when it belongs to a group: what a
// failing group falls back to.
KernelSpec singleNodeKernel(const Graph &graph, NodeId node);

// The kernel's canonical text: inputs and values numbered locally, attributes
// sorted, no names. Equal texts compile to equal code.
std::string canonicalKernelText(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::codegen

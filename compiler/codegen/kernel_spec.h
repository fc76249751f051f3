// Cutting a compiled graph into kernels: each fusion group is one kernel and
// every node outside a group is a kernel of its own. A kernel's canonical
// text names nothing but ops, attributes, types and structure, so the 40
// identical layers of a model give one text, one cache key and one compile.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::codegen {

struct KernelSpec {
  std::string name;      // the group's name, or the node's
  std::string kind;      // the group's kernel kind ("eltwise", "matmul_fixpipe"), or the op
  std::string formed_by; // the pass or rule that formed the group; empty for single nodes
  bool grouped = false;
  Intermediates intermediates = Intermediates::Storage;
  std::vector<NodeId> members;  // in graph order
  std::vector<ValueId> inputs;  // values read from outside, in first-use order
  std::vector<ValueId> outputs; // member outputs read after the kernel or by graph outputs
};

// The kernels of `graph` (compacted: groups contiguous), in execution order.
// Nodes whose results nobody reads (dead code left when DCE is off) get none.
std::vector<KernelSpec> partitionKernels(const Graph &graph);

// Node `node` as a kernel of its own, even when it belongs to a group: what a
// failing group falls back to.
KernelSpec singleNodeKernel(const Graph &graph, NodeId node);

// A lone Reshape that keeps its dtype: its output is a view of its input,
// so nothing runs and nothing is copied (the runtime binds the view).
bool isReshapeView(const Graph &graph, const KernelSpec &kernel);

// A kernel whose output is its input's bytes: a reshape view, or a
// TensorParallelCopy (every rank already holds the value it hands on). The
// memory plan gives the output no buffer of its own and keeps the input's
// alive as long as the output is read.
bool aliasesItsInput(const Graph &graph, const KernelSpec &kernel);

// The kernel's canonical text: inputs and values numbered locally, attributes
// sorted, no names. Equal texts compile to equal code.
std::string canonicalKernelText(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::codegen

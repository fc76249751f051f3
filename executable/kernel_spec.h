// A kernel of a compiled graph as whatever runs it sees it: its name, the
// nodes it computes and the values it reads and stores. The code generator
// cuts a graph into these (compiler/codegen/kernel_spec.h); the memory plan,
// the executor and the profiler read them.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::executable {

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

// A lone Reshape that keeps its dtype: its output is a view of its input,
// so nothing runs and nothing is copied (the runtime binds the view).
bool isReshapeView(const Graph &graph, const KernelSpec &kernel);

// A kernel whose output is its input's bytes: a reshape view, or a
// TensorParallelCopy (every rank already holds the value it hands on). The
// memory plan gives the output no buffer of its own and keeps the input's
// alive as long as the output is read.
bool aliasesItsInput(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::executable

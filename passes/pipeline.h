// The pass pipeline, top to bottom: the one place that says in what order
// kiln's built-in passes run (pipeline.cpp). A pass file says what the pass
// is (PassInfo); this table says where it runs. The fusion rules of
// fusion_rules/ and a job's own rule files carry their priority in their
// file and run among the table's passes of their group by it.
#pragma once

#include <span>
#include <string_view>

#include "passes/pass.h"

namespace kiln::passes {

struct PipelineEntry {
  PassGroup group;
  std::string_view pass;
  int priority; // within the group, lower runs first (CANN's priority numbers)
};

// Every built-in pass, in the order it runs.
std::span<const PipelineEntry> builtinPipeline();

// Where `info`'s pass runs within its group: the table's priority for a
// built-in pass, its own (a rule file's "priority") for any other.
int pipelinePriority(const PassInfo &info);

} // namespace kiln::passes

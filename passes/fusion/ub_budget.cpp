#include "passes/fusion/ub_budget.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::passes {

UbUsage ubUsage(const FusionView &view, const std::vector<NodeId> &members, int64_t tile_elements) {
  const Graph &graph = view.graph();
  std::unordered_set<NodeId> inside(members.begin(), members.end());
  auto bufferBytes = [&](ValueId v) {
    const TensorType &t = graph.type(v);
    return std::min(t.numElements(), tile_elements) * static_cast<int64_t>(dtypeSize(t.dtype));
  };
  UbUsage usage;
  std::unordered_set<ValueId> read;
  for (NodeId m : members) {
    for (ValueId v : graph.node(m).inputs) {
      NodeId p = view.producer(v);
      if ((p == kNoNode || !inside.count(p)) && read.insert(v).second) {
        ++usage.inputs;
        usage.bytes += 2 * bufferBytes(v);
      }
    }
    for (ValueId v : graph.node(m).outputs) {
      bool leaves = view.isGraphOutput(v);
      for (NodeId u : view.users(v))
        leaves = leaves || !inside.count(u);
      if (leaves) {
        ++usage.outputs;
        usage.bytes += 2 * bufferBytes(v);
      } else {
        ++usage.intermediates;
        usage.bytes += bufferBytes(v);
      }
    }
  }
  return usage;
}

Verdict checkUbBudget(const UbUsage &usage, const target::Target &target) {
  if (usage.bytes <= target.memory.ub_bytes)
    return Verdict::allow();
  return Verdict::forbid(
      "needs " + std::to_string(usage.bytes) + " bytes of UB (" + std::to_string(usage.inputs) +
      " inputs and " + std::to_string(usage.outputs) + " outputs double-buffered, " +
      std::to_string(usage.intermediates) + " intermediates, tiles of " +
      std::to_string(target.vector_tile_elements) + " elements), more than the " +
      std::to_string(target.memory.ub_bytes) + " bytes of " + target.name);
}

} // namespace kiln::passes

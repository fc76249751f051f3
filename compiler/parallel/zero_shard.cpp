#include "compiler/parallel/zero_shard.h"

#include <map>

#include "ir/tensor_split.h"
#include "ops/op_verifier.h"
#include "passes/memory/recompute_pass.h"

namespace kiln::parallel {

Expected<Graph> shardWeights(const Graph &step, const std::set<std::string> &params, int ranks) {
  for (const std::string &name : params)
    if (!step.findInput(name))
      return Error("ZeRO-3: the step has no weight '" + name + "' to shard");
  const std::vector<bool> forward = passes::forwardNodes(step);
  Graph out(step.name());
  out.setVocabulary(step.vocabulary());
  std::vector<ValueId> map(step.numValues(), kNoValue);
  std::map<ValueId, ValueId> slices; // a sharded weight -> its slice input
  for (const GraphInput &in : step.inputs()) {
    const TensorType &type = step.type(in.value);
    if (!params.count(in.name)) {
      map[in.value] = out.addInput(in.name, type, in.role);
      continue;
    }
    const TensorType slice{type.dtype, {flatSliceElements(type.numElements(), ranks)}};
    slices[in.value] = out.addInput(in.name, slice, in.role);
  }
  // Per sharded weight and phase (0 forward, 1 backward): its gathered
  // value, made when its first reader of the phase is copied and ordered
  // after that reader's first other input computed by the graph (`after`).
  std::map<std::pair<ValueId, int>, ValueId> gathered;
  auto whole = [&](ValueId weight, bool forward_reader, ValueId after) {
    const int phase = forward_reader ? 0 : 1;
    auto [it, fresh] = gathered.emplace(std::make_pair(weight, phase), kNoValue);
    if (fresh) {
      const TensorType &type = step.type(weight);
      const std::string &name = step.valueName(weight);
      const std::string when = forward_reader ? "forward" : "backward";
      AttrMap attrs{{"shape", std::vector<int64_t>(type.shape.begin(), type.shape.end())},
                    {"ranks", int64_t{ranks}},
                    {"phase", when}};
      std::vector<ValueId> inputs{slices.at(weight)};
      if (after != kNoValue)
        inputs.push_back(after);
      const NodeId node =
          out.addNode("DataParallelGather", name + ".gather." + when, std::move(inputs), {type},
                      std::move(attrs), Provenance{"zero3", {name}});
      it->second = out.node(node).outputs[0];
    }
    return it->second;
  };
  for (NodeId id = 0; id < static_cast<NodeId>(step.numNodes()); ++id) {
    if (step.isErased(id))
      continue;
    const Node &n = step.node(id);
    ValueId after = kNoValue;
    for (ValueId in : n.inputs)
      if (after == kNoValue && step.value(in).producer != kNoNode)
        after = map[in];
    std::vector<ValueId> inputs;
    for (ValueId in : n.inputs)
      inputs.push_back(slices.count(in) ? whole(in, forward[id], after) : map[in]);
    out.addCopyOf(step, id, std::move(inputs), map);
  }
  for (const GraphOutput &o : step.outputs()) {
    if (slices.count(o.value))
      return Error("ZeRO-3: weight '" + o.name + "' is an output of the step");
    out.addOutput(o.name, map[o.value]);
  }
  KILN_RETURN_IF_ERROR(ops::verifyGraph(out));
  return out;
}

} // namespace kiln::parallel

#include "compiler/parallel/pipeline_partition.h"

#include <algorithm>
#include <map>

#include "ir/layer_scope.h"
#include "ops/op_verifier.h"
#include "passes/memory/recompute_pass.h"

namespace kiln::parallel {
namespace {

// A node that depends on no weight and on no other stage: every program
// that reads it computes it again.
constexpr int kFree = -1;

// The decoder layer a weight belongs to, or -1: its name holds a layer
// scope (a LoRA adapter's PEFT name has a prefix before it).
int64_t weightLayer(const std::string &name) { return layerWithin(name); }

int partOf(StageProgram p) { return p.stage * 2 + (p.forward ? 0 : 1); }
StageProgram programOf(int part) { return {part / 2, part % 2 == 0}; }

std::string programName(StageProgram p) {
  return "stage " + std::to_string(p.stage) + "'s " + (p.forward ? "forward" : "backward");
}

// Whether a value of `from` may feed `to` in a 1F1B schedule: forward
// values flow down the pipeline (and to any backward), gradients up it.
bool flowsWithSchedule(StageProgram from, StageProgram to) {
  if (from.forward)
    return !to.forward || from.stage < to.stage;
  return !to.forward && from.stage > to.stage;
}

class Partitioner {
public:
  Partitioner(const Graph &step, int stages, std::vector<int> layer_stage)
      : g_(step), stages_(stages), given_(std::move(layer_stage)) {}

  Expected<PipelinePartition> run();

private:
  int valueStage(ValueId v) const {
    const Value &value = g_.value(v);
    if (value.producer != kNoNode)
      return stage_[value.producer];
    const GraphInput &in = g_.inputs()[value.index];
    return isWeight(in.role) ? weightStage(in.name, out_.layer_stage, stages_) : kFree;
  }
  bool fromBackward(ValueId v) const {
    const NodeId p = g_.value(v).producer;
    return p != kNoNode && !forward_[p];
  }
  void assignStages();
  Status collect(int part);
  Graph build(int part) const;

  const Graph &g_;
  int stages_;
  std::vector<int> given_; // each layer's stage; empty: balanced
  PipelinePartition out_;
  std::vector<bool> forward_;
  std::vector<int> stage_; // per node
  // Per part: the original graph outputs it gives, the values it sends, the
  // nodes it runs (its own and the free ones it recomputes), and the
  // values it takes from others.
  struct Part {
    std::vector<size_t> outputs;
    std::vector<ValueId> sends;
    std::vector<bool> nodes;
    std::vector<ValueId> receives;
  };
  std::vector<Part> parts_;
  std::map<ValueId, size_t> transfer_of_; // value -> its entry in out_.transfers
};

// A node's stage: its transformer layer's, when it has one (a backward
// node: the one of the forward node it differentiates or recomputes);
// otherwise the latest stage among its inputs (the embedding's weight puts
// it on the first stage, the final norm and the loss follow the last layer).
void Partitioner::assignStages() {
  forward_ = passes::forwardNodes(g_);
  stage_.assign(g_.numNodes(), kFree);
  const int64_t layers = static_cast<int64_t>(out_.layer_stage.size());
  auto layerStage = [&](const std::string &name) {
    const int64_t layer = passes::layerOf(name);
    return layer >= 0 && layer < layers ? out_.layer_stage[layer] : kFree;
  };
  for (NodeId id = 0; id < static_cast<NodeId>(g_.numNodes()); ++id) {
    if (g_.isErased(id))
      continue;
    const Node &n = g_.node(id);
    int s = kFree;
    for (ValueId in : n.inputs)
      s = std::max(s, valueStage(in));
    if (s == kFree) {
      continue; // computed again wherever it is read
    } else if (forward_[id]) {
      if (const int named = layerStage(n.name); named != kFree)
        s = named;
    } else {
      if (!n.provenance.origins.empty()) {
        const std::string &name = n.provenance.origins.front();
        const NodeId origin = g_.findNode(name);
        if (origin != kNoNode && forward_[origin] && stage_[origin] != kFree)
          s = stage_[origin];
        else if (const int named = layerStage(name); named != kFree)
          s = named; // a recomputed node whose original is gone
      }
      // A node that only combines another stage's gradients (the sum of a
      // stage input's gradient terms) runs there: one tensor is sent
      // instead of its terms.
      int only = kFree, terms = 0;
      bool single = true;
      for (ValueId in : n.inputs) {
        const int from = valueStage(in);
        if (from == kFree)
          continue;
        if (!fromBackward(in) || (only != kFree && only != from))
          single = false;
        only = from;
        ++terms;
      }
      if (single && terms > 1)
        s = only;
      // Gradients flow up the pipeline only: a backward node reading the
      // gradient of an earlier stage runs there (the sum of a tied
      // embedding's terms, on the embedding's stage).
      for (ValueId in : n.inputs)
        if (fromBackward(in) && valueStage(in) != kFree)
          s = std::min(s, valueStage(in));
    }
    stage_[id] = s;
  }
}

// Marks what part `part` runs and receives: from its outputs and the values
// other parts asked of it, back to graph inputs and other parts' values.
Status Partitioner::collect(int part) {
  Part &p = parts_[part];
  const StageProgram me = programOf(part);
  p.nodes.assign(g_.numNodes(), false);
  std::vector<bool> seen(g_.numValues(), false);
  std::vector<ValueId> work;
  for (size_t o : p.outputs)
    work.push_back(g_.outputs()[o].value);
  work.insert(work.end(), p.sends.begin(), p.sends.end());
  while (!work.empty()) {
    const ValueId v = work.back();
    work.pop_back();
    if (seen[v])
      continue;
    seen[v] = true;
    const NodeId producer = g_.value(v).producer;
    StageProgram from{kFree, true};
    if (producer == kNoNode) {
      const GraphInput &in = g_.inputs()[g_.value(v).index];
      if (!isWeight(in.role) || valueStage(v) == me.stage)
        continue;
      // A weight another stage reads (the tied embedding the last stage's
      // head reads) is sent down by its own stage's forward as an
      // activation is; its gradient terms come back up and are summed there.
      from = {valueStage(v), true};
    } else {
      from = {stage_[producer], static_cast<bool>(forward_[producer])};
    }
    if (producer != kNoNode && (from.stage == kFree || from == me)) {
      if (!p.nodes[producer]) {
        p.nodes[producer] = true;
        for (ValueId in : g_.node(producer).inputs)
          work.push_back(in);
      }
      continue;
    }
    if (!flowsWithSchedule(from, me))
      return Error("pipeline: '" + g_.valueName(v) + "' would flow from " + programName(from) +
                   " to " + programName(me) + ", against the 1F1B schedule");
    p.receives.push_back(v);
    auto [it, added] = transfer_of_.emplace(v, out_.transfers.size());
    if (added) {
      out_.transfers.push_back({transferName(g_.valueName(v)), from, {}});
      parts_[partOf(from)].sends.push_back(v);
    }
    out_.transfers[it->second].to.push_back(me);
  }
  std::sort(p.receives.begin(), p.receives.end());
  return Status::ok();
}

// The program of `part`: the graph inputs it reads, then what it receives;
// its nodes in the step's order; its graph outputs, then what it sends.
Graph Partitioner::build(int part) const {
  const Part &p = parts_[part];
  const StageProgram me = programOf(part);
  Graph out(g_.name() + ".stage" + std::to_string(me.stage) +
            (me.forward ? ".forward" : ".backward"));
  out.setVocabulary(g_.vocabulary());
  std::vector<ValueId> map(g_.numValues(), kNoValue);
  std::vector<bool> read(g_.numValues(), false);
  for (NodeId id = 0; id < static_cast<NodeId>(g_.numNodes()); ++id)
    if (p.nodes[id])
      for (ValueId in : g_.node(id).inputs)
        read[in] = true;
  for (size_t o : p.outputs)
    read[g_.outputs()[o].value] = true;
  for (ValueId v : p.sends) // a weight sent to another stage
    read[v] = true;
  for (ValueId v : p.receives) // a weight received from its stage
    read[v] = false;
  for (const GraphInput &in : g_.inputs())
    if (read[in.value])
      map[in.value] = out.addInput(in.name, g_.type(in.value), in.role);
  for (ValueId v : p.receives)
    map[v] = out.addInput(transferName(g_.valueName(v)), g_.type(v), InputRole::Data);
  for (NodeId id = 0; id < static_cast<NodeId>(g_.numNodes()); ++id) {
    if (!p.nodes[id])
      continue;
    std::vector<ValueId> inputs;
    for (ValueId in : g_.node(id).inputs)
      inputs.push_back(map[in]);
    out.addCopyOf(g_, id, std::move(inputs), map);
  }
  for (size_t o : p.outputs)
    out.addOutput(g_.outputs()[o].name, map[g_.outputs()[o].value]);
  std::vector<ValueId> sends = p.sends;
  std::sort(sends.begin(), sends.end());
  for (ValueId v : sends)
    out.addOutput(transferName(g_.valueName(v)), map[v]);
  return out;
}

Expected<PipelinePartition> Partitioner::run() {
  const int64_t layers = transformerLayers(g_);
  if (layers < stages_)
    return Error("--pp " + std::to_string(stages_) + ": the model has " + std::to_string(layers) +
                 " transformer layers, fewer than the stages (each stage needs at least one)");
  if (!given_.empty() && static_cast<int64_t>(given_.size()) != layers)
    return Error("pipeline: a split of " + std::to_string(given_.size()) +
                 " layers for a model of " + std::to_string(layers));
  for (int s : given_)
    if (s < 0 || s >= stages_)
      return Error("pipeline: a layer on stage " + std::to_string(s) + " of " +
                   std::to_string(stages_));
  out_.stages = stages_;
  out_.layer_stage = given_.empty() ? balancedLayerStages(layers, stages_) : given_;
  assignStages();

  parts_.assign(static_cast<size_t>(2 * stages_), Part{});
  for (size_t o = 0; o < g_.outputs().size(); ++o) {
    const GraphOutput &out = g_.outputs()[o];
    const NodeId producer = g_.value(out.value).producer;
    StageProgram at{stages_ - 1, true};
    if (producer != kNoNode && stage_[producer] != kFree)
      at = {stage_[producer], static_cast<bool>(forward_[producer])};
    else if (out.name.starts_with("grad.")) // a gradient that is a constant (zero)
      at = {weightStage(out.name.substr(5), out_.layer_stage, stages_), false};
    parts_[partOf(at)].outputs.push_back(o);
  }
  // Consumers before producers: gradients flow up and forward values down,
  // so every part has been asked for what it sends before it is collected.
  std::vector<int> order;
  for (int s = 0; s < stages_; ++s)
    order.push_back(partOf({s, false}));
  for (int s = stages_; s-- > 0;)
    order.push_back(partOf({s, true}));
  for (int part : order)
    KILN_RETURN_IF_ERROR(collect(part));
  for (int s = 0; s < stages_; ++s) {
    out_.forward.push_back(build(partOf({s, true})));
    out_.backward.push_back(build(partOf({s, false})));
    KILN_RETURN_IF_ERROR(ops::verifyGraph(out_.forward.back()));
    KILN_RETURN_IF_ERROR(ops::verifyGraph(out_.backward.back()));
  }
  return std::move(out_);
}

} // namespace

int64_t transformerLayers(const Graph &step) {
  int64_t layers = 0;
  for (const GraphInput &in : step.inputs())
    if (isWeight(in.role))
      layers = std::max(layers, weightLayer(in.name) + 1);
  return layers;
}

std::vector<int> balancedLayerStages(int64_t layers, int stages) {
  std::vector<int> stage_of;
  const int64_t base = layers / stages, longer = layers % stages;
  for (int s = 0; s < stages; ++s)
    for (int64_t i = 0; i < base + (s < longer ? 1 : 0); ++i)
      stage_of.push_back(s);
  return stage_of;
}

int weightStage(const std::string &name, const std::vector<int> &layer_stage, int stages) {
  const int64_t layer = weightLayer(name);
  if (layer >= 0 && layer < static_cast<int64_t>(layer_stage.size()))
    return layer_stage[layer];
  return isEmbeddingName(name) ? 0 : stages - 1;
}

Expected<PipelinePartition> partitionPipeline(const Graph &step, int stages,
                                              std::vector<int> layer_stage) {
  if (stages < 1)
    return Error("pipeline: " + std::to_string(stages) + " stages");
  return Partitioner(step, stages, std::move(layer_stage)).run();
}

} // namespace kiln::parallel

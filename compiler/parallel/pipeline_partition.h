// Pipeline parallelism's cut (GPipe, Megatron's 1F1B): the training step —
// one graph of forward, loss and backward — split into P stages of
// consecutive transformer layers, each as two programs: the stage's forward
// (run when a micro-batch's activations arrive) and its backward (run when
// their gradients come back). A stage's devices hold only its weights.
//
// Every node keeps its ops, attributes and inputs; the programs only gain
// inputs and outputs where an edge crosses between them, named
// "pp.<value>" on both sides, so a program's output is fed to another by
// name. Values that depend on no weight (the rotary tables, the causal mask,
// the labels' shift) are computed again by each program that reads them
// rather than sent. The same ops on the same inputs give the same bits, so
// the stages' results are the whole step's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/error.h"

namespace kiln::parallel {

// The name of value `value` of the step as it passes between programs.
inline std::string transferName(const std::string &value) { return "pp." + value; }
inline bool isTransfer(const std::string &name) { return name.starts_with("pp."); }

// Which program of the pipeline: stage `stage`'s forward or backward.
struct StageProgram {
  int stage = 0;
  bool forward = true;
  bool operator==(const StageProgram &) const = default;
};

// A value one program hands to others: kept for the stage's own backward
// (a stash) or sent to another stage's device.
struct StageTransfer {
  std::string name; // "pp.<value>": an output of `from`, an input of each of `to`
  StageProgram from;
  std::vector<StageProgram> to;
};

struct PipelinePartition {
  int stages = 1;
  std::vector<int> layer_stage;         // per transformer layer
  std::vector<Graph> forward, backward; // per stage
  std::vector<StageTransfer> transfers;
  const Graph &program(StageProgram p) const {
    return p.forward ? forward[p.stage] : backward[p.stage];
  }
};

// Megatron's uniform split: `layers` consecutive layers in `stages` parts,
// the first `layers % stages` parts one longer.
std::vector<int> balancedLayerStages(int64_t layers, int stages);

// The transformer layers of `step`: one past the highest layer any weight's
// name holds.
int64_t transformerLayers(const Graph &step);

// The stage a weight lives on: its layer's (a name holding a layer scope,
// ir/layer_scope.h, LoRA's adapters included); the embedding's the first's;
// every other (the final norm, lm_head) the last's.
int weightStage(const std::string &name, const std::vector<int> &layer_stage, int stages);

// Cuts `step` (buildTrainingStep's graph: outputs "loss" and the gradients,
// recomputation already applied) into `stages` stages of consecutive layers:
// `layer_stage` says each layer's (parallel_config.h layerStages; empty:
// balancedLayerStages). With interleaving these are the model stages,
// several to a device; the cut does not know which device runs which. The forward is what
// "loss" needs; a backward node belongs to the stage of the forward node it
// differentiates (its provenance), a sum of gradients to the stage that
// produced its terms. A weight another stage reads (a tied embedding, read
// by the last stage's head) is sent down by its own stage's forward, and
// the gradient terms of it come back up to be summed on its stage. Errors
// when the model has fewer layers than stages, or when a value would flow
// against the schedule (a gradient down the pipeline).
Expected<PipelinePartition> partitionPipeline(const Graph &step, int stages,
                                              std::vector<int> layer_stage = {});

} // namespace kiln::parallel

// How long a compiled training step would take on a target: the cost model
// of `kiln plan` and `kiln train --compile-only`. Each kernel is a roofline,
// max(cube FLOPs / cube peak, vector FLOPs / vector peak, bytes / HBM
// bandwidth); each collective the ring formula over its group's link (inside
// a node or across nodes); compute and communication do not overlap, as in
// kiln's runtime. The figures come from the target description
// (target/data/*.json; docs/training.md says where each comes from).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "compiler/parallel/training_program.h"
#include "support/error.h"
#include "target/target.h"

namespace kiln::parallel {

// One link of a ring: its bandwidth per device and direction, its latency.
struct Link {
  double bytes_per_second = 0;
  double latency_seconds = 0;
};

// Ring collectives over `ranks` devices of `bytes` (the whole tensor):
// all-reduce 2(n-1) steps of bytes/n, reduce-scatter and all-gather n-1.
double ringAllReduceSeconds(double bytes, int64_t ranks, const Link &link);
double ringReduceScatterSeconds(double bytes, int64_t ranks, const Link &link);
double ringAllGatherSeconds(double bytes, int64_t ranks, const Link &link);

struct StepTime {
  double kernels = 0;         // the step's kernels, every micro-batch
  double update = 0;          // the AdamW buckets of the busiest replica
  double tensor_parallel = 0; // the step's collectives, every micro-batch
  double data_parallel = 0;   // the gradient sum (or reduce-scatter), the ZeRO gather, the checks
  // Pipeline stages: the 1F1B schedule's bubble and the sends between
  // stages, beyond the busiest stage's own kernels and collectives.
  double pipeline = 0;
  int64_t tokens = 0; // the global batch's tokens
  int devices = 0;
  // Of `kernels`, by kernel kind ("matmul", "eltwise", an op's name).
  std::map<std::string, double> kernel_kinds;
  double seconds() const { return kernels + update + tensor_parallel + data_parallel + pipeline; }
  double tokensPerSecondPerDevice() const;
  // "step 1.23 s (kernels 0.90 s, update 0.10 s, tensor-parallel 0.20 s,
  // data-parallel 0.03 s): 1660 tokens/s per device"
  std::string toText() const;
};

// The step time of `program` on `nodes` nodes of `target`'s devices (its
// devices in Megatron's order: a replica's tensor-parallel ranks adjacent).
// With pipeline stages, the 1F1B schedule is simulated (pipeline_schedule.h)
// with each action's roofline time and its sends: `kernels` and
// `tensor_parallel` are the busiest stage's, `pipeline` the rest of the span.
// An error names the figure the target lacks (a cube peak for the step's
// matmul dtype, the HBM bandwidth, the interconnect).
// "1.23 s", "12.3 ms", "45 us".
std::string formatSeconds(double seconds);

// The nodes `devices` fill at the target's devices per node (1 when unknown).
int nodesFor(const target::Target &target, int devices);

Expected<StepTime> predictStepTime(const TrainingProgram &program, const target::Target &target,
                                   int nodes = 1);

} // namespace kiln::parallel

// What a kernel has to do, independent of how fast it runs: the arithmetic
// (FLOPs) and the bytes it moves through device memory. The profiler divides
// them by the measured time for GFLOP/s and GB/s and sets them against a
// roofline; a cost model divides them by a target's peaks.
#pragma once

#include <cstdint>

#include "executable/kernel_spec.h"
#include "ir/graph.h"

namespace kiln::executable {

struct KernelCost {
  // A multiply-add counts two; every other op one per element it produces,
  // or per element it reads where it reads more than it writes (reductions).
  double flops = 0;
  // The kernel's inputs read once and its outputs written once: values
  // inside the kernel stay on chip (UB, L0C) and cost nothing here.
  double input_bytes = 0, output_bytes = 0;
  double bytes() const { return input_bytes + output_bytes; }
  // The part of `flops` done on the cube: MatMul, BatchMatMul and the
  // matmuls inside fused attention.
  double matmul_flops = 0;
};

// The FLOPs of one node, split between the cube (matmuls, and the matmuls
// inside fused attention) and the vector units.
struct NodeWork {
  double cube = 0, vector = 0;
  double total() const { return cube + vector; }
};
NodeWork nodeWork(const Graph &graph, const Node &node);
inline double nodeFlops(const Graph &graph, const Node &node) {
  return nodeWork(graph, node).total();
}

KernelCost kernelCost(const Graph &graph, const KernelSpec &kernel);

} // namespace kiln::executable

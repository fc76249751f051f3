// Which outputs of a graph may be written over the bytes of one of its
// inputs when the caller donates them (XLA's input/output aliasing): an
// AdamW update's new weights and moments over the old ones, so that the
// update reads and writes the same memory instead of writing every byte to
// a second buffer (which the host's caches first fetch: 12 bytes a
// parameter more traffic, about 40 % of the update's).
#pragma once

#include <vector>

#include "executable/executable.h"
#include "ir/graph.h"

namespace kiln::runtime {

// Per value: for a graph output, the graph input whose bytes the kernel
// that makes it may write it over; otherwise kNoValue. An output qualifies
// when a graph input has its name and type and lies outside the arena
// (`offsets` -1: the caller holds it), and either no kernel reads the input
// (`last_use_kernel` -1) or the kernel that makes the output is its last
// reader and reads it only at the element it writes: every member op
// elementwise (or AdamW, elementwise in its same-shaped operands) and every
// member output of the input's shape.
std::vector<ValueId> donatableInputs(const Graph &graph, const executable::Executable &kernels,
                                     const std::vector<int64_t> &offsets,
                                     const std::vector<ValueId> &last_use_kernel);

} // namespace kiln::runtime

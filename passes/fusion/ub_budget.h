// The Unified Buffer budget of a fused vector kernel.
//
// The model: the kernel walks its tensors one tile at a time, a tile being
// `vector_tile_elements` elements of the kernel's iteration space, and keeps
// one UB buffer per value live in the tile:
//
//   value read from outside the group (input)            2 buffers
//   value leaving the group (output, incl. graph output)  2 buffers
//   value made and used only inside (intermediate)        1 buffer
//
// Inputs and outputs are double-buffered: the next tile loads and the last
// one stores while this one computes. A buffer holds min(tile, elements of
// the value) elements of the value's dtype, so a scalar or a [hidden] weight
// broadcast over rows costs what it holds, not a whole tile. The group fits
// when the sum is at most the target's memory.ub_bytes. The model is
// deliberately pessimistic: a real kernel may reuse an intermediate's buffer
// after its last use, and a group that fits here fits there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/fusion_group_util.h"
#include "target/target.h"

namespace kiln::passes {

struct UbUsage {
  int64_t bytes = 0;
  int64_t inputs = 0;        // values read from outside
  int64_t outputs = 0;       // values leaving the group
  int64_t intermediates = 0; // values that stay inside
};

// The buffers `members` (distinct nodes) need with tiles of `tile_elements`.
UbUsage ubUsage(const FusionView &view, const std::vector<NodeId> &members, int64_t tile_elements);

// Allows when `usage` fits `target`'s UB; otherwise says why not, with the numbers.
Verdict checkUbBudget(const UbUsage &usage, const target::Target &target);

} // namespace kiln::passes

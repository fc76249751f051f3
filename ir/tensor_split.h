// How tensor parallelism splits a tensor over the ranks of a group: the one
// layout Megatron-style column- and row-parallel layers need, in the spirit
// of XLA's HloSharding. `axis` is cut into `ranks` equal pieces; with
// `blocks` > 1 the axis is first `blocks` equal blocks (the q, k and v rows
// of a fused QKV projection) and every block is cut, rank r holding piece r
// of each block, in block order. A replicated tensor (axis -1) is held whole
// by every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace kiln {

struct TensorSplit {
  int axis = -1;
  int64_t blocks = 1;

  bool replicated() const { return axis < 0; }
  std::string toString() const; // "replicated", "axis 1", "axis 0 in 3 blocks"
  bool operator==(const TensorSplit &) const = default;
};

// The shape each rank holds; an error when `full` does not divide evenly.
Expected<Shape> splitShape(const Shape &full, const TensorSplit &split, int ranks);

// The whole shape that `piece` is one rank's piece of.
Shape joinedShape(const Shape &piece, const TensorSplit &split, int ranks);

// Rank `rank`'s piece of `full` (a copy; all of it when replicated).
Tensor takeShard(const Tensor &full, const TensorSplit &split, int rank, int ranks);

// The inverse of takeShard: the whole tensor from every rank's piece, in
// rank order (the first piece when replicated).
Tensor joinShards(const std::vector<Tensor> &shards, const TensorSplit &split);

// ZeRO-3's flat equal slices: each of `ranks` holds ceil(n / ranks) of a
// tensor's n elements in row-major order, the last slice padded with zeros.
int64_t flatSliceElements(int64_t elements, int ranks);
Tensor takeFlatSlice(const Tensor &whole, int rank, int ranks);
// The inverse: the tensor of `type` from every rank's slice, in rank order.
Tensor joinFlatSlices(const std::vector<Tensor> &slices, const TensorType &type);

} // namespace kiln

// How tensor parallelism splits a tensor over the ranks of a group: the one
// layout Megatron-style column- and row-parallel layers need, in the spirit
// of XLA's HloSharding. `axis` is cut into `ranks` equal pieces; with
// `blocks` > 1 the axis is first `blocks` equal blocks (the q, k and v rows
// of a fused QKV projection) and every block is cut, rank r holding piece r
// of each block, in block order. A replicated tensor (axis -1) is held whole
// by every rank.
//
// Two Megatron layouts extend it. A vocabulary axis (`pad_length`, the
// embedding's and lm_head's rows) that the ranks do not divide is padded
// with zero rows to paddedLength() before it is cut: the pieces are equal,
// the padding lies in the last ranks' pieces, and joining drops it, so a
// whole tensor never holds it. An axis of `units` indivisible units (the
// key/value heads of a projection) split over more ranks than units gives
// unit u to the ranks / units consecutive ranks [u ranks / units, (u + 1)
// ranks / units): each holds a copy, and joining takes the first's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln {

struct TensorSplit {
  int axis = -1;
  int64_t blocks = 1;
  int64_t pad_length = 0; // non-zero: the axis's length, padded when the ranks do not divide it
  int64_t units = 0;      // non-zero: the axis's units, replicated over more ranks than them

  bool replicated() const { return axis < 0; }
  // How many consecutive ranks hold the same piece: all of them when
  // replicated, ranks / units when the units are fewer than the ranks, else 1.
  int copies(int ranks) const;
  // Whether rank `rank`'s piece is the first copy of it (a sum over the
  // ranks' pieces, the gradient norm's, counts each piece once).
  bool firstCopy(int rank, int ranks) const { return rank % copies(ranks) == 0; }
  // "replicated", "axis 1", "axis 0 in 3 blocks", "axis 0 padded from 1000",
  // "axis 0 in 2 units"
  std::string toString() const;
  bool operator==(const TensorSplit &) const = default;
};

// The length a vocabulary axis of `length` rows has over `ranks` ranks:
// `length` when they divide it, else the next multiple of 128 x ranks
// (Megatron's make-vocab-size-divisible-by 128), each rank's rows then a
// multiple of 128.
inline constexpr int64_t kVocabPadMultiple = 128;
int64_t paddedLength(int64_t length, int ranks);

// The shape each rank holds; an error when `full` does not divide evenly
// (a padded axis always does; units need ranks to divide them or be a
// multiple of them).
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

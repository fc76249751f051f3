#include "ir/tensor_split.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace kiln {
namespace {

// The axis seen as [outer][blocks][ranks][piece][inner], in bytes for inner.
struct SplitGeometry {
  int64_t outer = 1;
  int64_t blocks = 1;
  int64_t piece = 1;       // extent of one rank's piece of one block
  int64_t inner_bytes = 0; // bytes of one index along the axis
};

SplitGeometry geometryOf(const Shape &shape, const TensorSplit &split, int ranks, size_t elem) {
  SplitGeometry g;
  for (int d = 0; d < split.axis; ++d)
    g.outer *= shape[d];
  g.blocks = split.blocks;
  g.piece = shape[split.axis] / (split.blocks * ranks);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(split.axis) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  g.inner_bytes = inner * static_cast<int64_t>(elem);
  return g;
}

// Copies between rank `rank`'s piece and the whole: to_shard picks the
// direction.
void copyPieces(const SplitGeometry &g, int rank, int ranks, const char *from, char *to,
                bool to_shard) {
  const int64_t run = g.piece * g.inner_bytes; // one contiguous piece
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t b = 0; b < g.blocks; ++b) {
      const int64_t whole = ((o * g.blocks + b) * ranks + rank) * run;
      const int64_t mine = (o * g.blocks + b) * run;
      if (to_shard)
        std::memcpy(to + mine, from + whole, static_cast<size_t>(run));
      else
        std::memcpy(to + whole, from + mine, static_cast<size_t>(run));
    }
}

// The tensor with `axis` cut or padded with zeros to `length`.
Tensor resizedAxis(const Tensor &t, int axis, int64_t length) {
  Shape shape = t.shape();
  const int64_t from = shape[axis];
  shape[axis] = length;
  Tensor out(TensorType{t.dtype(), shape}); // zeros
  int64_t outer = 1, inner = static_cast<int64_t>(dtypeSize(t.dtype()));
  for (int d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const int64_t keep = std::min(from, length) * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char *>(out.data()) + o * length * inner,
                static_cast<const char *>(t.data()) + o * from * inner, static_cast<size_t>(keep));
  return out;
}

// The pieces the axis is cut into: the ranks, or the units when fewer.
int piecesOf(const TensorSplit &split, int ranks) { return ranks / split.copies(ranks); }

} // namespace

int64_t paddedLength(int64_t length, int ranks) {
  if (ranks <= 1 || length % ranks == 0)
    return length;
  const int64_t multiple = kVocabPadMultiple * ranks;
  return (length + multiple - 1) / multiple * multiple;
}

int TensorSplit::copies(int ranks) const {
  if (replicated())
    return ranks;
  if (units > 0 && ranks > units && ranks % units == 0)
    return static_cast<int>(ranks / units);
  return 1;
}

std::string TensorSplit::toString() const {
  if (replicated())
    return "replicated";
  std::string s = "axis " + std::to_string(axis);
  if (blocks > 1)
    s += " in " + std::to_string(blocks) + " blocks";
  if (pad_length > 0)
    s += " padded from " + std::to_string(pad_length);
  if (units > 0)
    s += " in " + std::to_string(units) + " units";
  return s;
}

Expected<Shape> splitShape(const Shape &full, const TensorSplit &split, int ranks) {
  if (split.replicated() || ranks == 1)
    return full;
  if (split.axis >= static_cast<int>(full.size()) || split.blocks < 1)
    return Error("cannot split " + shapeToString(full) + " along " + split.toString());
  if (split.units > 0 && ranks > split.units && ranks % split.units != 0)
    return Error("cannot split " + shapeToString(full) + " along " + split.toString() + " over " +
                 std::to_string(ranks) + " ranks: more ranks than units, and not a multiple of " +
                 std::to_string(split.units) + " (each unit would not have whole ranks)");
  const int pieces = piecesOf(split, ranks);
  int64_t length = full[split.axis];
  if (split.pad_length > 0 && split.blocks == 1)
    length = paddedLength(length, pieces);
  const int64_t parts = split.blocks * pieces;
  if (length % parts != 0)
    return Error("cannot split " + shapeToString(full) + " along " + split.toString() + " over " +
                 std::to_string(ranks) + " ranks: " + std::to_string(full[split.axis]) +
                 " is not a multiple of " + std::to_string(parts));
  Shape s = full;
  s[split.axis] = length / pieces;
  return s;
}

Shape joinedShape(const Shape &piece, const TensorSplit &split, int ranks) {
  Shape s = piece;
  if (!split.replicated() && ranks > 1)
    s[split.axis] =
        split.pad_length > 0 ? split.pad_length : s[split.axis] * piecesOf(split, ranks);
  return s;
}

Tensor takeShard(const Tensor &full, const TensorSplit &split, int rank, int ranks) {
  if (split.replicated() || ranks == 1)
    return full;
  Expected<Shape> shape = splitShape(full.shape(), split, ranks);
  assert(shape && "takeShard: the tensor does not split evenly");
  const int pieces = piecesOf(split, ranks);
  const int64_t length = (*shape)[split.axis] * pieces;
  const Tensor padded =
      length == full.shape()[split.axis] ? full : resizedAxis(full, split.axis, length);
  Tensor shard(TensorType{full.dtype(), *shape});
  copyPieces(geometryOf(padded.shape(), split, pieces, dtypeSize(full.dtype())),
             rank / split.copies(ranks), pieces, static_cast<const char *>(padded.data()),
             static_cast<char *>(shard.data()), true);
  return shard;
}

Tensor joinShards(const std::vector<Tensor> &shards, const TensorSplit &split) {
  assert(!shards.empty());
  const int ranks = static_cast<int>(shards.size());
  if (split.replicated() || ranks == 1)
    return shards.front();
  const int pieces = piecesOf(split, ranks), copies = split.copies(ranks);
  Shape shape = shards.front().shape();
  shape[split.axis] *= pieces;
  Tensor full(TensorType{shards.front().dtype(), shape});
  const SplitGeometry g = geometryOf(shape, split, pieces, dtypeSize(full.dtype()));
  for (int p = 0; p < pieces; ++p)
    copyPieces(g, p, pieces, static_cast<const char *>(shards[p * copies].data()),
               static_cast<char *>(full.data()), false);
  if (split.pad_length > 0 && split.pad_length != shape[split.axis])
    return resizedAxis(full, split.axis, split.pad_length);
  return full;
}

int64_t flatSliceElements(int64_t elements, int ranks) { return (elements + ranks - 1) / ranks; }

Tensor takeFlatSlice(const Tensor &whole, int rank, int ranks) {
  const int64_t k = flatSliceElements(whole.numElements(), ranks);
  const size_t size = dtypeSize(whole.dtype());
  Tensor slice(TensorType{whole.dtype(), {k}}); // zeros
  const int64_t begin = std::min(whole.numElements(), rank * k);
  const int64_t end = std::min(whole.numElements(), begin + k);
  if (end > begin)
    std::memcpy(slice.data(), static_cast<const uint8_t *>(whole.data()) + begin * size,
                static_cast<size_t>(end - begin) * size);
  return slice;
}

Tensor joinFlatSlices(const std::vector<Tensor> &slices, const TensorType &type) {
  Tensor whole(type);
  const int64_t n = whole.numElements();
  const size_t size = dtypeSize(type.dtype);
  int64_t at = 0;
  for (const Tensor &slice : slices) {
    const int64_t take = std::min(slice.numElements(), n - at);
    if (take <= 0)
      break;
    std::memcpy(static_cast<uint8_t *>(whole.data()) + at * size, slice.data(),
                static_cast<size_t>(take) * size);
    at += take;
  }
  return whole;
}

} // namespace kiln

// Transpose: output axis i is input axis perm[i].
#include <cstring>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

std::string permToString(const std::vector<int64_t> &perm) { return shapeToString(perm); }

Status checkPerm(const std::vector<int64_t> &perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank)
    return Error("perm " + permToString(perm) + " has " + std::to_string(perm.size()) +
                 " entries, expected one per axis of the rank-" + std::to_string(rank) + " input");
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank)
      return Error("perm " + permToString(perm) + " has entry " + std::to_string(p) +
                   "; entries must lie in [0, " + std::to_string(rank) + ")");
    if (seen[p])
      return Error("perm " + permToString(perm) + " repeats axis " + std::to_string(p) +
                   "; it must be a permutation of 0.." + std::to_string(rank - 1));
    seen[p] = true;
  }
  return Status::ok();
}

Expected<std::vector<TensorType>> inferTranspose(const std::vector<TensorType> &in,
                                                 const AttrMap &attrs) {
  const std::vector<int64_t> &perm = attrs.getInts("perm");
  KILN_RETURN_IF_ERROR(checkPerm(perm, in[0].rank()));
  Shape shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    shape[i] = in[0].shape[perm[i]];
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

Expected<std::vector<ValueId>> gradTranspose(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  const std::vector<int64_t> &perm = ctx.attrs().getInts("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  return std::vector<ValueId>{ctx.builder.create("Transpose", "dx", {dy}, {{"perm", inverse}})};
}

// Data movement: elements are copied bit for bit.
Status transposeKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                       std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const std::vector<int64_t> &perm = attrs.getInts("perm");
  const size_t rank = perm.size();
  const size_t elem = dtypeSize(x.dtype());
  const std::vector<int64_t> x_strides = stridesOf(x.shape());
  // Stride in x of a step along each output axis.
  std::vector<int64_t> stride(rank);
  for (size_t i = 0; i < rank; ++i)
    stride[i] = x_strides[perm[i]];
  const Shape &y_shape = y.shape();
  const auto *src = static_cast<const uint8_t *>(x.data());
  auto *dst = static_cast<uint8_t *>(y.data());
  std::vector<int64_t> index(rank, 0);
  int64_t from = 0;
  const int64_t n = y.numElements();
  for (int64_t k = 0; k < n; ++k) {
    std::memcpy(dst + k * elem, src + from * elem, elem);
    for (size_t a = rank; a-- > 0;) {
      if (++index[a] < y_shape[a]) {
        from += stride[a];
        break;
      }
      from -= stride[a] * (y_shape[a] - 1);
      index[a] = 0;
    }
  }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Transpose", OpImpl{inferTranspose, gradTranspose, transposeKernel});

} // namespace kiln::ops

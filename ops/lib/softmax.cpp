// Softmax along one axis and SoftmaxGrad, its backward from the output:
// dx = y * (dy - sum(dy * y, axis)). Both compute each row in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// A tensor seen as [outer, len, inner] around the softmax axis.
struct Rows {
  int64_t outer = 1, len = 1, inner = 1;
};

Rows rowsAround(const Shape &shape, int64_t axis) {
  Rows r;
  if (shape.empty())
    return r; // a scalar is one row of one element
  for (int64_t a = 0; a < axis; ++a)
    r.outer *= shape[a];
  r.len = shape[axis];
  for (size_t a = axis + 1; a < shape.size(); ++a)
    r.inner *= shape[a];
  return r;
}

Expected<std::vector<TensorType>> inferSoftmax(const std::vector<TensorType> &in,
                                               const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(normalizeAxis(attrs.getInt("axis"), in[0].rank()));
  return std::vector<TensorType>{in[0]};
}

Expected<std::vector<ValueId>> gradSoftmax(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("SoftmaxGrad", "dx", {ctx.output(0), dy},
                                                 {{"axis", ctx.attrs().getInt("axis")}})};
}

Status softmaxKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                     std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const int64_t axis = *normalizeAxis(attrs.getInt("axis"), x.type().rank());
  const Rows r = rowsAround(x.shape(), axis);
  std::vector<double> e(r.len);
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      const int64_t base = o * r.len * r.inner + i;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < r.len; ++j)
        max = std::max(max, static_cast<double>(x.getFloat(base + j * r.inner)));
      double sum = 0;
      for (int64_t j = 0; j < r.len; ++j) {
        e[j] = std::exp(static_cast<double>(x.getFloat(base + j * r.inner)) - max);
        sum += e[j];
      }
      for (int64_t j = 0; j < r.len; ++j)
        y.setFloat(base + j * r.inner, static_cast<float>(e[j] / sum), ctx.overflow);
    }
  return Status::ok();
}

Expected<std::vector<TensorType>> inferSoftmaxGrad(const std::vector<TensorType> &in,
                                                   const AttrMap &attrs) {
  if (!(in[0] == in[1]))
    return Error("y " + typeToString(in[0]) + " and dy " + typeToString(in[1]) +
                 " must have the same type");
  KILN_RETURN_IF_ERROR(normalizeAxis(attrs.getInt("axis"), in[0].rank()));
  return std::vector<TensorType>{in[0]};
}

Status softmaxGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                         std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &y = *in[0];
  const Tensor &dy = *in[1];
  Tensor &dx = out[0];
  const int64_t axis = *normalizeAxis(attrs.getInt("axis"), y.type().rank());
  const Rows r = rowsAround(y.shape(), axis);
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      const int64_t base = o * r.len * r.inner + i;
      double dot = 0;
      for (int64_t j = 0; j < r.len; ++j) {
        const int64_t k = base + j * r.inner;
        dot += static_cast<double>(y.getFloat(k)) * dy.getFloat(k);
      }
      for (int64_t j = 0; j < r.len; ++j) {
        const int64_t k = base + j * r.inner;
        const double v = static_cast<double>(y.getFloat(k)) * (dy.getFloat(k) - dot);
        dx.setFloat(k, static_cast<float>(v), ctx.overflow);
      }
    }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Softmax", OpImpl{inferSoftmax, gradSoftmax, softmaxKernel});
KILN_REGISTER_OP("SoftmaxGrad", OpImpl{inferSoftmaxGrad, nullptr, softmaxGradKernel});

} // namespace kiln::ops

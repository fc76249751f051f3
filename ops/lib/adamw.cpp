// AdamW: one decoupled-weight-decay Adam step in PyTorch's order, computed in
// double per element and rounded once into each output.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Status requireShape(const TensorType &t, const Shape &shape, const char *what, const char *why) {
  if (t.shape != shape)
    return Error(std::string("AdamW ") + what + " must have shape " + shapeToString(shape) + " (" +
                 why + "), got " + typeToString(t));
  return Status::ok();
}

Expected<std::vector<TensorType>> inferAdamW(const std::vector<TensorType> &in,
                                             const AttrMap &attrs) {
  const TensorType &param = in[0];
  KILN_RETURN_IF_ERROR(requireShape(in[1], param.shape, "grad", "the param's shape"));
  KILN_RETURN_IF_ERROR(requireShape(in[2], param.shape, "m", "the param's shape"));
  KILN_RETURN_IF_ERROR(requireShape(in[3], param.shape, "v", "the param's shape"));
  KILN_RETURN_IF_ERROR(requireShape(in[4], {}, "lr", "a scalar"));
  KILN_RETURN_IF_ERROR(requireShape(in[5], {}, "step", "a scalar"));
  for (const char *beta : {"beta1", "beta2"}) {
    const double b = attrs.getFloat(beta);
    if (!(b >= 0 && b < 1))
      return Error(std::string("AdamW ") + beta + " must lie in [0, 1), got " + std::to_string(b));
  }
  for (const char *name : {"eps", "weight_decay"}) {
    const double x = attrs.getFloat(name);
    if (!(x >= 0) || !std::isfinite(x))
      return Error(std::string("AdamW ") + name + " must be finite and >= 0, got " +
                   std::to_string(x));
  }
  const TensorType state{DType::F32, param.shape};
  return std::vector<TensorType>{param, state, state};
}

Status adamwKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &param = *in[0], &grad = *in[1], &m = *in[2], &v = *in[3];
  const int64_t t = in[5]->getInt(0);
  if (t < 1)
    return Error("AdamW node '" + ctx.node_name + "': step " + std::to_string(t) +
                 " is not a valid step; step counts the update being taken and starts at 1");
  const double lr = in[4]->getFloat(0);
  const double b1 = attrs.getFloat("beta1"), b2 = attrs.getFloat("beta2");
  const double eps = attrs.getFloat("eps"), wd = attrs.getFloat("weight_decay");
  const double bias1 = 1 - std::pow(b1, static_cast<double>(t));
  const double bias2 = 1 - std::pow(b2, static_cast<double>(t));
  for (int64_t i = 0; i < param.numElements(); ++i) {
    const double g = grad.getFloat(i);
    double p = param.getFloat(i);
    p -= lr * wd * p;
    const double mi = b1 * m.getFloat(i) + (1 - b1) * g;
    const double vi = b2 * v.getFloat(i) + (1 - b2) * g * g;
    p -= lr * (mi / bias1) / (std::sqrt(vi / bias2) + eps);
    out[0].setFloat(i, static_cast<float>(p), ctx.overflow);
    out[1].setFloat(i, static_cast<float>(mi), ctx.overflow);
    out[2].setFloat(i, static_cast<float>(vi), ctx.overflow);
  }
  return Status::ok();
}

} // namespace

// The optimizer update is applied after the backward pass: no gradient rule.
KILN_REGISTER_OP("AdamW", OpImpl{inferAdamW, {}, adamwKernel});

} // namespace kiln::ops

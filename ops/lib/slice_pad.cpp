// Slice (unit-step box of a tensor) and Pad (a tensor inside a border of one
// value); each is the other's adjoint.
#include <cstring>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Status requirePerAxis(const std::vector<int64_t> &v, const char *name, const TensorType &x) {
  if (static_cast<int64_t>(v.size()) != x.rank())
    return Error(std::string(name) + " " + shapeToString(v) + " has " + std::to_string(v.size()) +
                 " entries, expected one per axis of the input " + typeToString(x));
  return Status::ok();
}

// Copies the box `box` starting at `src_at` in `src` to `dst_at` in `dst`,
// element by element as raw bytes (data movement never rounds).
void copyBox(const Tensor &src, const std::vector<int64_t> &src_at, Tensor &dst,
             const std::vector<int64_t> &dst_at, const Shape &box) {
  if (numElements(box) == 0)
    return;
  const size_t rank = box.size();
  const size_t elem = dtypeSize(src.dtype());
  const std::vector<int64_t> ss = stridesOf(src.shape()), ds = stridesOf(dst.shape());
  int64_t from = 0, to = 0;
  for (size_t a = 0; a < rank; ++a) {
    from += src_at[a] * ss[a];
    to += dst_at[a] * ds[a];
  }
  const auto *s = static_cast<const uint8_t *>(src.data());
  auto *d = static_cast<uint8_t *>(dst.data());
  std::vector<int64_t> index(rank, 0);
  const int64_t n = numElements(box);
  for (int64_t k = 0; k < n; ++k) {
    std::memcpy(d + to * elem, s + from * elem, elem);
    for (size_t a = rank; a-- > 0;) {
      if (++index[a] < box[a]) {
        from += ss[a];
        to += ds[a];
        break;
      }
      from -= ss[a] * (box[a] - 1);
      to -= ds[a] * (box[a] - 1);
      index[a] = 0;
    }
  }
}

// --- Slice -------------------------------------------------------------------

Expected<std::vector<TensorType>> inferSlice(const std::vector<TensorType> &in,
                                             const AttrMap &attrs) {
  const TensorType &x = in[0];
  const std::vector<int64_t> &begin = attrs.getInts("begin");
  const std::vector<int64_t> &end = attrs.getInts("end");
  KILN_RETURN_IF_ERROR(requirePerAxis(begin, "begin", x));
  KILN_RETURN_IF_ERROR(requirePerAxis(end, "end", x));
  Shape shape(x.shape.size());
  for (size_t a = 0; a < shape.size(); ++a) {
    if (!(0 <= begin[a] && begin[a] <= end[a] && end[a] <= x.shape[a]))
      return Error("axis " + std::to_string(a) + ": begin " + std::to_string(begin[a]) +
                   " and end " + std::to_string(end[a]) + " must satisfy 0 <= begin <= end <= " +
                   std::to_string(x.shape[a]) + " for the input " + typeToString(x));
    shape[a] = end[a] - begin[a];
  }
  return std::vector<TensorType>{{x.dtype, shape}};
}

Expected<std::vector<ValueId>> gradSlice(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  const Shape x_shape = ctx.builder.shape(ctx.input(0));
  const std::vector<int64_t> &begin = ctx.attrs().getInts("begin");
  const std::vector<int64_t> &end = ctx.attrs().getInts("end");
  std::vector<int64_t> after(x_shape.size());
  for (size_t a = 0; a < after.size(); ++a)
    after[a] = x_shape[a] - end[a];
  return std::vector<ValueId>{
      ctx.builder.create("Pad", "dx", {dy}, {{"before", begin}, {"after", after}, {"value", 0.0}})};
}

Status sliceKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &attrs) {
  copyBox(*in[0], attrs.getInts("begin"), out[0], std::vector<int64_t>(out[0].shape().size(), 0),
          out[0].shape());
  return Status::ok();
}

// --- Pad ---------------------------------------------------------------------

Expected<std::vector<TensorType>> inferPad(const std::vector<TensorType> &in,
                                           const AttrMap &attrs) {
  const TensorType &x = in[0];
  const std::vector<int64_t> &before = attrs.getInts("before");
  const std::vector<int64_t> &after = attrs.getInts("after");
  KILN_RETURN_IF_ERROR(requirePerAxis(before, "before", x));
  KILN_RETURN_IF_ERROR(requirePerAxis(after, "after", x));
  Shape shape(x.shape.size());
  for (size_t a = 0; a < shape.size(); ++a) {
    if (before[a] < 0 || after[a] < 0)
      return Error("axis " + std::to_string(a) + ": padding before " + std::to_string(before[a]) +
                   " and after " + std::to_string(after[a]) + " must both be >= 0");
    shape[a] = before[a] + x.shape[a] + after[a];
  }
  return std::vector<TensorType>{{x.dtype, shape}};
}

Expected<std::vector<ValueId>> gradPad(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  const Shape x_shape = ctx.builder.shape(ctx.input(0));
  const std::vector<int64_t> &before = ctx.attrs().getInts("before");
  std::vector<int64_t> end(x_shape.size());
  for (size_t a = 0; a < end.size(); ++a)
    end[a] = before[a] + x_shape[a];
  return std::vector<ValueId>{
      ctx.builder.create("Slice", "dx", {dy}, {{"begin", before}, {"end", end}})};
}

Status padKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &attrs) {
  Tensor &y = out[0];
  const double value = attrs.getFloat("value");
  const int64_t n = y.numElements();
  for (int64_t k = 0; k < n; ++k) {
    if (isFloat(y.dtype()))
      y.setFloat(k, static_cast<float>(value), ctx.overflow);
    else
      y.setInt(k, static_cast<int64_t>(value));
  }
  copyBox(*in[0], std::vector<int64_t>(y.shape().size(), 0), y, attrs.getInts("before"),
          in[0]->shape());
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Slice", OpImpl{inferSlice, gradSlice, sliceKernel});
KILN_REGISTER_OP("Pad", OpImpl{inferPad, gradPad, padKernel});

} // namespace kiln::ops

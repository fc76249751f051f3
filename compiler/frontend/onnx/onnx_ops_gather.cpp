// ONNX's Gather and GatherElements: indices known while compiling are
// gathered here (shape arithmetic), others become kiln's Gather (rows) with
// the axis moved to the front and back, or GatherElements.
#include "compiler/frontend/onnx/onnx_context.h"
#include "ops/kernel_util.h"

namespace kiln::frontend::onnx_import {
namespace {

// Gather along `axis`: kiln's Gather takes rows (axis 0), so another axis
// is moved to the front and back. A negative index counts from the end.
Status convertGather(Converter &c) {
  const Shape data = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(data.size());
  if (rank < 1) // ONNX's Gather: data of rank r >= 1
    return c.invalid("the data is a scalar; Gather needs rank 1 or more");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizedAxis(c, c.intAttr("axis", 0), rank));
  const Tensor *d = c.constant(0);
  const Tensor *idx = c.constant(1);
  if (d && idx) { // shape arithmetic: gathered here
    const Shape is = idx->shape();
    Shape out(data.begin(), data.begin() + axis);
    out.insert(out.end(), is.begin(), is.end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
    Tensor y(TensorType{d->dtype(), out});
    int64_t inner = 1;
    for (int64_t a = axis + 1; a < rank; ++a)
      inner *= data[a];
    const int64_t outer = numElements(Shape(data.begin(), data.begin() + axis));
    const int64_t n_idx = idx->numElements();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n_idx; ++k) {
        int64_t j = idx->getInt(k);
        if (j < 0)
          j += data[axis];
        if (j < 0 || j >= data[axis])
          return c.invalid("index " + std::to_string(idx->getInt(k)) + " is out of range");
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t from = (o * data[axis] + j) * inner + i, to = (o * n_idx + k) * inner + i;
          if (isFloat(y.dtype()))
            y.setFloat(to, d->getFloat(from), OverflowMode::InfNan);
          else
            y.setInt(to, d->getInt(from));
        }
      }
    c.setConstant(0, std::move(y));
    return Status::ok();
  }
  if (!isFloat(c.type(0).dtype))
    return c.unsupportedType("Gather of " + std::string(dtypeName(c.type(0).dtype)) +
                             " data computed at run time is not supported (float data is; "
                             "integer data known while compiling is folded)");
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId indices, c.value(1));
  ops::OpBuilder &b = c.builder();
  const DType it = b.dtype(indices);
  if (!idx) { // negative indices count from the end
    ValueId neg = c.create("Less", {indices, c.constantOf(0, it)}, {}, "negative");
    ValueId wrapped = c.create("Add", {indices, c.constantOf(double(data[axis]), it)}, {}, "wrap");
    indices = c.create("Where", {neg, wrapped, indices}, {}, "indices");
  } else {
    std::vector<int64_t> v(idx->numElements());
    for (int64_t k = 0; k < idx->numElements(); ++k)
      v[k] = idx->getInt(k) < 0 ? idx->getInt(k) + data[axis] : idx->getInt(k);
    indices = c.tensor(Tensor::fromInts(it, idx->shape(), v), "indices");
  }
  if (!b.status()) // indices of a type the index arithmetic refuses
    return b.status().error();
  std::vector<int64_t> to_front;
  if (axis != 0) {
    to_front.push_back(axis);
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis)
        to_front.push_back(a);
    x = c.create("Transpose", {x}, {{"perm", to_front}}, "to_front");
  }
  ValueId y = c.create("Gather", {x, indices});
  if (axis != 0) {
    // y is [I..., data[:axis], data[axis+1:]]; put data[:axis] first.
    const int64_t ir = static_cast<int64_t>(b.shape(indices).size());
    std::vector<int64_t> perm;
    for (int64_t a = 0; a < axis; ++a)
      perm.push_back(ir + a);
    for (int64_t a = 0; a < ir; ++a)
      perm.push_back(a);
    for (int64_t a = ir + axis; a < ir + rank - 1; ++a)
      perm.push_back(a);
    y = c.create("Transpose", {y}, {{"perm", perm}}, "from_front");
  }
  c.setOutput(0, y);
  return Status::ok();
}

Status convertGatherElements(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId indices, c.value(1));
  c.setOutput(0, c.create("GatherElements", {x, indices}, {{"axis", c.intAttr("axis", 0)}}));
  return Status::ok();
}

} // namespace

KILN_REGISTER_ONNX_OP("Gather", convertGather);
KILN_REGISTER_ONNX_OP("GatherElements", convertGatherElements);

} // namespace kiln::frontend::onnx_import

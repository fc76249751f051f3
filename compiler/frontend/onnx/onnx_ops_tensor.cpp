// ONNX's data movement and shape operators: Shape, Size, Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Expand, Tile, Trilu,
// Range, Constant, ConstantOfShape and Dropout (inference); Gather and
// GatherElements are in onnx_ops_gather.cpp. Shape arithmetic folds while importing: the
// conversions that need a shape read it as a constant.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>

#include "compiler/frontend/onnx/onnx_context.h"
#include "compiler/frontend/onnx/onnx_reader.h"
#include "ops/kernel_util.h"

namespace kiln::frontend::onnx_import {
namespace {

Tensor int64Tensor(Shape shape, const std::vector<int64_t> &values) {
  return Tensor::fromInts(DType::I64, std::move(shape), values);
}

Status convertShape(Converter &c) {
  const Shape s = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = c.intAttr("start", 0), end = c.intAttr("end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  c.setConstant(0, int64Tensor({static_cast<int64_t>(dims.size())}, dims));
  return Status::ok();
}

Status convertSize(Converter &c) {
  c.setConstant(0, int64Tensor({}, {numElements(c.type(0).shape)}));
  return Status::ok();
}

// Reshapes input 0 (a constant stays one).
Status reshapeTo(Converter &c, const Shape &shape) {
  if (numElements(shape) != numElements(c.type(0).shape))
    return c.invalid("cannot reshape " + shapeToString(c.type(0).shape) + " to " +
                     shapeToString(shape));
  if (const Tensor *t = c.constant(0)) {
    c.setConstant(0, t->reshaped(shape));
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, c.create("Reshape", {x}, {{"shape", shape}}));
  return Status::ok();
}

Status convertReshape(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec, c.ints(1, "the shape"));
  const Shape in = c.type(0).shape;
  const bool allowzero = c.intAttr("allowzero", 0) != 0;
  Shape shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return c.invalid("shape entry " + std::to_string(i) + " is 0 (copy) past the input's rank");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return c.invalid("the shape has more than one -1");
      infer = static_cast<int>(i);
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return c.invalid("shape entry " + std::to_string(d) + " is negative");
    known *= d;
    shape.push_back(d);
  }
  if (infer >= 0) {
    const int64_t total = numElements(in);
    if (known == 0 || total % known != 0)
      return c.invalid("cannot reshape " + shapeToString(in) + " to " + shapeToString(spec));
    shape[infer] = total / known;
  }
  return reshapeTo(c, shape);
}

Status convertFlatten(Converter &c) {
  const Shape in = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = c.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return c.invalid("axis " + std::to_string(c.intAttr("axis", 1)) + " is out of range");
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a)
    outer *= in[a];
  return reshapeTo(c,
                   {outer, numElements(in) / std::max<int64_t>(outer, 1) * (outer == 0 ? 0 : 1)});
}

Expected<std::vector<int64_t>> axesOf(Converter &c, size_t input) {
  if (c.version() >= 13 && c.has(input))
    return c.ints(input, "axes");
  if (auto a = c.intsAttr("axes"))
    return *a;
  return std::vector<int64_t>{};
}

Status convertSqueeze(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axesOf(c, 1));
  const Shape in = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, normalizedAxis(c, a, rank));
    if (in[n] != 1)
      return c.invalid("axis " + std::to_string(a) + " has size " + std::to_string(in[n]) +
                       ", not 1");
    drop[n] = true;
  }
  Shape shape;
  for (int64_t a = 0; a < rank; ++a)
    if (!(axes.empty() ? in[a] == 1 : drop[a]))
      shape.push_back(in[a]);
  return reshapeTo(c, shape);
}

Status convertUnsqueeze(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axesOf(c, 1));
  const Shape in = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> insert(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, normalizedAxis(c, a, rank));
    if (insert[n])
      return c.invalid("axes name axis " + std::to_string(n) + " twice");
    insert[n] = true;
  }
  Shape shape;
  size_t next = 0;
  for (int64_t a = 0; a < rank; ++a)
    shape.push_back(insert[a] ? 1 : in[next++]);
  return reshapeTo(c, shape);
}

Status convertTranspose(Converter &c) {
  const int64_t rank = static_cast<int64_t>(c.type(0).shape.size());
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto p = c.intsAttr("perm"))
    perm = *p;
  for (int64_t &p : perm)
    if (p < 0)
      p += rank;
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, c.create("Transpose", {x}, {{"perm", perm}}));
  return Status::ok();
}

// The Slice of x that `v` is, if a Slice makes it, keeping every axis
// whole but the last: that axis's [begin, end).
std::optional<std::pair<int64_t, int64_t>> lastAxisSlice(Converter &c, ValueId v, ValueId x) {
  const Node *slice = c.producer(v, "Slice");
  if (!slice || slice->inputs[0] != x)
    return std::nullopt;
  const Shape &shape = c.builder().shape(x);
  const std::vector<int64_t> &begin = slice->attrs.getInts("begin");
  const std::vector<int64_t> &end = slice->attrs.getInts("end");
  if (shape.empty() || begin.size() != shape.size() || end.size() != shape.size())
    return std::nullopt;
  for (size_t a = 0; a + 1 < shape.size(); ++a)
    if (begin[a] != 0 || end[a] != shape[a])
      return std::nullopt;
  return std::pair{begin.back(), end.back()};
}

// concat(-x[..., h:], x[..., :h]) along the last axis, h half of it: what
// torch's rotate_half (the rotary embedding) exports as. RotateHalf is what
// the rotary fusions match; the Slices and the Neg are left to dead-code
// elimination.
ValueId rotateHalfOf(Converter &c, const std::vector<ValueId> &xs, int64_t axis) {
  ops::OpBuilder &b = c.builder();
  if (xs.size() != 2 || axis + 1 != static_cast<int64_t>(b.shape(xs[0]).size()))
    return kNoValue;
  const Node *neg = c.producer(xs[0], "Neg");
  const Node *first_half = c.producer(xs[1], "Slice");
  if (!neg || !first_half)
    return kNoValue;
  const ValueId x = first_half->inputs[0];
  const int64_t d = b.shape(x).back(), h = d / 2;
  if (!isFloat(b.dtype(x)) || d % 2 != 0 ||
      lastAxisSlice(c, neg->inputs[0], x) != std::pair{h, d} ||
      lastAxisSlice(c, xs[1], x) != std::pair{int64_t{0}, h})
    return kNoValue;
  return c.create("RotateHalf", {x});
}

Status convertConcat(Converter &c) {
  std::vector<ValueId> xs;
  const int64_t rank = static_cast<int64_t>(c.type(0).shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizedAxis(c, c.intAttr("axis", 0), rank));
  for (size_t i = 0; i < c.numInputs(); ++i) {
    if (!c.has(i))
      continue;
    KILN_ASSIGN_OR_RETURN(ValueId x, c.value(i));
    xs.push_back(x);
  }
  if (ValueId rotated = rotateHalfOf(c, xs, axis); rotated != kNoValue) {
    c.setOutput(0, rotated);
    return Status::ok();
  }
  c.setOutput(0, xs.size() == 1 ? c.create("Reshape", {xs[0]}, {{"shape", c.type(0).shape}})
                                : c.create("Concat", xs, {{"axis", axis}}));
  return Status::ok();
}

Status convertSplit(Converter &c) {
  const Shape in = c.type(0).shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalizedAxis(c, c.intAttr("axis", 0), static_cast<int64_t>(in.size())));
  std::vector<int64_t> sizes;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(sizes, c.ints(1, "split"));
  } else if (auto s = c.intsAttr("split")) {
    sizes = *s;
  } else {
    const int64_t parts =
        c.attr("num_outputs") ? c.intAttr("num_outputs", 1) : static_cast<int64_t>(c.numOutputs());
    if (parts <= 0)
      return c.invalid("needs one output or more");
    const int64_t each = (in[axis] + parts - 1) / parts;
    for (int64_t p = 0, left = in[axis]; p < parts; ++p, left -= each)
      sizes.push_back(std::max<int64_t>(0, std::min(each, left)));
  }
  if (static_cast<int64_t>(sizes.size()) != static_cast<int64_t>(c.numOutputs()))
    return c.invalid("splits into " + std::to_string(sizes.size()) + " pieces for " +
                     std::to_string(c.numOutputs()) + " outputs");
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  if (sizes.size() == 1) {
    c.setOutput(0, c.create("Reshape", {x}, {{"shape", in}}));
    return Status::ok();
  }
  std::vector<ValueId> ys =
      c.builder().createMulti("Split", c.name(), {x}, {{"axis", axis}, {"sizes", sizes}});
  for (size_t k = 0; k < ys.size(); ++k)
    c.setOutput(k, ys[k]);
  return Status::ok();
}

// Slice-1 takes starts, ends and axes as attributes; from 10 they are
// inputs, with steps.
Status convertSlice(Converter &c) {
  const Shape in = c.type(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const bool attrs = c.version() < 10;
  std::vector<int64_t> starts, ends;
  if (attrs) {
    starts = c.intsAttr("starts").value_or(std::vector<int64_t>{});
    ends = c.intsAttr("ends").value_or(std::vector<int64_t>{});
  } else {
    KILN_ASSIGN_OR_RETURN(starts, c.ints(1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, c.ints(2, "ends"));
  }
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (attrs && c.attr("axes")) {
    axes = *c.intsAttr("axes");
  } else if (!attrs && c.has(3)) {
    KILN_ASSIGN_OR_RETURN(axes, c.ints(3, "axes"));
  }
  if (!attrs && c.has(4)) {
    KILN_ASSIGN_OR_RETURN(steps, c.ints(4, "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return c.invalid("starts, ends, axes and steps must have one length");
  std::vector<int64_t> begin(rank, 0), end(in.begin(), in.end());
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t a, normalizedAxis(c, axes[i], rank));
    if (steps[i] != 1)
      return c.unsupported("Slice with step " + std::to_string(steps[i]) +
                           " is not supported (kiln's Slice takes unit steps)");
    const int64_t d = in[a];
    int64_t s = starts[i] < 0 ? starts[i] + d : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
    s = std::clamp<int64_t>(s, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    begin[a] = s;
    end[a] = std::max(s, e);
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, c.create("Slice", {x}, {{"begin", begin}, {"end", end}}));
  return Status::ok();
}

Status convertExpand(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec, c.ints(1, "the shape"));
  auto shape = ops::broadcastShapes(c.type(0).shape, spec);
  if (!shape)
    return c.invalid(shape.error().message());
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  ValueId y = *shape == c.builder().shape(x) ? c.create("Reshape", {x}, {{"shape", *shape}})
                                             : c.create("BroadcastTo", {x}, {{"shape", *shape}});
  c.setOutput(0, y);
  return Status::ok();
}

// Tile as reshape, broadcast, reshape: x [d0, d1] with repeats [r0, r1] is
// x as [1, d0, 1, d1] broadcast to [r0, d0, r1, d1], read as [r0 d0, r1 d1].
Status convertTile(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.ints(1, "repeats"));
  const Shape in = c.type(0).shape;
  if (repeats.size() != in.size())
    return c.invalid("repeats has " + std::to_string(repeats.size()) + " entries for rank " +
                     std::to_string(in.size()));
  Shape split, wide, out;
  for (size_t a = 0; a < in.size(); ++a) {
    if (repeats[a] < 0)
      return c.invalid("a repeat is negative");
    split.insert(split.end(), {1, in[a]});
    wide.insert(wide.end(), {repeats[a], in[a]});
    out.push_back(repeats[a] * in[a]);
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  ValueId y = c.reshape(x, split);
  y = c.create("BroadcastTo", {y}, {{"shape", wide}}, "repeat");
  c.setOutput(0, c.create("Reshape", {y}, {{"shape", out}}));
  return Status::ok();
}

Status convertTrilu(Converter &c) {
  int64_t k = 0;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(double v, c.scalar(1, "k"));
    k = static_cast<int64_t>(v);
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, c.create("Trilu", {x}, {{"upper", c.intAttr("upper", 1) != 0}, {"k", k}}));
  return Status::ok();
}

Status convertRange(Converter &c) {
  const Tensor *s = c.constant(0), *l = c.constant(1), *d = c.constant(2);
  if (!s || !l || !d)
    return c.unsupported("Range with inputs computed at run time gives a shape known only then; "
                         "kiln compiles static shapes (its start, limit and delta must be known "
                         "while compiling)");
  const DType dt = s->dtype();
  const bool f = isFloat(dt);
  const double start = f ? s->getFloat(0) : double(s->getInt(0));
  const double limit = f ? l->getFloat(0) : double(l->getInt(0));
  const double delta = f ? d->getFloat(0) : double(d->getInt(0));
  if (delta == 0)
    return c.invalid("delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  if (n > (int64_t{1} << 31))
    return c.invalid("Range of " + std::to_string(n) + " elements is too long");
  Tensor y(TensorType{dt, {n}});
  for (int64_t i = 0; i < n; ++i) {
    if (f)
      y.setFloat(i, static_cast<float>(start + double(i) * delta), OverflowMode::InfNan);
    else
      y.setInt(i, s->getInt(0) + i * d->getInt(0));
  }
  c.setConstant(0, std::move(y));
  return Status::ok();
}

Status convertConstant(Converter &c) {
  const auto &node = c.node();
  if (node.attribute_size() != 1)
    return c.invalid("needs exactly one value attribute");
  const onnx::AttributeProto &a = node.attribute(0);
  const std::string &n = a.name();
  if (n == "value") {
    auto t = tensorFromOnnx(a.t(), "", "node '" + node.name() + "' value");
    if (!t)
      return t.error().code().empty() ? c.invalid(t.error().message()) : t.error();
    c.setConstant(0, std::move(*t));
  } else if (n == "value_float") {
    c.setConstant(0, Tensor::scalar(DType::F32, a.f()));
  } else if (n == "value_int") {
    c.setConstant(0, int64Tensor({}, {a.i()}));
  } else if (n == "value_floats") {
    Tensor t(TensorType{DType::F32, {a.floats_size()}});
    for (int i = 0; i < a.floats_size(); ++i)
      t.setFloat(i, a.floats(i), OverflowMode::InfNan);
    c.setConstant(0, std::move(t));
  } else if (n == "value_ints") {
    c.setConstant(0, int64Tensor({a.ints_size()}, {a.ints().begin(), a.ints().end()}));
  } else {
    return c.unsupported("attribute '" + n +
                         "' is not supported (sparse and string constants "
                         "are not)");
  }
  return Status::ok();
}

Status convertConstantOfShape(Converter &c) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.ints(0, "the shape"));
  for (int64_t d : shape)
    if (d < 0)
      return c.invalid("the shape has a negative dimension");
  DType dt = DType::F32;
  double value = 0;
  if (const auto *a = c.attr("value")) {
    auto t = tensorFromOnnx(a->t(), "", "node '" + c.node().name() + "' value");
    if (!t)
      return t.error();
    if (t->numElements() != 1)
      return c.invalid("value must hold one element");
    dt = t->dtype();
    value = isFloat(dt) ? double(t->getFloat(0)) : double(t->getInt(0));
  }
  if (!c.wants(0))
    return Status::ok();
  Tensor y(TensorType{dt, shape});
  for (int64_t i = 0; i < y.numElements(); ++i) {
    if (isFloat(dt))
      y.setFloat(i, static_cast<float>(value), OverflowMode::InfNan);
    else
      y.setInt(i, static_cast<int64_t>(value));
  }
  c.setConstant(0, std::move(y));
  return Status::ok();
}

// Inference: the identity, and a mask of ones (of the input's type before
// version 10, bool from it). The ratio (an attribute before 12) does not
// matter then.
Status convertDropout(Converter &c) {
  if (c.version() >= 12 && c.has(2)) {
    const Tensor *training = c.constant(2);
    if (!training)
      return c.unsupported("training_mode must be known while compiling");
    if (training->getInt(0) != 0) {
      double ratio = 0.5;
      if (c.has(1)) {
        KILN_ASSIGN_OR_RETURN(ratio, c.scalar(1, "ratio"));
      }
      if (ratio != 0)
        return c.unsupported("Dropout in training mode is not supported (kiln imports models for "
                             "inference; export with model.eval())");
    }
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, c.create("Reshape", {x}, {{"shape", c.builder().shape(x)}}));
  if (c.wants(1))
    c.setOutput(1, c.constantOf(1, c.version() < 10 ? c.builder().dtype(x) : DType::Bool,
                                c.builder().shape(x)));
  return Status::ok();
}

} // namespace

KILN_REGISTER_ONNX_OP("Shape", convertShape);
KILN_REGISTER_ONNX_OP("Size", convertSize);
KILN_REGISTER_ONNX_OP("Reshape", convertReshape);
KILN_REGISTER_ONNX_OP("Flatten", convertFlatten);
KILN_REGISTER_ONNX_OP("Squeeze", convertSqueeze);
KILN_REGISTER_ONNX_OP("Unsqueeze", convertUnsqueeze);
KILN_REGISTER_ONNX_OP("Transpose", convertTranspose);
KILN_REGISTER_ONNX_OP("Concat", convertConcat);
KILN_REGISTER_ONNX_OP("Split", convertSplit);
KILN_REGISTER_ONNX_OP("Slice", convertSlice);
KILN_REGISTER_ONNX_OP("Expand", convertExpand);
KILN_REGISTER_ONNX_OP("Tile", convertTile);
KILN_REGISTER_ONNX_OP("Trilu", convertTrilu);
KILN_REGISTER_ONNX_OP("Range", convertRange);
KILN_REGISTER_ONNX_OP("Constant", convertConstant);
KILN_REGISTER_ONNX_OP("ConstantOfShape", convertConstantOfShape);
KILN_REGISTER_ONNX_OP("Dropout", convertDropout);

} // namespace kiln::frontend::onnx_import

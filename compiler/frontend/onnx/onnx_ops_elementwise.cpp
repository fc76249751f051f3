// ONNX's elementwise operators: arithmetic, math, comparisons, logic, Cast,
// Where, Clip and the variadic Min, Max, Sum and Mean, onto kiln's
// broadcasting ops (ONNX and kiln broadcast alike, numpy's rules).
#include <cmath>

#include "compiler/frontend/onnx/onnx_context.h"
#include "compiler/frontend/onnx/onnx_reader.h"

namespace kiln::frontend::onnx_import {
namespace {

// Two operands of one dtype (ONNX requires it of these operators).
Expected<std::pair<ValueId, ValueId>> operands(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId a, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId b, c.value(1));
  if (c.builder().dtype(a) != c.builder().dtype(b))
    return c.invalid("operands have different element types (" +
                     std::string(dtypeName(c.builder().dtype(a))) + " and " +
                     std::string(dtypeName(c.builder().dtype(b))) + ")");
  return std::make_pair(a, b);
}

ConvertFn binary(const char *op, bool float_only = false) {
  return [op, float_only](Converter &c) -> Status {
    KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
    if (float_only && !isFloat(c.builder().dtype(ab.first)))
      return c.unsupportedType(std::string(op) + " of " +
                               std::string(dtypeName(c.builder().dtype(ab.first))) +
                               " tensors is not supported (float, float16 and bfloat16 are)");
    c.setOutput(0, c.create(op, {ab.first, ab.second}));
    return Status::ok();
  };
}

ConvertFn unary(const char *op, bool float_only = true) {
  return [op, float_only](Converter &c) -> Status {
    KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
    if (float_only && !isFloat(c.builder().dtype(x)))
      return c.unsupportedType(std::string(op) + " of " +
                               std::string(dtypeName(c.builder().dtype(x))) +
                               " tensors is not supported (float, float16 and bfloat16 are)");
    c.setOutput(0, c.create(op, {x}));
    return Status::ok();
  };
}

// x + bias after a linear layer (MatMul on rows, then a Reshape back):
// BiasAdd on the MatMul's rows, the epilogue FixPipe applies.
ValueId linearBias(Converter &c, ValueId x, ValueId bias) {
  const Graph &g = c.builder().graph();
  const Node *reshape = c.producer(x, "Reshape");
  if (!reshape)
    return kNoValue;
  const ValueId rows = reshape->inputs[0];
  const Shape &bs = g.type(bias).shape;
  if (!c.producer(rows, "MatMul") || bs.size() != 1 || g.type(rows).shape.size() != 2 ||
      bs[0] != g.type(rows).shape[1] || bs[0] == 1 || g.type(x).dtype != g.type(bias).dtype)
    return kNoValue;
  ValueId y = c.create("BiasAdd", {rows, bias}, {}, "bias_add");
  return c.reshape(y, g.type(x).shape);
}

// x + mask where the mask is a constant causal mask (0 on and below the
// diagonal of its last two axes, one very negative value above): CausalMask,
// which the softmax fusion takes in. Adding -1e9 and setting it agree once
// the softmax has run.
ValueId causalMask(Converter &c, ValueId x, size_t mask_input) {
  const Tensor *m = c.constant(mask_input);
  const Shape &xs = c.builder().shape(x);
  if (!m || !isFloat(m->dtype()) || m->shape().size() < 2 || !isFloat(c.builder().dtype(x)) ||
      xs.size() < 2)
    return kNoValue;
  const Shape &ms = m->shape();
  const int64_t q = ms[ms.size() - 2], k = ms[ms.size() - 1];
  if (ms.size() > xs.size() || numElements(ms) != q * k || q != xs[xs.size() - 2] ||
      k != xs[xs.size() - 1] || q < 2)
    return kNoValue;
  const float fill = m->getFloat(1);
  if (!(fill <= -1e4f))
    return kNoValue;
  for (int64_t i = 0; i < q; ++i)
    for (int64_t j = 0; j < k; ++j)
      if (m->getFloat(i * k + j) != (j > i + k - q ? fill : 0.0f))
        return kNoValue;
  return c.create("CausalMask", {x}, {{"fill", double(fill)}});
}

Status convertAdd(Converter &c) {
  KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
  ValueId y = kNoValue;
  if (isFloat(c.builder().dtype(ab.first))) {
    y = linearBias(c, ab.first, ab.second);
    if (y == kNoValue) // torch writes the bias first
      y = linearBias(c, ab.second, ab.first);
    if (y == kNoValue)
      y = causalMask(c, ab.first, 1);
  }
  if (y == kNoValue)
    y = c.create("Add", {ab.first, ab.second});
  c.setOutput(0, y);
  return Status::ok();
}

// x * sigmoid(x), either way round: what torch's silu exports as. Silu is
// what the SwiGLU fusions match (and autodiff's SiluGrad their backward);
// the Sigmoid is left to dead-code elimination.
ValueId siluOf(Converter &c, ValueId a, ValueId b) {
  const Graph &g = c.builder().graph();
  for (const auto &[x, s] : {std::pair{a, b}, std::pair{b, a}}) {
    const Node *sigmoid = c.producer(s, "Sigmoid");
    if (sigmoid && sigmoid->inputs[0] == x && g.type(x) == g.type(s))
      return c.create("Silu", {x});
  }
  return kNoValue;
}

Status convertMul(Converter &c) {
  KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
  const ValueId silu =
      isFloat(c.builder().dtype(ab.first)) ? siluOf(c, ab.first, ab.second) : kNoValue;
  c.setOutput(0, silu != kNoValue ? silu : c.create("Mul", {ab.first, ab.second}));
  return Status::ok();
}

// 1 / sqrt(y): what torch.rsqrt exports as. Rsqrt is what the norms'
// fusions match; the Sqrt is left to dead-code elimination.
ValueId rsqrtOf(Converter &c, ValueId x) {
  const Tensor *one = c.constant(0);
  const Node *sqrt = c.producer(x, "Sqrt");
  if (!one || one->numElements() != 1 || one->getFloat(0) != 1.0f || !sqrt ||
      c.builder().shape(x).size() < one->shape().size())
    return kNoValue;
  return c.create("Rsqrt", {sqrt->inputs[0]});
}

// Integer Div truncates toward zero (as C and ONNX Runtime do); kiln's Div
// is float-only, so integers divide in f32, exact below 2^24.
Status convertDiv(Converter &c) {
  KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
  const DType dt = c.builder().dtype(ab.first);
  if (isFloat(dt)) {
    if (ValueId r = rsqrtOf(c, ab.second); r != kNoValue) {
      c.setOutput(0, r);
      return Status::ok();
    }
    c.setOutput(0, c.create("Div", {ab.first, ab.second}));
    return Status::ok();
  }
  if (dt == DType::Bool)
    return c.unsupportedType("Div of bool tensors is not defined");
  ValueId q = c.create("Div", {c.cast(ab.first, DType::F32), c.cast(ab.second, DType::F32)});
  c.setOutput(0, c.cast(q, dt));
  return Status::ok();
}

// Pow: the exponent is cast to the base's type; x^2 is x*x and x^1 is x,
// as the norms' patterns expect. Integer bases are raised in f32.
Status convertPow(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  const DType dt = c.builder().dtype(x);
  if (dt == DType::Bool)
    return c.unsupportedType("Pow of bool bases is not defined");
  if (!isFloat(dt)) { // in f32, rounded to the nearest integer (exact below 2^24)
    KILN_ASSIGN_OR_RETURN(ValueId y, c.value(1));
    ValueId p = c.create("Pow", {c.cast(x, DType::F32), c.cast(y, DType::F32)}, {}, "f32");
    ValueId half = c.create("Where",
                            {c.create("Less", {p, c.constantOf(0, DType::F32)}, {}, "negative"),
                             c.constantOf(-0.5, DType::F32), c.constantOf(0.5, DType::F32)},
                            {}, "half");
    c.setOutput(0, c.cast(c.create("Add", {p, half}, {}, "rounded"), dt));
    return Status::ok();
  }
  if (const Tensor *e = c.constant(1); e && e->numElements() == 1 && e->shape().size() <= 1 &&
                                       c.builder().shape(x).size() >= e->shape().size()) {
    const double p = isFloat(e->dtype()) ? double(e->getFloat(0)) : double(e->getInt(0));
    if (p == 2) {
      c.setOutput(0, c.create("Mul", {x, x}));
      return Status::ok();
    }
    if (p == 1 && e->shape().empty()) {
      c.setOutput(0, x);
      return Status::ok();
    }
  }
  KILN_ASSIGN_OR_RETURN(ValueId y, c.value(1));
  c.setOutput(0, c.create("Pow", {x, c.cast(y, dt)}));
  return Status::ok();
}

Status convertReciprocal(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  if (!isFloat(c.builder().dtype(x)))
    return c.unsupportedType("Reciprocal needs a float tensor");
  if (const Node *sqrt = c.producer(x, "Sqrt"))
    c.setOutput(0, c.create("Rsqrt", {sqrt->inputs[0]}));
  else
    c.setOutput(0, c.create("Div", {c.constantOf(1, c.builder().dtype(x)), x}));
  return Status::ok();
}

Status convertRelu(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  if (c.builder().dtype(x) == DType::Bool)
    return c.unsupportedType("Relu of bool is not defined");
  c.setOutput(0, c.create("Maximum", {x, c.constantOf(0, c.builder().dtype(x))}));
  return Status::ok();
}

Status convertLeakyRelu(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  const DType dt = c.builder().dtype(x);
  if (!isFloat(dt))
    return c.unsupportedType("LeakyRelu needs a float tensor");
  ValueId neg = c.create("Less", {x, c.constantOf(0, dt)}, {}, "negative");
  ValueId scaled = c.create("Mul", {x, c.constantOf(c.floatAttr("alpha", 0.01f), dt)}, {}, "alpha");
  c.setOutput(0, c.create("Where", {neg, scaled, x}));
  return Status::ok();
}

Status convertSoftplus(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  const DType dt = c.builder().dtype(x);
  if (!isFloat(dt))
    return c.unsupportedType("Softplus needs a float tensor");
  ValueId e = c.create("Exp", {x}, {}, "exp");
  c.setOutput(0, c.create("Log", {c.create("Add", {e, c.constantOf(1, dt)}, {}, "plus_one")}));
  return Status::ok();
}

Status convertSoftsign(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  const DType dt = c.builder().dtype(x);
  if (!isFloat(dt))
    return c.unsupportedType("Softsign needs a float tensor");
  ValueId d = c.create("Add", {c.create("Abs", {x}, {}, "abs"), c.constantOf(1, dt)}, {}, "denom");
  c.setOutput(0, c.create("Div", {x, d}));
  return Status::ok();
}

// Min, Max, Sum and Mean: one or more operands, broadcast together.
ConvertFn variadic(const char *op, bool mean = false) {
  return [op, mean](Converter &c) -> Status {
    if (c.numInputs() == 0)
      return c.invalid("needs one input or more");
    KILN_ASSIGN_OR_RETURN(ValueId acc, c.value(0));
    const DType dt = c.builder().dtype(acc);
    if (dt == DType::Bool || (mean && !isFloat(dt)))
      return c.unsupportedType("not supported for " + std::string(dtypeName(dt)) + " tensors");
    for (size_t i = 1; i < c.numInputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(ValueId x, c.value(i));
      if (c.builder().dtype(x) != dt)
        return c.invalid("operands have different element types");
      acc = c.create(op, {acc, x}, {}, "step" + std::to_string(i));
    }
    if (mean && c.numInputs() > 1)
      acc = c.create("Div", {acc, c.constantOf(double(c.numInputs()), dt)});
    if (c.numInputs() == 1) // a lone operand is copied
      acc = c.create("Reshape", {acc}, {{"shape", c.builder().shape(acc)}});
    c.setOutput(0, acc);
    return Status::ok();
  };
}

Status convertClip(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  const DType dt = c.builder().dtype(x);
  if (dt == DType::Bool)
    return c.unsupportedType("Clip of bool is not defined");
  ValueId y = x;
  if (c.version() < 11) { // min and max are attributes, float by default the whole range
    if (const auto *lo = c.attr("min"))
      y = c.create("Maximum", {y, c.constantOf(lo->f(), dt)}, {}, "min");
    if (const auto *hi = c.attr("max"))
      y = c.create("Minimum", {y, c.constantOf(hi->f(), dt)}, {}, "max");
  }
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(ValueId lo, c.value(1));
    y = c.create("Maximum", {y, c.cast(lo, dt)}, {}, "min");
  }
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(ValueId hi, c.value(2));
    y = c.create("Minimum", {y, c.cast(hi, dt)}, {}, "max");
  }
  if (y == x)
    y = c.create("Reshape", {x}, {{"shape", c.builder().shape(x)}});
  c.setOutput(0, y);
  return Status::ok();
}

Status convertWhere(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId cond, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(1));
  KILN_ASSIGN_OR_RETURN(ValueId y, c.value(2));
  c.setOutput(0, c.create("Where", {cond, x, y}));
  return Status::ok();
}

// a <= b is not (a > b); a >= b is not (a < b).
ConvertFn negatedCompare(const char *op) {
  return [op](Converter &c) -> Status {
    KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
    if (c.builder().dtype(ab.first) == DType::Bool)
      return c.unsupportedType("ordering bools is not supported");
    c.setOutput(0, c.create("Not", {c.create(op, {ab.first, ab.second}, {}, "negated")}));
    return Status::ok();
  };
}

Status convertXor(Converter &c) {
  KILN_ASSIGN_OR_RETURN(auto ab, operands(c));
  c.setOutput(0, c.create("Not", {c.create("Equal", {ab.first, ab.second}, {}, "same")}));
  return Status::ok();
}

Status castTo(Converter &c, DType to) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  ValueId y = c.builder().dtype(x) == to
                  ? c.create("Reshape", {x}, {{"shape", c.builder().shape(x)}})
                  : c.create("Cast", {x}, {{"dtype", to}});
  c.setOutput(0, y);
  return Status::ok();
}

Status convertCast(Converter &c) {
  auto to = dtypeOfOnnx(static_cast<int32_t>(c.intAttr("to", 0)));
  if (!to)
    return c.unsupportedType("Cast to " +
                             std::string(onnxTypeName(static_cast<int32_t>(c.intAttr("to", 0)))) +
                             ": " + to.error().message());
  return castTo(c, *to);
}

Status convertCastLike(Converter &c) { return castTo(c, c.type(1).dtype); }

Status convertIdentity(Converter &c) {
  if (const Tensor *t = c.constant(0)) {
    c.setConstant(0, *t);
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  c.setOutput(0, x);
  return Status::ok();
}

} // namespace

KILN_REGISTER_ONNX_OP("Add", convertAdd);
KILN_REGISTER_ONNX_OP("Sub", binary("Sub"));
KILN_REGISTER_ONNX_OP("Mul", convertMul);
KILN_REGISTER_ONNX_OP("Div", convertDiv);
KILN_REGISTER_ONNX_OP("Pow", convertPow);
KILN_REGISTER_ONNX_OP("Neg", unary("Neg", false));
KILN_REGISTER_ONNX_OP("Abs", unary("Abs", false));
KILN_REGISTER_ONNX_OP("Exp", unary("Exp"));
KILN_REGISTER_ONNX_OP("Log", unary("Log"));
KILN_REGISTER_ONNX_OP("Sqrt", unary("Sqrt"));
KILN_REGISTER_ONNX_OP("Tanh", unary("Tanh"));
KILN_REGISTER_ONNX_OP("Sigmoid", unary("Sigmoid"));
KILN_REGISTER_ONNX_OP("Erf", unary("Erf"));
KILN_REGISTER_ONNX_OP("Sin", unary("Sin"));
KILN_REGISTER_ONNX_OP("Cos", unary("Cos"));
KILN_REGISTER_ONNX_OP("Reciprocal", convertReciprocal);
KILN_REGISTER_ONNX_OP("Relu", convertRelu);
KILN_REGISTER_ONNX_OP("LeakyRelu", convertLeakyRelu);
KILN_REGISTER_ONNX_OP("Softplus", convertSoftplus);
KILN_REGISTER_ONNX_OP("Softsign", convertSoftsign);
KILN_REGISTER_ONNX_OP("Min", variadic("Minimum"));
KILN_REGISTER_ONNX_OP("Max", variadic("Maximum"));
KILN_REGISTER_ONNX_OP("Sum", variadic("Add"));
KILN_REGISTER_ONNX_OP("Mean", variadic("Add", true));
KILN_REGISTER_ONNX_OP("Clip", convertClip);
KILN_REGISTER_ONNX_OP("Where", convertWhere);
KILN_REGISTER_ONNX_OP("Equal", binary("Equal"));
KILN_REGISTER_ONNX_OP("Less", binary("Less"));
KILN_REGISTER_ONNX_OP("Greater", binary("Greater"));
KILN_REGISTER_ONNX_OP("LessOrEqual", negatedCompare("Greater"));
KILN_REGISTER_ONNX_OP("GreaterOrEqual", negatedCompare("Less"));
KILN_REGISTER_ONNX_OP("Not", unary("Not", false));
KILN_REGISTER_ONNX_OP("And", binary("And"));
KILN_REGISTER_ONNX_OP("Or", binary("Or"));
KILN_REGISTER_ONNX_OP("Xor", convertXor);
KILN_REGISTER_ONNX_OP("Cast", convertCast);
KILN_REGISTER_ONNX_OP("CastLike", convertCastLike);
KILN_REGISTER_ONNX_OP("Identity", convertIdentity);

} // namespace kiln::frontend::onnx_import

// ONNX's matrix, normalization and reduction operators: MatMul, Gemm,
// Softmax, LogSoftmax, LayerNormalization and the Reduce family, onto
// kiln's MatMul (2-D, the FixPipe fusions' anchor), BatchMatMul and
// reductions.
#include <algorithm>
#include <functional>
#include <numeric>

#include "compiler/frontend/onnx/onnx_context.h"
#include "ops/kernel_util.h"

namespace kiln::frontend::onnx_import {

// Stable where log(softmax) is not.
ValueId logSoftmax(Converter &c, ValueId x, int64_t axis) {
  const AttrMap keep{{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}};
  ValueId m = c.create("ReduceMax", {x}, keep, "max");
  ValueId s = c.create("Sub", {x, m}, {}, "shifted");
  ValueId sum = c.create("ReduceSum", {c.create("Exp", {s}, {}, "exp")}, keep, "sum");
  return c.create("Sub", {s, c.create("Log", {sum}, {}, "log_sum")});
}

namespace {

Status requireFloat(Converter &c, ValueId x, const char *what) {
  const DType dt = c.builder().dtype(x);
  if (!isFloat(dt))
    return c.unsupportedType(std::string(what) + " of " + std::string(dtypeName(dt)) +
                             " tensors is not supported (float, float16 and bfloat16 are)");
  return Status::ok();
}

// numpy's matmul: 1-D operands gain an axis that the result loses; a 2-D
// right operand makes one 2-D MatMul over the left's rows (the linear layer
// the fusions know); otherwise the batch axes broadcast into a BatchMatMul.
Status convertMatMul(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId a, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId b, c.value(1));
  KILN_RETURN_IF_ERROR(requireFloat(c, a, "MatMul"));
  ops::OpBuilder &ob = c.builder();
  if (ob.dtype(a) != ob.dtype(b))
    return c.invalid("operands have different element types");
  Shape as = ob.shape(a), bs = ob.shape(b);
  if (as.empty() || bs.empty())
    return c.invalid("MatMul operands must have rank 1 or more");
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec)
    a = c.reshape(a, {1, as[0]});
  if (b_vec)
    b = c.reshape(b, {bs[0], 1});
  as = ob.shape(a);
  bs = ob.shape(b);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return c.invalid("MatMul of " + shapeToString(ob.shape(a)) + " and " +
                     shapeToString(ob.shape(b)) + ": the inner dimensions differ");
  Shape batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  Shape out;
  ValueId y = kNoValue;
  if (batch_b.empty()) {
    const int64_t rows = numElements(batch_a) * M;
    ValueId flat = c.reshape(a, {rows, K});
    y = c.create("MatMul", {flat, b});
    out = batch_a;
    out.insert(out.end(), {M, N});
    y = c.reshape(y, out);
  } else {
    auto batch = ops::broadcastShapes(batch_a, batch_b);
    if (!batch)
      return c.invalid("the batch axes do not broadcast: " + batch.error().message());
    Shape full_a = *batch, full_b = *batch;
    full_a.insert(full_a.end(), {M, K});
    full_b.insert(full_b.end(), {K, N});
    if (ob.shape(a) != full_a)
      a = c.create("BroadcastTo", {a}, {{"shape", full_a}}, "broadcast_a");
    if (ob.shape(b) != full_b)
      b = c.create("BroadcastTo", {b}, {{"shape", full_b}}, "broadcast_b");
    y = c.create("BatchMatMul", {a, b});
    out = *batch;
    out.insert(out.end(), {M, N});
  }
  Shape want = out;
  if (a_vec)
    want.erase(want.end() - 2);
  if (b_vec)
    want.pop_back();
  c.setOutput(0, c.reshape(y, want));
  return Status::ok();
}

Status convertGemm(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId a, c.value(0));
  KILN_ASSIGN_OR_RETURN(ValueId b, c.value(1));
  KILN_RETURN_IF_ERROR(requireFloat(c, a, "Gemm"));
  ops::OpBuilder &ob = c.builder();
  const float alpha = c.floatAttr("alpha", 1), beta = c.floatAttr("beta", 1);
  const bool ta = c.intAttr("transA", 0) != 0, tb = c.intAttr("transB", 0) != 0;
  if (ob.shape(a).size() != 2 || ob.shape(b).size() != 2)
    return c.invalid("Gemm takes 2-D A and B");
  const DType dt = ob.dtype(a);
  ValueId y = c.create("MatMul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
  if (alpha != 1)
    y = c.create("Mul", {y, c.constantOf(alpha, dt)}, {}, "alpha");
  if (c.has(2) && beta != 0) {
    KILN_ASSIGN_OR_RETURN(ValueId bias, c.value(2));
    if (beta != 1)
      bias = c.create("Mul", {bias, c.constantOf(beta, dt)}, {}, "beta");
    const Shape &bs = ob.shape(bias);
    const bool row = bs.size() == 1 && bs[0] == ob.shape(y)[1] && bs[0] != 1;
    y = row ? c.create("BiasAdd", {y, bias}, {}, "bias_add")
            : c.create("Add", {y, bias}, {}, "add_c");
  }
  c.setOutput(0, y);
  return Status::ok();
}

// Softmax before version 13 coerces its input to 2-D at `axis` (default 1)
// and normalizes each row of that matrix; from 13 it normalizes one axis
// (default -1). `body` builds the 13 form over `axis`.
Status softmaxLike(Converter &c, const std::function<ValueId(ValueId, int64_t)> &body) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  KILN_RETURN_IF_ERROR(requireFloat(c, x, c.node().op_type().c_str()));
  const Shape shape = c.builder().shape(x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerced = c.version() < 13;
  const int64_t given = c.intAttr("axis", coerced ? 1 : -1);
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizedAxis(c, given, rank));
  if (!coerced || (rank == 2 && axis == 1)) {
    c.setOutput(0, body(x, axis));
    return Status::ok();
  }
  const int64_t outer = numElements(Shape(shape.begin(), shape.begin() + axis));
  ValueId rows = c.reshape(x, {outer, numElements(shape) / std::max<int64_t>(outer, 1)});
  c.setOutput(0, c.reshape(body(rows, 1), shape));
  return Status::ok();
}

Status convertSoftmax(Converter &c) {
  return softmaxLike(c, [&c](ValueId x, int64_t axis) {
    return c.create("Softmax", {x}, {{"axis", axis}});
  });
}

Status convertLogSoftmax(Converter &c) {
  return softmaxLike(c, [&c](ValueId x, int64_t axis) { return logSoftmax(c, x, axis); });
}

// In f32 (stash_type 1) whatever the input's dtype: mean, variance, the
// normalized rows, scale and bias.
Status convertLayerNorm(Converter &c) {
  KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
  KILN_RETURN_IF_ERROR(requireFloat(c, x, "LayerNormalization"));
  ops::OpBuilder &b = c.builder();
  const DType dt = b.dtype(x);
  const int64_t rank = static_cast<int64_t>(b.shape(x).size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizedAxis(c, c.intAttr("axis", -1), rank));
  if (c.intAttr("stash_type", 1) != 1)
    return c.unsupported("stash_type " + std::to_string(c.intAttr("stash_type", 1)) +
                         " is not supported (1, f32 statistics, is)");
  std::vector<int64_t> axes(rank - axis);
  std::iota(axes.begin(), axes.end(), axis);
  const AttrMap keep{{"axes", axes}, {"keepdims", true}};
  ValueId xf = c.cast(x, DType::F32);
  ValueId mean = c.create("ReduceMean", {xf}, keep, "mean");
  ValueId d = c.create("Sub", {xf, mean}, {}, "centered");
  ValueId var = c.create("ReduceMean", {c.create("Mul", {d, d}, {}, "square")}, keep, "variance");
  ValueId eps = c.constantOf(c.floatAttr("epsilon", 1e-5f), DType::F32);
  ValueId inv = c.create("Rsqrt", {c.create("Add", {var, eps}, {}, "add_eps")}, {}, "rsqrt");
  ValueId y = c.create("Mul", {d, inv}, {}, "normalize");
  y = c.cast(y, dt);
  KILN_ASSIGN_OR_RETURN(ValueId scale, c.value(1));
  y = c.create("Mul", {y, scale}, {}, "scale");
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(ValueId bias, c.value(2));
    y = c.create("Add", {y, bias}, {}, "bias");
  }
  c.setOutput(0, y);
  c.setOutput(1, mean);
  c.setOutput(2, inv);
  return Status::ok();
}

enum class Reduce { Sum, Mean, Max, Min, SumSquare, L1, L2, LogSum, LogSumExp };

// The Reduce family: axes from the attribute (opset < 18, ReduceSum < 13)
// or the second input; keepdims; noop_with_empty_axes.
ConvertFn reduction(Reduce kind) {
  return [kind](Converter &c) -> Status {
    KILN_ASSIGN_OR_RETURN(ValueId x, c.value(0));
    KILN_RETURN_IF_ERROR(requireFloat(c, x, c.node().op_type().c_str()));
    const bool axes_input = kind == Reduce::Sum ? c.version() >= 13 : c.version() >= 18;
    std::vector<int64_t> axes;
    if (axes_input && c.has(1)) {
      KILN_ASSIGN_OR_RETURN(axes, c.ints(1, "axes"));
    } else if (!axes_input) {
      if (auto a = c.intsAttr("axes"))
        axes = *a;
    }
    const int64_t rank = static_cast<int64_t>(c.builder().shape(x).size());
    for (int64_t &a : axes) {
      KILN_ASSIGN_OR_RETURN(a, normalizedAxis(c, a, rank));
    }
    const bool keepdims = c.intAttr("keepdims", 1) != 0;
    if (axes.empty() && c.intAttr("noop_with_empty_axes", 0) != 0) {
      ValueId y = x;
      if (kind == Reduce::SumSquare)
        y = c.create("Mul", {x, x}, {}, "square");
      else if (kind == Reduce::L1 || kind == Reduce::L2)
        y = c.create("Abs", {x}, {}, "abs");
      else if (kind == Reduce::LogSum)
        y = c.create("Log", {x}, {}, "log");
      else
        y = c.create("Reshape", {x}, {{"shape", c.builder().shape(x)}});
      c.setOutput(0, y);
      return Status::ok();
    }
    if (axes.empty()) {
      axes.resize(rank);
      std::iota(axes.begin(), axes.end(), 0);
    }
    const AttrMap attrs{{"axes", axes}, {"keepdims", keepdims}};
    ValueId y = kNoValue;
    switch (kind) {
    case Reduce::Sum:
      y = c.create("ReduceSum", {x}, attrs);
      break;
    case Reduce::Mean:
      y = c.create("ReduceMean", {x}, attrs);
      break;
    case Reduce::Max:
      y = c.create("ReduceMax", {x}, attrs);
      break;
    case Reduce::Min:
      y = c.create("ReduceMin", {x}, attrs);
      break;
    case Reduce::SumSquare:
      y = c.create("ReduceSum", {c.create("Mul", {x, x}, {}, "square")}, attrs);
      break;
    case Reduce::L1:
      y = c.create("ReduceSum", {c.create("Abs", {x}, {}, "abs")}, attrs);
      break;
    case Reduce::L2:
      y = c.create("Sqrt",
                   {c.create("ReduceSum", {c.create("Mul", {x, x}, {}, "square")}, attrs, "sum")});
      break;
    case Reduce::LogSum:
      y = c.create("Log", {c.create("ReduceSum", {x}, attrs, "sum")});
      break;
    case Reduce::LogSumExp: {
      const AttrMap keep{{"axes", axes}, {"keepdims", true}};
      ValueId m = c.create("ReduceMax", {x}, keep, "max");
      ValueId e = c.create("Exp", {c.create("Sub", {x, m}, {}, "shifted")}, {}, "exp");
      y = c.create("Add",
                   {c.create("Log", {c.create("ReduceSum", {e}, keep, "sum")}, {}, "log"), m});
      if (!keepdims) {
        Shape s;
        const Shape &in = c.builder().shape(x);
        for (int64_t a = 0; a < rank; ++a)
          if (std::find(axes.begin(), axes.end(), a) == axes.end())
            s.push_back(in[a]);
        y = c.reshape(y, s);
      }
      break;
    }
    }
    c.setOutput(0, y);
    return Status::ok();
  };
}

} // namespace

KILN_REGISTER_ONNX_OP("MatMul", convertMatMul);
KILN_REGISTER_ONNX_OP("Gemm", convertGemm);
KILN_REGISTER_ONNX_OP("Softmax", convertSoftmax);
KILN_REGISTER_ONNX_OP("LogSoftmax", convertLogSoftmax);
KILN_REGISTER_ONNX_OP("LayerNormalization", convertLayerNorm);
KILN_REGISTER_ONNX_OP("ReduceSum", reduction(Reduce::Sum));
KILN_REGISTER_ONNX_OP("ReduceMean", reduction(Reduce::Mean));
KILN_REGISTER_ONNX_OP("ReduceMax", reduction(Reduce::Max));
KILN_REGISTER_ONNX_OP("ReduceMin", reduction(Reduce::Min));
KILN_REGISTER_ONNX_OP("ReduceSumSquare", reduction(Reduce::SumSquare));
KILN_REGISTER_ONNX_OP("ReduceL1", reduction(Reduce::L1));
KILN_REGISTER_ONNX_OP("ReduceL2", reduction(Reduce::L2));
KILN_REGISTER_ONNX_OP("ReduceLogSum", reduction(Reduce::LogSum));
KILN_REGISTER_ONNX_OP("ReduceLogSumExp", reduction(Reduce::LogSumExp));

} // namespace kiln::frontend::onnx_import

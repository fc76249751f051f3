// ONNX's losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// (reduction none, sum or mean; ignore_index; per-class weights; SCE's
// log_prob output), onto kiln's differentiable ops so `--training --loss`
// can differentiate them. The common case, SCE's unweighted mean without
// log_prob, is kiln's fused CrossEntropyLoss over the [rows, classes] view.
#include <numeric>

#include "compiler/frontend/onnx/onnx_context.h"
#include "ops/ignore_index.h"

namespace kiln::frontend::onnx_import {

namespace {

struct LossInputs {
  ValueId scores = kNoValue; // [N, C, d...] float
  ValueId labels = kNoValue; // [N, d...] int32 or int64
  ValueId weights = kNoValue;
  std::string reduction;
  const onnx::AttributeProto *ignore = nullptr;
};

Expected<LossInputs> lossInputs(Converter &c) {
  LossInputs in;
  KILN_ASSIGN_OR_RETURN(in.scores, c.value(0));
  KILN_ASSIGN_OR_RETURN(in.labels, c.value(1));
  ops::OpBuilder &b = c.builder();
  const Shape &s = b.shape(in.scores), &l = b.shape(in.labels);
  if (!isFloat(b.dtype(in.scores)))
    return c.unsupportedType("scores of " + std::string(dtypeName(b.dtype(in.scores))) +
                             " are not supported (float, float16 and bfloat16 are)");
  if (b.dtype(in.labels) != DType::I32 && b.dtype(in.labels) != DType::I64)
    return c.invalid("the labels must be int32 or int64");
  Shape want = s;
  if (s.size() >= 2)
    want.erase(want.begin() + 1);
  if (s.size() < 2 || l != want)
    return c.invalid("scores " + shapeToString(s) + " and labels " + shapeToString(l) +
                     " do not match (scores [N, C, d...], labels [N, d...])");
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(in.weights, c.value(2));
    if (b.shape(in.weights) != Shape{s[1]} || b.dtype(in.weights) != b.dtype(in.scores))
      return c.invalid("the weights must be one " + std::string(dtypeName(b.dtype(in.scores))) +
                       " per class, [" + std::to_string(s[1]) + "]");
  }
  in.reduction = c.stringAttr("reduction", "mean");
  if (in.reduction != "none" && in.reduction != "sum" && in.reduction != "mean")
    return c.invalid("reduction '" + in.reduction + "' is not none, sum or mean");
  in.ignore = c.attr("ignore_index");
  return in;
}

// -log_prob[n, label[n, d], d] * weight[label], 0 where the label is
// ignore_index, reduced as asked. A mean divides by the kept rows' weights.
ValueId negativeLogLikelihood(Converter &c, const LossInputs &in, ValueId log_prob) {
  ops::OpBuilder &b = c.builder();
  const DType dt = b.dtype(log_prob), it = b.dtype(in.labels);
  ValueId labels = in.labels, weight = kNoValue;
  if (in.ignore) { // an ignored label may be outside [0, C): gather class 0 there
    ValueId ignored =
        c.create("Equal", {labels, c.constantOf(double(in.ignore->i()), it)}, {}, "ignored");
    labels = c.create("Where", {ignored, c.constantOf(0, it), labels}, {}, "labels");
    weight = c.cast(c.create("Not", {ignored}, {}, "kept"), dt);
  }
  if (in.weights != kNoValue) {
    ValueId w = c.create("Gather", {in.weights, labels}, {}, "class_weight");
    weight = weight == kNoValue ? w : c.create("Mul", {w, weight}, {}, "weight");
  }
  Shape index = b.shape(labels);
  index.insert(index.begin() + 1, 1);
  ValueId picked =
      c.create("GatherElements", {log_prob, c.reshape(labels, index)}, {{"axis", 1}}, "picked");
  ValueId loss = c.create("Neg", {c.reshape(picked, b.shape(labels))}, {}, "nll");
  if (weight != kNoValue)
    loss = c.create("Mul", {loss, weight}, {}, "weighted");
  if (in.reduction == "none")
    return loss;
  std::vector<int64_t> all(b.shape(loss).size());
  std::iota(all.begin(), all.end(), 0);
  const AttrMap attrs{{"axes", all}, {"keepdims", false}};
  if (in.reduction == "sum")
    return c.create("ReduceSum", {loss}, attrs, "sum");
  if (weight == kNoValue)
    return c.create("ReduceMean", {loss}, attrs, "mean");
  ValueId total = c.create("ReduceSum", {loss}, attrs, "sum");
  return c.create("Div", {total, c.create("ReduceSum", {weight}, attrs, "weight_sum")}, {}, "mean");
}

Status convertNll(Converter &c) {
  KILN_ASSIGN_OR_RETURN(LossInputs in, lossInputs(c));
  c.setOutput(0, negativeLogLikelihood(c, in, in.scores));
  return Status::ok();
}

// CrossEntropyLoss over logits as [rows, C] (the class axis moved last).
ValueId fusedCrossEntropy(Converter &c, const LossInputs &in) {
  ops::OpBuilder &b = c.builder();
  const Shape s = b.shape(in.scores);
  const int64_t rank = static_cast<int64_t>(s.size());
  ValueId logits = in.scores;
  if (rank > 2) {
    std::vector<int64_t> perm{0};
    for (int64_t a = 2; a < rank; ++a)
      perm.push_back(a);
    perm.push_back(1);
    logits = c.create("Transpose", {logits}, {{"perm", perm}}, "classes_last");
  }
  const int64_t rows = numElements(s) / std::max<int64_t>(s[1], 1);
  logits = c.reshape(logits, {rows, s[1]});
  ValueId labels = c.reshape(in.labels, {rows});
  // Without ONNX's ignore_index every label must be a class: none ignored.
  const int64_t ignore = in.ignore ? in.ignore->i() : ops::kNoIgnoreIndex;
  ValueId loss = c.create("CrossEntropyLoss", {logits, labels}, {{"ignore_index", ignore}});
  if (in.ignore) {
    // ONNX's mean over no kept row is 0 / 0, NaN, where kiln's loss is 0 (a
    // batch of padding does not end a training run): count / count is 1,
    // exactly, where a row is kept, and NaN where none is.
    const DType it = b.dtype(labels);
    ValueId ignored = c.create("Equal", {labels, c.constantOf(double(ignore), it)}, {}, "ignored");
    ValueId kept = c.cast(c.create("Not", {ignored}, {}, "kept"), DType::F32);
    ValueId count = c.create("ReduceSum", {kept},
                             {{"axes", std::vector<int64_t>{0}}, {"keepdims", false}}, "kept_rows");
    loss = c.create("Mul", {loss, c.create("Div", {count, count}, {}, "any_kept")}, {}, "mean");
  }
  return c.cast(loss, b.dtype(in.scores));
}

Status convertSoftmaxCrossEntropy(Converter &c) {
  KILN_ASSIGN_OR_RETURN(LossInputs in, lossInputs(c));
  if (in.reduction == "mean" && in.weights == kNoValue && !c.wants(1) &&
      c.builder().shape(in.scores)[1] > 0) {
    c.setOutput(0, fusedCrossEntropy(c, in));
    return Status::ok();
  }
  ValueId log_prob = logSoftmax(c, in.scores, 1);
  c.setOutput(0, negativeLogLikelihood(c, in, log_prob));
  c.setOutput(1, log_prob);
  return Status::ok();
}

} // namespace

KILN_REGISTER_ONNX_OP("NegativeLogLikelihoodLoss", convertNll);
KILN_REGISTER_ONNX_OP("SoftmaxCrossEntropyLoss", convertSoftmaxCrossEntropy);

} // namespace kiln::frontend::onnx_import

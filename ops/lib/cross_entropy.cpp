// CrossEntropyLoss (mean token loss over rows not labelled ignore_index) and
// its logits gradient CrossEntropyLossGrad; both compute in double.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/ignore_index.h"
#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Status checkLogitsAndLabels(const char *op, const TensorType &logits, const TensorType &labels) {
  if (logits.rank() != 2)
    return Error(std::string(op) + " logits must be 2-D [N, V], got " + typeToString(logits));
  if (logits.shape[1] < 1)
    return Error(std::string(op) + " logits " + typeToString(logits) +
                 " must have at least one class (V >= 1)");
  if (labels.rank() != 1 || labels.shape[0] != logits.shape[0])
    return Error(std::string(op) +
                 " labels must be 1-D [N] with N = " + std::to_string(logits.shape[0]) +
                 " (the logits rows), got " + typeToString(labels));
  return Status::ok();
}

// Counts the rows that take part; a label outside [0, V) that is not
// ignore_index is an error naming the node, the row and the label.
Expected<int64_t> countKeptRows(const char *op, const KernelContext &ctx, const Tensor &labels,
                                int64_t classes, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t r = 0; r < labels.numElements(); ++r) {
    const int64_t label = labels.getInt(r);
    if (isIgnored(label, ignore_index))
      continue;
    if (label < 0 || label >= classes)
      return Error(std::string(op) + " node '" + ctx.node_name + "': label " +
                   std::to_string(label) + " of row " + std::to_string(r) + " is outside [0, " +
                   std::to_string(classes) + ")" + notIgnoredClause(ignore_index));
    ++count;
  }
  return count;
}

// Row r of the logits in double and its max-shifted log-sum-exp.
double rowLogSumExp(const Tensor &logits, int64_t r, int64_t classes, std::vector<double> &row) {
  row.resize(static_cast<size_t>(classes));
  for (int64_t j = 0; j < classes; ++j)
    row[j] = logits.getFloat(r * classes + j);
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (double x : row)
    sum += std::exp(x - max);
  return max + std::log(sum);
}

// --- CrossEntropyLoss --------------------------------------------------------

Expected<std::vector<TensorType>> inferCrossEntropyLoss(const std::vector<TensorType> &in,
                                                        const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkLogitsAndLabels("CrossEntropyLoss", in[0], in[1]));
  return std::vector<TensorType>{{DType::F32, {}}};
}

Expected<std::vector<ValueId>> gradCrossEntropyLoss(GradContext &ctx) {
  OpBuilder &b = ctx.builder;
  const ValueId dloss = ctx.output_grads[0];
  if (dloss == kNoValue)
    return std::vector<ValueId>{kNoValue, kNoValue};
  ValueId dlogits = b.create("CrossEntropyLossGrad", "dlogits", {ctx.input(0), ctx.input(1), dloss},
                             {{"ignore_index", ctx.attrs().getInt("ignore_index")}});
  KILN_RETURN_IF_ERROR(b.status());
  return std::vector<ValueId>{dlogits, kNoValue};
}

Status crossEntropyLossKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                              std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &logits = *in[0], &labels = *in[1];
  const int64_t classes = logits.shape()[1];
  const int64_t ignore_index = attrs.getInt("ignore_index");
  KILN_ASSIGN_OR_RETURN(int64_t count,
                        countKeptRows("CrossEntropyLoss", ctx, labels, classes, ignore_index));
  double total = 0;
  std::vector<double> row;
  for (int64_t r = 0; r < labels.numElements(); ++r) {
    const int64_t label = labels.getInt(r);
    if (isIgnored(label, ignore_index))
      continue;
    total += rowLogSumExp(logits, r, classes, row) - row[label];
  }
  out[0].setFloat(0, count ? static_cast<float>(total / count) : 0.0f, ctx.overflow);
  return Status::ok();
}

// --- CrossEntropyLossGrad ----------------------------------------------------

Expected<std::vector<TensorType>> inferCrossEntropyLossGrad(const std::vector<TensorType> &in,
                                                            const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkLogitsAndLabels("CrossEntropyLossGrad", in[0], in[1]));
  if (in[2].rank() != 0)
    return Error("CrossEntropyLossGrad dloss must be a scalar (the loss gradient), got " +
                 typeToString(in[2]));
  return std::vector<TensorType>{in[0]};
}

Status crossEntropyLossGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                                  std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &logits = *in[0], &labels = *in[1];
  const int64_t classes = logits.shape()[1];
  const int64_t ignore_index = attrs.getInt("ignore_index");
  KILN_ASSIGN_OR_RETURN(int64_t count,
                        countKeptRows("CrossEntropyLossGrad", ctx, labels, classes, ignore_index));
  if (count == 0)
    return Status::ok(); // the output arrives zeroed: no row contributes
  const double scale = static_cast<double>(in[2]->getFloat(0)) / static_cast<double>(count);
  Tensor &dlogits = out[0];
  std::vector<double> row;
  for (int64_t r = 0; r < labels.numElements(); ++r) {
    const int64_t label = labels.getInt(r);
    if (isIgnored(label, ignore_index))
      continue; // zero, as the output arrives
    const double lse = rowLogSumExp(logits, r, classes, row);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(row[j] - lse) - (j == label ? 1.0 : 0.0);
      dlogits.setFloat(r * classes + j, static_cast<float>(p * scale), ctx.overflow);
    }
  }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("CrossEntropyLoss",
                 OpImpl{inferCrossEntropyLoss, gradCrossEntropyLoss, crossEntropyLossKernel});
KILN_REGISTER_OP("CrossEntropyLossGrad",
                 OpImpl{inferCrossEntropyLossGrad, {}, crossEntropyLossGradKernel});

} // namespace kiln::ops

// The vocab-parallel embedding index and cross entropy (ops/defs/vocab_parallel.xml):
// shape rules, reference kernels in double, and the cross entropy's gradient
// in one rank's logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/ignore_index.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Status checkRank(const TensorType &rank) {
  if (rank.rank() != 0)
    return Error("rank must be an i64 scalar (the tensor-parallel rank), got " +
                 typeToString(rank));
  return Status::ok();
}

// logits [N, V/t] and a per-row [N, 1] f32 statistic of them.
Status checkRowStat(const TensorType &logits, const TensorType &stat, const char *what) {
  if (logits.rank() != 2 || logits.shape[1] < 1)
    return Error("logits must be [N, V/t] with at least one class, got " + typeToString(logits));
  if (!(stat.shape == Shape{logits.shape[0], 1}))
    return Error(std::string(what) + " must be [N, 1] = " + shapeToString({logits.shape[0], 1}) +
                 ", got " + typeToString(stat));
  return Status::ok();
}

// The first row of this rank's shard: rank * rows, the rank checked
// against the group's size.
Expected<int64_t> shardStart(const KernelContext &ctx, const Tensor &rank, int64_t ranks,
                             int64_t rows) {
  const int64_t r = rank.getInt(0);
  if (r < 0 || r >= ranks)
    return Error("node '" + ctx.node_name + "': tensor-parallel rank " + std::to_string(r) +
                 " is outside [0, " + std::to_string(ranks) + ")");
  return r * rows;
}

// The columns of this rank's logits that are not vocabulary padding: all
// `shard` of them unless the op's `vocab` attribute (the unpadded size)
// ends inside or before the shard (rank * shard onwards).
int64_t realColumns(const AttrMap &attrs, int64_t rank, int64_t shard) {
  const int64_t vocab = attrs.getInt("vocab");
  if (vocab <= 0)
    return shard;
  return std::clamp<int64_t>(vocab - rank * shard, 0, shard);
}

// With `vocab`, the statistics need the rank (their optional input `at`).
Status checkPadding(const std::vector<TensorType> &in, const AttrMap &attrs, size_t at) {
  if (attrs.getInt("vocab") < 0)
    return Error("vocab must be at least 0, got " + std::to_string(attrs.getInt("vocab")));
  if (attrs.getInt("vocab") > 0 && in.size() <= at)
    return Error("vocab " + std::to_string(attrs.getInt("vocab")) +
                 " (a padded vocabulary) needs the tensor-parallel rank input");
  if (in.size() > at)
    return checkRank(in[at]);
  return Status::ok();
}

// --- ShardIndex --------------------------------------------------------------

Expected<std::vector<TensorType>> inferShardIndex(const std::vector<TensorType> &in,
                                                  const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkRank(in[1]));
  if (attrs.getInt("shard_size") < 1)
    return Error("shard_size must be at least 1, got " +
                 std::to_string(attrs.getInt("shard_size")));
  return std::vector<TensorType>{in[0]};
}

Status shardIndexKernel(const KernelContext &, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs) {
  const int64_t size = attrs.getInt("shard_size");
  const int64_t start = in[1]->getInt(0) * size;
  for (int64_t i = 0; i < in[0]->numElements(); ++i) {
    const int64_t local = in[0]->getInt(i) - start;
    out[0].setInt(i, local >= 0 && local < size ? local : -1);
  }
  return Status::ok();
}

// --- VocabParallelMax, VocabParallelSumExp -----------------------------------

Expected<std::vector<TensorType>> inferMax(const std::vector<TensorType> &in,
                                           const AttrMap &attrs) {
  if (in[0].rank() != 2 || in[0].shape[1] < 1)
    return Error("logits must be [N, V/t] with at least one class, got " + typeToString(in[0]));
  KILN_RETURN_IF_ERROR(checkPadding(in, attrs, 1));
  return std::vector<TensorType>{{DType::F32, {in[0].shape[0], 1}}};
}

// The rank of a statistic's optional input `at` (0 without it).
int64_t rankOf(const std::vector<const Tensor *> &in, size_t at) {
  return in.size() > at && in[at] ? in[at]->getInt(0) : 0;
}

Status maxKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &logits = *in[0];
  const int64_t n = logits.shape()[0], v = logits.shape()[1];
  const int64_t real = realColumns(attrs, rankOf(in, 1), v);
  for (int64_t r = 0; r < n; ++r) {
    float max = std::numeric_limits<float>::lowest();
    for (int64_t j = 0; j < real; ++j)
      max = std::max(max, logits.getFloat(r * v + j));
    out[0].setFloat(r, max, ctx.overflow);
  }
  return Status::ok();
}

Expected<std::vector<TensorType>> inferSumExp(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkRowStat(in[0], in[1], "max"));
  KILN_RETURN_IF_ERROR(checkPadding(in, attrs, 2));
  return std::vector<TensorType>{{DType::F32, {in[0].shape[0], 1}}};
}

Status sumExpKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &logits = *in[0];
  const int64_t n = logits.shape()[0], v = logits.shape()[1];
  const int64_t real = realColumns(attrs, rankOf(in, 2), v);
  for (int64_t r = 0; r < n; ++r) {
    const double max = in[1]->getFloat(r);
    double sum = 0;
    for (int64_t j = 0; j < real; ++j)
      sum += std::exp(static_cast<double>(logits.getFloat(r * v + j)) - max);
    out[0].setFloat(r, static_cast<float>(sum), ctx.overflow);
  }
  return Status::ok();
}

// --- VocabParallelCrossEntropy and its gradient ------------------------------

// logits, labels, rank, max, sum_exp (and the gradient's dloss).
Status checkLossInputs(const std::vector<TensorType> &in, const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkRowStat(in[0], in[3], "max"));
  KILN_RETURN_IF_ERROR(checkRowStat(in[0], in[4], "sum_exp"));
  KILN_RETURN_IF_ERROR(checkRank(in[2]));
  if (in[1].rank() != 1 || in[1].shape[0] != in[0].shape[0])
    return Error("labels must be [N] with N = " + std::to_string(in[0].shape[0]) +
                 " (the logits rows), got " + typeToString(in[1]));
  if (attrs.getInt("ranks") < 1)
    return Error("ranks must be at least 1, got " + std::to_string(attrs.getInt("ranks")));
  const int64_t vocab = attrs.getInt("vocab"), whole = attrs.getInt("ranks") * in[0].shape[1];
  if (vocab < 0 || vocab > whole)
    return Error("vocab " + std::to_string(vocab) + " must be in [0, " + std::to_string(whole) +
                 "] (the ranks' columns, padding included)");
  return Status::ok();
}

// Per row: whether it takes part (its label is not ignore_index) and the
// column of its label in this rank's shard (-1 when another rank holds it).
struct Rows {
  int64_t kept = 0;
  std::vector<int64_t> column; // -2: ignored
};

Expected<Rows> labelColumns(const char *op, const KernelContext &ctx,
                            const std::vector<const Tensor *> &in, const AttrMap &attrs) {
  const Tensor &labels = *in[1];
  const int64_t shard = in[0]->shape()[1], ranks = attrs.getInt("ranks");
  const int64_t ignore = attrs.getInt("ignore_index");
  KILN_ASSIGN_OR_RETURN(int64_t start, shardStart(ctx, *in[2], ranks, shard));
  const int64_t vocab = attrs.getInt("vocab") > 0 ? attrs.getInt("vocab") : ranks * shard;
  Rows rows;
  for (int64_t r = 0; r < labels.numElements(); ++r) {
    const int64_t label = labels.getInt(r);
    if (isIgnored(label, ignore)) {
      rows.column.push_back(-2);
      continue;
    }
    if (label < 0 || label >= vocab)
      return Error(std::string(op) + " node '" + ctx.node_name + "': label " +
                   std::to_string(label) + " of row " + std::to_string(r) + " is outside [0, " +
                   std::to_string(vocab) + ")" + notIgnoredClause(ignore));
    ++rows.kept;
    const int64_t local = label - start;
    rows.column.push_back(local >= 0 && local < shard ? local : -1);
  }
  return rows;
}

Expected<std::vector<TensorType>> inferLoss(const std::vector<TensorType> &in,
                                            const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkLossInputs(in, attrs));
  return std::vector<TensorType>{{DType::F32, {}}};
}

Expected<std::vector<ValueId>> gradLoss(GradContext &ctx) {
  const ValueId dloss = ctx.output_grads[0];
  std::vector<ValueId> grads(5, kNoValue);
  if (dloss == kNoValue)
    return grads;
  std::vector<ValueId> args(ctx.node.inputs);
  args.push_back(dloss);
  grads[0] = ctx.builder.create("VocabParallelCrossEntropyGrad", "dlogits", args, ctx.attrs());
  KILN_RETURN_IF_ERROR(ctx.builder.status());
  return grads;
}

Status lossKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &attrs) {
  KILN_ASSIGN_OR_RETURN(Rows rows, labelColumns("VocabParallelCrossEntropy", ctx, in, attrs));
  const Tensor &logits = *in[0];
  const int64_t v = logits.shape()[1];
  double total = 0;
  for (size_t r = 0; r < rows.column.size(); ++r) {
    const int64_t c = rows.column[r];
    if (c < 0)
      continue;
    const auto i = static_cast<int64_t>(r);
    total += in[3]->getFloat(i) + std::log(static_cast<double>(in[4]->getFloat(i))) -
             logits.getFloat(i * v + c);
  }
  out[0].setFloat(0, rows.kept ? static_cast<float>(total / static_cast<double>(rows.kept)) : 0.0f,
                  ctx.overflow);
  return Status::ok();
}

Expected<std::vector<TensorType>> inferLossGrad(const std::vector<TensorType> &in,
                                                const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(checkLossInputs(in, attrs));
  if (in[5].rank() != 0)
    return Error("dloss must be a scalar (the loss gradient), got " + typeToString(in[5]));
  return std::vector<TensorType>{in[0]};
}

Status lossGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                      std::vector<Tensor> &out, const AttrMap &attrs) {
  KILN_ASSIGN_OR_RETURN(Rows rows, labelColumns("VocabParallelCrossEntropyGrad", ctx, in, attrs));
  if (rows.kept == 0)
    return Status::ok(); // the output arrives zeroed: no row contributes
  const Tensor &logits = *in[0];
  const int64_t v = logits.shape()[1];
  const int64_t real = realColumns(attrs, in[2]->getInt(0), v); // padding stays zero
  const double scale = static_cast<double>(in[5]->getFloat(0)) / static_cast<double>(rows.kept);
  for (size_t r = 0; r < rows.column.size(); ++r) {
    if (rows.column[r] == -2)
      continue; // ignored: zero, as the output arrives
    const auto i = static_cast<int64_t>(r);
    const double max = in[3]->getFloat(i), sum = in[4]->getFloat(i);
    for (int64_t j = 0; j < real; ++j) {
      const double p = std::exp(static_cast<double>(logits.getFloat(i * v + j)) - max) / sum -
                       (j == rows.column[r] ? 1.0 : 0.0);
      out[0].setFloat(i * v + j, static_cast<float>(p * scale), ctx.overflow);
    }
  }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("ShardIndex", OpImpl{inferShardIndex, {}, shardIndexKernel});
KILN_REGISTER_OP("VocabParallelMax", OpImpl{inferMax, {}, maxKernel});
KILN_REGISTER_OP("VocabParallelSumExp", OpImpl{inferSumExp, {}, sumExpKernel});
KILN_REGISTER_OP("VocabParallelCrossEntropy", OpImpl{inferLoss, gradLoss, lossKernel});
KILN_REGISTER_OP("VocabParallelCrossEntropyGrad", OpImpl{inferLossGrad, {}, lossGradKernel});

} // namespace kiln::ops

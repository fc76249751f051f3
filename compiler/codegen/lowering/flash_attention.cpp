// Lowerings of FlashAttentionScore and FlashAttentionScoreGrad
// (ops/lib/flash_attention.cpp). Their loop forms (every score a reduction,
// every probability a reduction over those) would compute the S x S scores
// again for each element; the kernels run as tiled host routines instead
// (kernels/library_kernels.h), and the bodies below say what they compute.
#include <bit>
#include <cmath>
#include <limits>

#include "compiler/codegen/op_lowering.h"
#include "kernels/library_kernels.h"
#include "ops/attention_layout.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// The op's sizes, from q [B, N, S, D] and k [B, Nkv, S, D] (or both in BSND).
struct Sizes {
  int64_t B, N, Nkv, S, D;
  ops::AttentionLayout layout;
};

Expected<Sizes> sizesOf(const LowerContext &ctx) {
  const ops::AttentionLayout layout = ops::attentionLayoutOf(ctx.attrs());
  const ops::AttentionShape q = ops::attentionShapeOf(ctx.inputType(0).shape, layout);
  const ops::AttentionShape k = ops::attentionShapeOf(ctx.inputType(1).shape, layout);
  if (ctx.inputType(0).shape.size() != 4 || ctx.inputType(1).shape.size() != 4 || k.heads < 1 ||
      q.heads % k.heads != 0)
    return ctx.error("needs q [B, N, S, D] and k, v [B, Nkv, S, D] (or both in BSND)");
  return Sizes{q.B, q.heads, k.heads, q.S, q.D, layout};
}

// What the routines share after their buffers: the dtype, the sizes, the
// scale's bits, whether the attention is causal, the layout and the
// kernel's rows: (b, n) of BNSD (batches b where the backward's key/value
// heads are shared), (b, s) of BSND, which the routine spreads its heads
// over (kernels/library_kernels.h).
std::vector<int64_t> sharedArgs(const LowerContext &ctx, const Sizes &s, int64_t rows) {
  return {static_cast<int64_t>(ctx.inputType(0).dtype),
          s.B,
          s.N,
          s.Nkv,
          s.S,
          s.D,
          std::bit_cast<int64_t>(ctx.attrs().getFloat("scale")),
          ctx.attrs().getBool("causal") ? 1 : 0,
          static_cast<int64_t>(s.layout),
          rows};
}

// The routine's rows are its first output's first `rank` axes.
int64_t rowsOf(const LowerContext &ctx, int rank) {
  const Shape &q = ctx.inputType(0).shape;
  return rank == 2 ? q[0] * q[1] : q[0];
}

// The loop form: score(b, n, i, j) = scale * sum_d q[b,n,i,d] k[b,n/g,j,d],
// -inf where j is past i in a causal attention.
class Forms {
public:
  Forms(LowerContext &ctx, const Sizes &s) : ctx_(ctx), s_(s) {}

  ExprRef kvHead(ExprRef n) const { return binary(BinaryOp::Div, n, iconst(s_.N / s_.Nkv)); }

  // Input `i` at (b, n, s, d) in the op's layout.
  ExprRef at(size_t i, ExprRef b, ExprRef n, ExprRef s, ExprRef d) const {
    if (s_.layout == ops::AttentionLayout::BSND)
      return ctx_.input(i, {std::move(b), std::move(s), std::move(n), std::move(d)});
    return ctx_.input(i, {std::move(b), std::move(n), std::move(s), std::move(d)});
  }

  // An output's (b, n, s, d) from its own axes.
  struct Index {
    ExprRef b, n, s, d;
  };
  Index index(const std::vector<ExprRef> &idx) const {
    if (s_.layout == ops::AttentionLayout::BSND)
      return {idx[0], idx[2], idx[1], idx[3]};
    return {idx[0], idx[1], idx[2], idx[3]};
  }

  ExprRef score(ExprRef b, ExprRef n, ExprRef i, ExprRef j) {
    const int d = ctx_.newReduceVar();
    ExprRef dot =
        reduce(ReduceOp::Sum, d, s_.D, at(0, b, n, i, rvar(d)) * at(1, b, kvHead(n), j, rvar(d)));
    ExprRef scaled = dot * fconst(ctx_.attrs().getFloat("scale"));
    if (!ctx_.attrs().getBool("causal"))
      return scaled;
    return select(binary(BinaryOp::Le, j, i), scaled,
                  fconst(-std::numeric_limits<double>::infinity()));
  }

  // exp(score - max) / sum with the row statistics `max` and `sum` read at (b, n, i).
  ExprRef probability(ExprRef b, ExprRef n, ExprRef i, ExprRef j, ExprRef max, ExprRef sum) {
    return unary(UnaryOp::Exp, score(b, n, i, j) - max) / sum;
  }

private:
  LowerContext &ctx_;
  Sizes s_;
};

Bodies lowerFlashAttention(LowerContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Sizes s, sizesOf(ctx));
  Forms f(ctx, s);
  const std::vector<ExprRef> row = LowerContext::vars(3);
  const Forms::Index o = f.index(LowerContext::vars(4));
  int j = ctx.newReduceVar();
  const int max =
      ctx.addStage("max", {s.B, s.N, s.S}, ScalarType::F32,
                   reduce(ReduceOp::Max, j, s.S, f.score(row[0], row[1], row[2], rvar(j))));
  j = ctx.newReduceVar();
  ExprRef shifted = f.score(row[0], row[1], row[2], rvar(j)) - ctx.read(max, row);
  const int sum = ctx.addStage("sum", {s.B, s.N, s.S}, ScalarType::F32,
                               reduce(ReduceOp::Sum, j, s.S, unary(UnaryOp::Exp, shifted)));
  j = ctx.newReduceVar();
  const std::vector<ExprRef> at_row = {o.b, o.n, o.s};
  ExprRef out =
      reduce(ReduceOp::Sum, j, s.S,
             f.probability(o.b, o.n, o.s, rvar(j), ctx.read(max, at_row), ctx.read(sum, at_row)) *
                 f.at(2, o.b, f.kvHead(o.n), rvar(j), o.d));
  // Output slots go at 3, 4 and 5; rows are (b, n) or (b, s).
  std::vector<int64_t> args = {ctx.inputBuffer(0), ctx.inputBuffer(1), ctx.inputBuffer(2), 0, 0, 0};
  for (int64_t a : sharedArgs(ctx, s, rowsOf(ctx, 2)))
    args.push_back(a);
  ctx.callLibrary(kernels::kFlashAttentionRoutine, std::move(args), {{3, 0}, {4, 1}, {5, 2}}, 2);
  return std::vector<ExprRef>{out, ctx.read(max, row), ctx.read(sum, row)};
}

// dq = scale * sum_j p (dp - delta) k, dk and dv likewise over the group's
// query rows, p from the saved statistics (inputs 5 and 6).
Bodies lowerFlashAttentionGrad(LowerContext &ctx) {
  KILN_ASSIGN_OR_RETURN(Sizes s, sizesOf(ctx));
  Forms f(ctx, s);
  const Forms::Index o = f.index(LowerContext::vars(4));
  const ExprRef scale = fconst(ctx.attrs().getFloat("scale"));
  // p(b, n, i, j) and ds(b, n, i, j) = p (dout_i . v_j - dout_i . out_i).
  auto p = [&](ExprRef b, ExprRef n, ExprRef i, ExprRef jj) {
    return f.probability(b, n, i, jj, ctx.input(5, {b, n, i}), ctx.input(6, {b, n, i}));
  };
  auto ds = [&](ExprRef b, ExprRef n, ExprRef i, ExprRef jj) {
    const int e = ctx.newReduceVar(), e2 = ctx.newReduceVar();
    ExprRef dp = reduce(ReduceOp::Sum, e, s.D,
                        f.at(4, b, n, i, rvar(e)) * f.at(2, b, f.kvHead(n), jj, rvar(e)));
    ExprRef delta =
        reduce(ReduceOp::Sum, e2, s.D, f.at(4, b, n, i, rvar(e2)) * f.at(3, b, n, i, rvar(e2)));
    return p(b, n, i, jj) * (dp - delta);
  };
  int j = ctx.newReduceVar();
  ExprRef dq =
      scale * reduce(ReduceOp::Sum, j, s.S,
                     ds(o.b, o.n, o.s, rvar(j)) * f.at(1, o.b, f.kvHead(o.n), rvar(j), o.d));
  // dk and dv at (b, kv, t, d): query head n = kv * g + h, query row i.
  const int64_t g = s.N / s.Nkv;
  auto overGroup = [&](auto term) {
    const int h = ctx.newReduceVar(), i = ctx.newReduceVar();
    ExprRef n = o.n * iconst(g) + rvar(h);
    return reduce(ReduceOp::Sum, h, g, reduce(ReduceOp::Sum, i, s.S, term(n, rvar(i))));
  };
  ExprRef dk = scale * overGroup([&](ExprRef n, ExprRef i) {
                 return ds(o.b, n, i, o.s) * f.at(0, o.b, n, i, o.d);
               });
  ExprRef dv =
      overGroup([&](ExprRef n, ExprRef i) { return p(o.b, n, i, o.s) * f.at(4, o.b, n, i, o.d); });
  // Output slots go at 7, 8 and 9; rows are (b, n) of BNSD when every query
  // head has its own key/value head, else batches (dq's heads are not dk's);
  // (b, s) of BSND.
  std::vector<int64_t> args;
  for (size_t i = 0; i < 7; ++i)
    args.push_back(ctx.inputBuffer(i));
  args.insert(args.end(), {0, 0, 0});
  const int rank = s.layout == ops::AttentionLayout::BSND || s.N == s.Nkv ? 2 : 1;
  for (int64_t a : sharedArgs(ctx, s, rowsOf(ctx, rank)))
    args.push_back(a);
  ctx.callLibrary(kernels::kFlashAttentionGradRoutine, std::move(args), {{7, 0}, {8, 1}, {9, 2}},
                  rank);
  return std::vector<ExprRef>{dq, dk, dv};
}

} // namespace

KILN_REGISTER_LOWERING("FlashAttentionScore", lowerFlashAttention);
KILN_REGISTER_LOWERING("FlashAttentionScoreGrad", lowerFlashAttentionGrad);

} // namespace kiln::codegen

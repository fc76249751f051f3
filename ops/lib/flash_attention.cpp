// FlashAttentionScore and its gradient: attention as one op with CANN's
// numerics (ops/defs/nn.xml). The reference kernels compute each query row
// in double from the stored (rounded) inputs, round the probabilities to the
// compute dtype where the NPU's cube would read them, and round every stored
// result once; the host kernel (compiler/codegen/flash_attention_kernel.h)
// computes the same in f32 tiles.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/float16.h"
#include "ops/attention_layout.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// q [B, N, S, D] against k and v [B, Nkv, S, D], or the same in BSND.
struct Dims {
  int64_t B = 0, N = 0, Nkv = 0, S = 0, D = 0;
  AttentionLayout layout = AttentionLayout::BNSD;
  int64_t group() const { return N / Nkv; }
};

Expected<Dims> dimsOf(const TensorType &q, const TensorType &k, const TensorType &v,
                      const AttrMap &attrs) {
  const AttentionLayout layout = attentionLayoutOf(attrs);
  const char *dims = layout == AttentionLayout::BSND ? "[B, S, N, D]" : "[B, N, S, D]";
  if (attrs.has("input_layout") && !parseAttentionLayout(attrs.getString("input_layout")))
    return Error("FlashAttentionScore: input_layout '" + attrs.getString("input_layout") +
                 "': expected BNSD or BSND");
  if (q.rank() != 4 || k.rank() != 4 || !(k == v))
    return Error("FlashAttentionScore: q " + typeToString(q) + ", k " + typeToString(k) +
                 " and v " + typeToString(v) + ": expected q " + dims +
                 " and k, v of one type with Nkv heads for N");
  if (q.dtype != k.dtype)
    return Error("FlashAttentionScore: q is " + std::string(dtypeName(q.dtype)) + ", k and v " +
                 std::string(dtypeName(k.dtype)) + ": expected one dtype");
  const AttentionShape qs = attentionShapeOf(q.shape, layout),
                       ks = attentionShapeOf(k.shape, layout);
  Dims d{qs.B, qs.heads, ks.heads, qs.S, qs.D, layout};
  if (ks.B != d.B || ks.S != d.S || ks.D != d.D || d.Nkv < 1 || d.N % d.Nkv != 0)
    return Error("FlashAttentionScore: q " + typeToString(q) + " and k " + typeToString(k) +
                 ": expected equal batch, sequence and head size, and query heads a multiple "
                 "of the key/value heads");
  return d;
}

Status checkScale(const AttrMap &attrs) {
  const double scale = attrs.getFloat("scale");
  if (!std::isfinite(scale) || scale <= 0)
    return Error("FlashAttentionScore: scale " + std::to_string(scale) +
                 ": expected a finite number above 0");
  return Status::ok();
}

Expected<std::vector<TensorType>> inferFlashAttention(const std::vector<TensorType> &in,
                                                      const AttrMap &attrs) {
  KILN_ASSIGN_OR_RETURN(Dims d, dimsOf(in[0], in[1], in[2], attrs));
  KILN_RETURN_IF_ERROR(checkScale(attrs));
  const TensorType stats{DType::F32, {d.B, d.N, d.S}};
  return std::vector<TensorType>{in[0], stats, stats};
}

Expected<std::vector<ValueId>> gradFlashAttention(GradContext &ctx) {
  const ValueId dout = ctx.output_grads[0];
  if (dout == kNoValue)
    return std::vector<ValueId>{kNoValue, kNoValue, kNoValue};
  // The statistics feed nothing but this gradient: theirs is not needed.
  return ctx.builder.createMulti(
      "FlashAttentionScoreGrad", "grad",
      {ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0), dout, ctx.output(1), ctx.output(2)},
      {{"scale", ctx.attrs().getFloat("scale")},
       {"causal", ctx.attrs().getBool("causal")},
       {"input_layout", std::string(attentionLayoutName(attentionLayoutOf(ctx.attrs())))}});
}

// Element (b, n, s, d) of a tensor of `heads` heads in the attention's layout.
int64_t at(const Dims &x, int64_t heads, int64_t b, int64_t n, int64_t s, int64_t d) {
  return attentionOffset({x.B, heads, x.S, x.D}, x.layout, b, n, s, d);
}

// The scores of query row i of head n against every key it sees, in double.
std::vector<double> scoresOf(const Dims &x, const Tensor &q, const Tensor &k, int64_t b, int64_t n,
                             int64_t i, double scale, bool causal) {
  const int64_t kv = n / x.group(), last = causal ? i + 1 : x.S;
  std::vector<double> s(static_cast<size_t>(last));
  for (int64_t j = 0; j < last; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < x.D; ++d)
      dot += static_cast<double>(q.getFloat(at(x, x.N, b, n, i, d))) *
             k.getFloat(at(x, x.Nkv, b, kv, j, d));
    s[j] = static_cast<double>(static_cast<float>(dot * scale)); // the f32 score
  }
  return s;
}

Status flashAttentionKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                            std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  KILN_ASSIGN_OR_RETURN(Dims x, dimsOf(q.type(), k.type(), v.type(), attrs));
  const double scale = attrs.getFloat("scale");
  const bool causal = attrs.getBool("causal");
  const DType dt = q.dtype();
  Tensor &o = out[0], &row_max = out[1], &row_sum = out[2];
  std::vector<double> acc(static_cast<size_t>(x.D));
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t n = 0; n < x.N; ++n)
      for (int64_t i = 0; i < x.S; ++i) {
        const std::vector<double> s = scoresOf(x, q, k, b, n, i, scale, causal);
        const double m = *std::max_element(s.begin(), s.end());
        double l = 0;
        for (double e : s)
          l += std::exp(e - m);
        l = static_cast<float>(l);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (size_t j = 0; j < s.size(); ++j) {
          // P in the compute dtype, as the cube reads it for P v.
          const double p =
              roundToDType(static_cast<float>(std::exp(s[j] - m) / l), dt, OverflowMode::InfNan);
          for (int64_t d = 0; d < x.D; ++d)
            acc[d] += p * v.getFloat(at(x, x.Nkv, b, n / x.group(), j, d));
        }
        for (int64_t d = 0; d < x.D; ++d)
          o.setFloat(at(x, x.N, b, n, i, d), static_cast<float>(acc[d]), ctx.overflow);
        const int64_t r = (b * x.N + n) * x.S + i;
        row_max.setFloat(r, static_cast<float>(m), ctx.overflow);
        row_sum.setFloat(r, static_cast<float>(l), ctx.overflow);
      }
  return Status::ok();
}

Expected<std::vector<TensorType>> inferFlashAttentionGrad(const std::vector<TensorType> &in,
                                                          const AttrMap &attrs) {
  KILN_ASSIGN_OR_RETURN(Dims d, dimsOf(in[0], in[1], in[2], attrs));
  KILN_RETURN_IF_ERROR(checkScale(attrs));
  const TensorType stats{DType::F32, {d.B, d.N, d.S}};
  if (!(in[3] == in[0]) || !(in[4] == in[0]) || !(in[5] == stats) || !(in[6] == stats))
    return Error("FlashAttentionScoreGrad: out " + typeToString(in[3]) + ", dout " +
                 typeToString(in[4]) + ", softmax_max " + typeToString(in[5]) +
                 " and softmax_sum " + typeToString(in[6]) + ": expected out and dout like q " +
                 typeToString(in[0]) + " and the statistics " + typeToString(stats));
  return std::vector<TensorType>{in[0], in[1], in[2]};
}

Status flashAttentionGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                                std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &o = *in[3], &dout = *in[4];
  const Tensor &row_max = *in[5], &row_sum = *in[6];
  KILN_ASSIGN_OR_RETURN(Dims x, dimsOf(q.type(), k.type(), v.type(), attrs));
  const double scale = attrs.getFloat("scale");
  const bool causal = attrs.getBool("causal");
  const DType dt = q.dtype();
  std::vector<double> dq(q.numElements(), 0.0), dk(k.numElements(), 0.0), dv(v.numElements(), 0.0);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t n = 0; n < x.N; ++n) {
      const int64_t kv = n / x.group();
      for (int64_t i = 0; i < x.S; ++i) {
        const std::vector<double> s = scoresOf(x, q, k, b, n, i, scale, causal);
        const int64_t r = (b * x.N + n) * x.S + i;
        const double m = row_max.getFloat(r), l = row_sum.getFloat(r);
        double delta = 0;
        for (int64_t d = 0; d < x.D; ++d)
          delta += static_cast<double>(dout.getFloat(at(x, x.N, b, n, i, d))) *
                   o.getFloat(at(x, x.N, b, n, i, d));
        for (size_t j = 0; j < s.size(); ++j) {
          const double p = std::exp(s[j] - m) / l;
          const double p_low = roundToDType(static_cast<float>(p), dt, OverflowMode::InfNan);
          double dp = 0;
          for (int64_t d = 0; d < x.D; ++d)
            dp += static_cast<double>(dout.getFloat(at(x, x.N, b, n, i, d))) *
                  v.getFloat(at(x, x.Nkv, b, kv, j, d));
          // dS as the cube reads it for dq and dk: in the compute dtype.
          const double ds =
              roundToDType(static_cast<float>(p * (dp - delta) * scale), dt, OverflowMode::InfNan);
          for (int64_t d = 0; d < x.D; ++d) {
            const int64_t qi = at(x, x.N, b, n, i, d), kj = at(x, x.Nkv, b, kv, j, d);
            dq[qi] += ds * k.getFloat(kj);
            dk[kj] += ds * q.getFloat(qi);
            dv[kj] += p_low * dout.getFloat(qi);
          }
        }
      }
    }
  for (auto [t, values] : {std::pair<Tensor *, const std::vector<double> *>{&out[0], &dq},
                           {&out[1], &dk},
                           {&out[2], &dv}})
    for (int64_t e = 0; e < t->numElements(); ++e)
      t->setFloat(e, static_cast<float>((*values)[e]), ctx.overflow);
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("FlashAttentionScore",
                 OpImpl{inferFlashAttention, gradFlashAttention, flashAttentionKernel});
KILN_REGISTER_OP("FlashAttentionScoreGrad",
                 OpImpl{inferFlashAttentionGrad, nullptr, flashAttentionGradKernel});

} // namespace kiln::ops

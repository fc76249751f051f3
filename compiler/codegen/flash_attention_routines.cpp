// FlashAttentionScore's host routines: blocks of query rows against blocks of
// keys, the inputs widened to f32 once per block so the inner loops run over
// contiguous f32 rows in cache. The forward computes each query block's row
// max and sum first, then the probabilities rounded to the compute dtype
// times v, as the reference kernel (ops/lib/flash_attention.cpp) orders it;
// the backward recomputes the probabilities from the saved statistics.
#include "compiler/codegen/flash_attention_routines.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <cblas.h>

#include "compiler/codegen/library_kernel_util.h"
#include "ir/float_status.h"

namespace kiln::codegen {
namespace {

constexpr int64_t kBlock = 128; // query rows and keys per block

struct Attention {
  DType dtype;
  int64_t B, N, Nkv, S, D;
  float scale;
  bool causal;
  OverflowMode overflow;
  int64_t group() const { return N / Nkv; }
  // Element (s, 0) of head n of batch b of a [B, heads, S, D] tensor.
  int64_t row(int64_t heads, int64_t b, int64_t n, int64_t s) const {
    return ((b * heads + n) * S + s) * D;
  }
  // The last key query row i sees, plus one.
  int64_t keysFor(int64_t i) const { return causal ? i + 1 : S; }
};

Attention attentionOf(const int64_t *args, int first) {
  return Attention{static_cast<DType>(args[first]),
                   args[first + 1],
                   args[first + 2],
                   args[first + 3],
                   args[first + 4],
                   args[first + 5],
                   static_cast<float>(std::bit_cast<double>(args[first + 6])),
                   args[first + 7] != 0,
                   static_cast<OverflowMode>(args[first + 8])};
}

// Rows [s0, s0 + count) of head n of a [B, heads, S, D] tensor, as f32.
void loadRows(const void *data, const Attention &a, int64_t heads, int64_t b, int64_t n, int64_t s0,
              int64_t count, std::vector<float> &out) {
  out.resize(static_cast<size_t>(count * a.D));
  const int64_t base = a.row(heads, b, n, s0);
  for (int64_t e = 0; e < count * a.D; ++e)
    out[e] = loadFloat(data, a.dtype, base + e);
}

// c [m, n] = alpha * op(x) op(y) + beta * c, row-major f32 blocks.
void gemm(bool trans_x, bool trans_y, int64_t m, int64_t n, int64_t k, float alpha, const float *x,
          int64_t ldx, const float *y, int64_t ldy, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_x ? CblasTrans : CblasNoTrans,
              trans_y ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, x, static_cast<int>(ldx), y, static_cast<int>(ldy), beta,
              c, static_cast<int>(ldc));
}

// scores [rows, cols] = scale * q k^T of a query block at i0 against a key
// block at j0, the keys a row does not see -inf.
void blockScores(const Attention &a, const std::vector<float> &q, const std::vector<float> &k,
                 int64_t i0, int64_t rows, int64_t j0, int64_t cols, std::vector<float> &scores) {
  scores.resize(static_cast<size_t>(rows * cols));
  gemm(false, true, rows, cols, a.D, a.scale, q.data(), a.D, k.data(), a.D, 0.0f, scores.data(),
       cols);
  if (!a.causal || j0 + cols <= i0 + 1)
    return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c)
      scores[r * cols + c] = -std::numeric_limits<float>::infinity();
}

// One (b, n): each query block's row max and sum over its key blocks, then
// the probabilities rounded to the compute dtype times v.
void forwardHead(void **buffers, const int64_t *args, const Attention &a, int64_t b, int64_t n) {
  const void *q = buffers[args[0]], *k = buffers[args[1]], *v = buffers[args[2]];
  void *out = buffers[args[3]];
  // The statistics are stored only where the backward reads them.
  float *row_max = args[4] < 0 ? nullptr : static_cast<float *>(buffers[args[4]]);
  float *row_sum = args[5] < 0 ? nullptr : static_cast<float *>(buffers[args[5]]);
  const int64_t kv = n / a.group(), D = a.D;
  std::vector<float> qb, kb, vb, scores, acc;
  for (int64_t i0 = 0; i0 < a.S; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, a.S - i0), key_end = a.keysFor(i0 + rows - 1);
    loadRows(q, a, a.N, b, n, i0, rows, qb);
    std::vector<float> m(rows, -std::numeric_limits<float>::infinity()), l(rows, 0.0f);
    for (int64_t j0 = 0; j0 < key_end; j0 += kBlock) {
      const int64_t cols = std::min(kBlock, key_end - j0);
      loadRows(k, a, a.Nkv, b, kv, j0, cols, kb);
      blockScores(a, qb, kb, i0, rows, j0, cols, scores);
      for (int64_t r = 0; r < rows; ++r) {
        const float *s = &scores[r * cols];
        const float mb = std::max(m[r], *std::max_element(s, s + cols));
        float sum = 0;
        for (int64_t c = 0; c < cols; ++c)
          sum += std::exp(s[c] - mb);
        l[r] = l[r] * std::exp(m[r] - mb) + sum;
        m[r] = mb;
      }
    }
    acc.assign(static_cast<size_t>(rows * D), 0.0f);
    for (int64_t j0 = 0; j0 < key_end; j0 += kBlock) {
      const int64_t cols = std::min(kBlock, key_end - j0);
      loadRows(k, a, a.Nkv, b, kv, j0, cols, kb);
      loadRows(v, a, a.Nkv, b, kv, j0, cols, vb);
      blockScores(a, qb, kb, i0, rows, j0, cols, scores);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          scores[r * cols + c] = roundToDType(std::exp(scores[r * cols + c] - m[r]) / l[r], a.dtype,
                                              OverflowMode::InfNan);
      gemm(false, false, rows, D, cols, 1.0f, scores.data(), cols, vb.data(), D, 1.0f, acc.data(),
           D);
    }
    const int64_t base = a.row(a.N, b, n, i0);
    for (int64_t e = 0; e < rows * D; ++e)
      storeFloat(out, a.dtype, base + e, acc[e], a.overflow);
    const int64_t stat = (b * a.N + n) * a.S + i0;
    if (row_max)
      std::copy(m.begin(), m.end(), row_max + stat);
    if (row_sum)
      std::copy(l.begin(), l.end(), row_sum + stat);
  }
}

// The backward's inputs and outputs.
struct GradInputs {
  const void *q, *k, *v, *out, *dout;
  const float *row_max, *row_sum;
  void *dq, *dk, *dv;
};

GradInputs gradInputsOf(void **buffers, const int64_t *args) {
  return GradInputs{buffers[args[0]],
                    buffers[args[1]],
                    buffers[args[2]],
                    buffers[args[3]],
                    buffers[args[4]],
                    static_cast<const float *>(buffers[args[5]]),
                    static_cast<const float *>(buffers[args[6]]),
                    buffers[args[7]],
                    buffers[args[8]],
                    buffers[args[9]]};
}

// A query block of head n with what the backward needs of it: q, dout and
// delta = rowsum(dout * out), and the saved statistics.
struct QueryBlock {
  int64_t i0 = 0, rows = 0, stat = 0;
  std::vector<float> q, dout, delta;
};

void loadQueryBlock(const GradInputs &in, const Attention &a, int64_t b, int64_t n, int64_t i0,
                    int64_t rows, QueryBlock &qb) {
  qb.i0 = i0;
  qb.rows = rows;
  qb.stat = (b * a.N + n) * a.S + i0;
  std::vector<float> out;
  loadRows(in.q, a, a.N, b, n, i0, rows, qb.q);
  loadRows(in.dout, a, a.N, b, n, i0, rows, qb.dout);
  loadRows(in.out, a, a.N, b, n, i0, rows, out);
  qb.delta.assign(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t e = 0; e < a.D; ++e)
      qb.delta[r] += qb.dout[r * a.D + e] * out[r * a.D + e];
}

// For a query block against a key block (k and v as f32): p = the
// probabilities and ds = scale * p * (dout v^T - delta), both [rows, cols].
void probabilitiesAndScoreGrads(const Attention &a, const GradInputs &in, const QueryBlock &qb,
                                const std::vector<float> &k, const std::vector<float> &v,
                                int64_t j0, int64_t cols, std::vector<float> &p,
                                std::vector<float> &ds) {
  blockScores(a, qb.q, k, qb.i0, qb.rows, j0, cols, p);
  for (int64_t r = 0; r < qb.rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      p[r * cols + c] =
          std::exp(p[r * cols + c] - in.row_max[qb.stat + r]) / in.row_sum[qb.stat + r];
  ds.resize(p.size());
  gemm(false, true, qb.rows, cols, a.D, 1.0f, qb.dout.data(), a.D, v.data(), a.D, 0.0f, ds.data(),
       cols);
  for (int64_t r = 0; r < qb.rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ds[r * cols + c] = p[r * cols + c] * (ds[r * cols + c] - qb.delta[r]) * a.scale;
}

// Rows [t0, t1) of dq of head n: each query block against the keys it sees.
void dqRows(const GradInputs &in, const Attention &a, int64_t b, int64_t n, int64_t t0,
            int64_t t1) {
  const int64_t kv = n / a.group(), D = a.D;
  QueryBlock qb;
  std::vector<float> kb, vb, p, ds, dq;
  for (int64_t i0 = t0; i0 < t1; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, t1 - i0), key_end = a.keysFor(i0 + rows - 1);
    loadQueryBlock(in, a, b, n, i0, rows, qb);
    dq.assign(static_cast<size_t>(rows * D), 0.0f);
    for (int64_t j0 = 0; j0 < key_end; j0 += kBlock) {
      const int64_t cols = std::min(kBlock, key_end - j0);
      loadRows(in.k, a, a.Nkv, b, kv, j0, cols, kb);
      loadRows(in.v, a, a.Nkv, b, kv, j0, cols, vb);
      probabilitiesAndScoreGrads(a, in, qb, kb, vb, j0, cols, p, ds);
      gemm(false, false, rows, D, cols, 1.0f, ds.data(), cols, kb.data(), D, 1.0f, dq.data(), D);
    }
    const int64_t base = a.row(a.N, b, n, i0);
    for (int64_t e = 0; e < rows * D; ++e)
      storeFloat(in.dq, a.dtype, base + e, dq[e], a.overflow);
  }
}

// Rows [t0, t1) of dk and dv of key/value head kv: each key block against
// the query blocks of its group that see it.
void dkvRows(const GradInputs &in, const Attention &a, int64_t b, int64_t kv, int64_t t0,
             int64_t t1) {
  const int64_t D = a.D;
  QueryBlock qb;
  std::vector<float> kb, vb, p, ds, dk, dv;
  for (int64_t j0 = t0; j0 < t1; j0 += kBlock) {
    const int64_t cols = std::min(kBlock, t1 - j0);
    loadRows(in.k, a, a.Nkv, b, kv, j0, cols, kb);
    loadRows(in.v, a, a.Nkv, b, kv, j0, cols, vb);
    dk.assign(static_cast<size_t>(cols * D), 0.0f);
    dv.assign(static_cast<size_t>(cols * D), 0.0f);
    for (int64_t n = kv * a.group(); n < (kv + 1) * a.group(); ++n)
      for (int64_t i0 = a.causal ? j0 / kBlock * kBlock : 0; i0 < a.S; i0 += kBlock) {
        const int64_t rows = std::min(kBlock, a.S - i0);
        loadQueryBlock(in, a, b, n, i0, rows, qb);
        probabilitiesAndScoreGrads(a, in, qb, kb, vb, j0, cols, p, ds);
        for (float &x : p)
          x = roundToDType(x, a.dtype, OverflowMode::InfNan); // P as the cube reads it
        gemm(true, false, cols, D, rows, 1.0f, p.data(), cols, qb.dout.data(), D, 1.0f, dv.data(),
             D);
        gemm(true, false, cols, D, rows, 1.0f, ds.data(), cols, qb.q.data(), D, 1.0f, dk.data(), D);
      }
    const int64_t base = a.row(a.Nkv, b, kv, j0);
    for (int64_t e = 0; e < cols * D; ++e) {
      storeFloat(in.dk, a.dtype, base + e, dk[e], a.overflow);
      storeFloat(in.dv, a.dtype, base + e, dv[e], a.overflow);
    }
  }
}

} // namespace
} // namespace kiln::codegen

using namespace kiln;
using namespace kiln::codegen;

extern "C" void kilnFlashAttention(void **buffers, int64_t row_begin, int64_t row_end,
                                   uint32_t *status, const int64_t *args) {
  const Attention a = attentionOf(args, 6);
  takeFloatStatus();
  for (int64_t r = row_begin; r < row_end; ++r) // rows are (b, n)
    forwardHead(buffers, args, a, r / a.N, r % a.N);
  publish(status, takeFloatStatus());
}

extern "C" void kilnFlashAttentionGrad(void **buffers, int64_t row_begin, int64_t row_end,
                                       uint32_t *status, const int64_t *args) {
  const Attention a = attentionOf(args, 10);
  const GradInputs in = gradInputsOf(buffers, args);
  takeFloatStatus();
  if (a.N == a.Nkv) { // rows are (b, n)
    for (int64_t r = row_begin; r < row_end; ++r) {
      dqRows(in, a, r / a.N, r % a.N, 0, a.S);
      dkvRows(in, a, r / a.N, r % a.N, 0, a.S);
    }
  } else { // rows are batches
    for (int64_t b = row_begin; b < row_end; ++b) {
      for (int64_t n = 0; n < a.N; ++n)
        dqRows(in, a, b, n, 0, a.S);
      for (int64_t kv = 0; kv < a.Nkv; ++kv)
        dkvRows(in, a, b, kv, 0, a.S);
    }
  }
  publish(status, takeFloatStatus());
}

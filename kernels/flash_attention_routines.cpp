// FlashAttentionScore's host routines: blocks of query rows against blocks of
// keys, the block products on oneDNN: on the bf16 operands themselves where
// the host has bf16 units, else on the inputs widened to f32 once per block.
// Rows are widened, rounded and stored by the vector loops of float_rows.h
// and softmax_rows.h. The forward is FlashAttention-2's online softmax; the
// backward recomputes the probabilities from the saved statistics once per
// block pair.
#include "kernels/flash_attention_routines.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <cblas.h>

#include "ir/float_status.h"
#include "kernels/block_gemm.h"
#include "kernels/float_rows.h"
#include "kernels/gemm.h"
#include "kernels/library_kernel_util.h"
#include "kernels/softmax_rows.h"

namespace kiln::kernels {
namespace {

// A block pair is kOuter rows of the outer loop (query rows in the forward,
// keys in the backward) against up to kInner of the other side.
constexpr int64_t kOuter = 64, kInner = 512;

// Scratch is kept per thread from call to call (no allocation per head),
// but past this many bytes a call gives its buffers back: a long sequence's
// would otherwise stay on every executor thread for the life of the process.
constexpr size_t kScratchKeepBytes = size_t{32} << 20;

template <typename T> size_t bytesOf(const std::vector<T> &v) { return v.capacity() * sizeof(T); }

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
  widenRow(data, a.dtype, a.row(heads, b, n, s0), count * a.D, out.data());
}

// c [m, n] = alpha * op(x) op(y) + beta * c, row-major f32 blocks.
void gemm(bool trans_x, bool trans_y, int64_t m, int64_t n, int64_t k, float alpha, const float *x,
          int64_t ldx, const float *y, int64_t ldy, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_x ? CblasTrans : CblasNoTrans,
              trans_y ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, x, static_cast<int>(ldx), y, static_cast<int>(ldy), beta,
              c, static_cast<int>(ldc));
}

// In bf16 on a host with bf16 units, the block products whose operands are
// bf16 values (q, k, v, dout, and P once rounded) run on them: the same
// exact products, summed in f32 in another order.
bool bf16Products(const Attention &a) { return a.dtype == DType::BF16 && hostHasBf16Gemm(); }

// The bf16 bits of row s0 of head n of a [B, heads, S, D] tensor, or null
// where the block products are f32.
const uint16_t *bf16Rows(const void *data, const Attention &a, int64_t heads, int64_t b, int64_t n,
                         int64_t s0) {
  return bf16Products(a) ? static_cast<const uint16_t *>(data) + a.row(heads, b, n, s0) : nullptr;
}

// Element `at` of widened rows, or null where they were not widened.
const float *rowsAt(const std::vector<float> &rows, int64_t at) {
  return rows.empty() ? nullptr : rows.data() + at;
}

// An operand's f32 values: `x` where the caller widened it, else its bf16
// bits `x16` (`rows` rows of `ld`) widened into `scratch`.
const float *widened(const float *x, const uint16_t *x16, int64_t rows, int64_t ld,
                     std::vector<float> &scratch) {
  if (x)
    return x;
  scratch.resize(static_cast<size_t>(rows * ld));
  widenRow(x16, DType::BF16, 0, rows * ld, scratch.data());
  return scratch.data();
}

// c [m, n] = op(x) op(y) (+ c when `accumulate`): on the bf16 operands where
// given (x16, y16: the same values as x and y), else in f32; on oneDNN
// (OpenBLAS 0.3.21's sgemm is about half its speed on recent cores, see
// docs/notes/gemm-backend.md), on sgemm where oneDNN refuses. An operand
// given only in bf16 (null x or y) is widened where the product falls back
// to f32.
void product(bool trans_x, bool trans_y, int64_t m, int64_t n, int64_t k, float alpha,
             const float *x, const uint16_t *x16, int64_t ldx, const float *y, const uint16_t *y16,
             int64_t ldy, bool accumulate, float *c, int64_t ldc) {
  if (x16 && y16 &&
      blockGemm(DType::BF16, m, n, k, alpha, {x16, ldx, trans_x}, {y16, ldy, trans_y}, accumulate,
                c, ldc))
    return;
  thread_local std::vector<float> x_scratch, y_scratch;
  x = widened(x, x16, trans_x ? k : m, ldx, x_scratch);
  y = widened(y, y16, trans_y ? n : k, ldy, y_scratch);
  if (blockGemm(DType::F32, m, n, k, alpha, {x, ldx, trans_x}, {y, ldy, trans_y}, accumulate, c,
                ldc))
    return;
  gemm(trans_x, trans_y, m, n, k, alpha, x, ldx, y, ldy, accumulate ? 1.0f : 0.0f, c, ldc);
}

// scores [rows, cols] = scale * q k^T of a query block at i0 against a key
// block at j0, the keys a row does not see -inf.
void blockScores(const Attention &a, const float *q, const uint16_t *q16, const float *k,
                 const uint16_t *k16, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                 std::vector<float> &scores) {
  scores.resize(static_cast<size_t>(rows * cols));
  product(false, true, rows, cols, a.D, a.scale, q, q16, a.D, k, k16, a.D, false, scores.data(),
          cols);
  if (!a.causal || j0 + cols <= i0 + 1)
    return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c)
      scores[r * cols + c] = -std::numeric_limits<float>::infinity();
}

// P or dS as the cube reads it, rounded to the compute dtype: on bf16 units
// its bf16 bits alone (`bits`; the f32 pointer returned is null, `p` is
// left as it was), else `p` rounded in place (nothing to do in f32).
struct CubeOperand {
  const float *f32;
  const uint16_t *bf16;
};

CubeOperand forCube(std::vector<float> &p, const Attention &a, std::vector<uint16_t> &bits) {
  const auto n = static_cast<int64_t>(p.size());
  if (bf16Products(a)) {
    bits.resize(p.size());
    narrowRow(p.data(), n, DType::BF16, OverflowMode::InfNan, bits.data(), 0);
    return {nullptr, bits.data()};
  }
  if (a.dtype == DType::BF16)
    roundRowToBf16(p.data(), n);
  else if (a.dtype != DType::F32)
    for (float &x : p)
      x = roundToDType(x, a.dtype, OverflowMode::InfNan);
  return {p.data(), nullptr};
}

// One (b, n): each query block against its key blocks in one pass
// (FlashAttention-2's online softmax: the running max rescales the running
// sum and the output accumulator), the output divided by the sum at the end.
void forwardHead(void **buffers, const int64_t *args, const Attention &a, int64_t b, int64_t n) {
  const void *q = buffers[args[0]], *k = buffers[args[1]], *v = buffers[args[2]];
  void *out = buffers[args[3]];
  // The statistics are stored only where the backward reads them.
  float *row_max = args[4] < 0 ? nullptr : static_cast<float *>(buffers[args[4]]);
  float *row_sum = args[5] < 0 ? nullptr : static_cast<float *>(buffers[args[5]]);
  const int64_t kv = n / a.group(), D = a.D;
  // The head's keys and values, widened once: O(S D), read by every block;
  // nothing to widen where the products run on bf16 units.
  const bool widen = !bf16Products(a);
  // Scratch kept from call to call on each thread: no allocation per head.
  thread_local std::vector<float> qb, keys, values, p, acc, m, l;
  thread_local std::vector<uint16_t> p16;
  if (widen) {
    loadRows(k, a, a.Nkv, b, kv, 0, a.keysFor(a.S - 1), keys);
    loadRows(v, a, a.Nkv, b, kv, 0, a.keysFor(a.S - 1), values);
  } else { // empty: rowsAt gives null, not an earlier call's rows
    keys.clear();
    values.clear();
    qb.clear();
  }
  for (int64_t i0 = 0; i0 < a.S; i0 += kOuter) {
    const int64_t rows = std::min(kOuter, a.S - i0), key_end = a.keysFor(i0 + rows - 1);
    if (widen)
      loadRows(q, a, a.N, b, n, i0, rows, qb);
    m.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
    l.assign(static_cast<size_t>(rows), 0.0f);
    acc.assign(static_cast<size_t>(rows * D), 0.0f);
    for (int64_t j0 = 0; j0 < key_end; j0 += kInner) {
      const int64_t cols = std::min(kInner, key_end - j0);
      blockScores(a, rowsAt(qb, 0), bf16Rows(q, a, a.N, b, n, i0), rowsAt(keys, j0 * D),
                  bf16Rows(k, a, a.Nkv, b, kv, j0), i0, rows, j0, cols, p);
      for (int64_t r = 0; r < rows; ++r) {
        float *s = &p[r * cols];
        // A NaN score makes the row NaN (std::max would drop it).
        const float block_max = rowMax(s, cols);
        const float mb = std::isnan(block_max) ? block_max : std::max(m[r], block_max);
        const float rescale = std::exp(m[r] - mb);
        const float sum = expShiftedSum(s, cols, mb);
        l[r] = l[r] * rescale + sum;
        m[r] = mb;
        if (rescale != 1.0f)
          scaleRow(&acc[r * D], D, rescale);
      }
      const CubeOperand pc = forCube(p, a, p16);
      product(false, false, rows, D, cols, 1.0f, pc.f32, pc.bf16, cols, rowsAt(values, j0 * D),
              bf16Rows(v, a, a.Nkv, b, kv, j0), D, true, acc.data(), D);
    }
    for (int64_t r = 0; r < rows; ++r)
      divideRow(&acc[r * D], D, l[r]);
    narrowRow(acc.data(), rows * D, a.dtype, a.overflow, out, a.row(a.N, b, n, i0));
    const int64_t stat = (b * a.N + n) * a.S + i0;
    if (row_max)
      std::copy(m.begin(), m.end(), row_max + stat);
    if (row_sum)
      std::copy(l.begin(), l.end(), row_sum + stat);
  }
  if (bytesOf(keys) + bytesOf(values) > kScratchKeepBytes) {
    std::vector<float>().swap(keys);
    std::vector<float>().swap(values);
  }
}

// The backward's inputs and outputs.
struct GradInputs {
  const void *q, *k, *v, *out, *dout;
  const float *row_max, *row_sum;
  void *dq, *dk, *dv;
};

// A gradient the kernel does not store (nothing reads it: a frozen
// projection's input under LoRA) has slot -1 and is not computed.
GradInputs gradInputsOf(void **buffers, const int64_t *args) {
  auto slot = [&](int i) { return args[i] < 0 ? nullptr : buffers[args[i]]; };
  return GradInputs{buffers[args[0]],
                    buffers[args[1]],
                    buffers[args[2]],
                    buffers[args[3]],
                    buffers[args[4]],
                    static_cast<const float *>(buffers[args[5]]),
                    static_cast<const float *>(buffers[args[6]]),
                    slot(7),
                    slot(8),
                    slot(9)};
}

// What the backward reads of query head n, whole: q (where its products
// are f32), dout and delta = rowsum(dout * out) in f32, and where its saved
// statistics start.
struct QueryHead {
  int64_t stat = 0;
  std::vector<float> q, dout, delta;
};

void loadQueryHead(const GradInputs &in, const Attention &a, int64_t b, int64_t n, QueryHead &h) {
  h.stat = (b * a.N + n) * a.S;
  thread_local std::vector<float> out;
  if (!bf16Products(a))
    loadRows(in.q, a, a.N, b, n, 0, a.S, h.q);
  else
    h.q.clear();
  loadRows(in.dout, a, a.N, b, n, 0, a.S, h.dout);
  loadRows(in.out, a, a.N, b, n, 0, a.S, out);
  h.delta.resize(static_cast<size_t>(a.S));
  for (int64_t r = 0; r < a.S; ++r) {
    float delta = 0; // in a register: the vector's element would be stored every step
    for (int64_t e = 0; e < a.D; ++e)
      delta += h.dout[r * a.D + e] * out[r * a.D + e];
    h.delta[r] = delta;
  }
}

// Key/value head kv of batch b: for each key block, every query block of its
// group that sees it. The probabilities and the score gradients of a block
// pair are computed once and give dv and dk of the key block and dq of the
// query block (summed over the key blocks in a whole-head accumulator).
void backwardGroup(const GradInputs &in, const Attention &a, int64_t b, int64_t kv) {
  const int64_t D = a.D, g = a.group();
  // Scratch kept from call to call on each thread: no allocation per group.
  thread_local std::vector<QueryHead> heads;
  thread_local std::vector<std::vector<float>> dq;
  heads.resize(static_cast<size_t>(g));
  dq.resize(static_cast<size_t>(g));
  for (int64_t h = 0; h < g; ++h) {
    loadQueryHead(in, a, b, kv * g + h, heads[h]);
    dq[h].assign(static_cast<size_t>(a.S * D), 0.0f);
  }
  thread_local std::vector<float> kb, vb, p, ds, dk, dv;
  thread_local std::vector<uint16_t> p16, ds16;
  for (int64_t j0 = 0; j0 < a.S; j0 += kOuter) {
    const int64_t cols = std::min(kOuter, a.S - j0);
    if (!bf16Products(a)) { // on bf16 units the products read the bits alone
      loadRows(in.k, a, a.Nkv, b, kv, j0, cols, kb);
      loadRows(in.v, a, a.Nkv, b, kv, j0, cols, vb);
    } else {
      kb.clear();
      vb.clear();
    }
    dk.assign(static_cast<size_t>(cols * D), 0.0f);
    dv.assign(static_cast<size_t>(cols * D), 0.0f);
    for (int64_t h = 0; h < g; ++h) {
      const QueryHead &qh = heads[h];
      for (int64_t i0 = a.causal ? j0 : 0; i0 < a.S; i0 += kInner) {
        const int64_t rows = std::min(kInner, a.S - i0);
        const float *qb = rowsAt(qh.q, i0 * D);
        const uint16_t *q16 = bf16Rows(in.q, a, a.N, b, kv * g + h, i0);
        const uint16_t *k16 = bf16Rows(in.k, a, a.Nkv, b, kv, j0);
        const uint16_t *v16 = bf16Rows(in.v, a, a.Nkv, b, kv, j0);
        const uint16_t *dout16 = bf16Rows(in.dout, a, a.N, b, kv * g + h, i0);
        blockScores(a, qb, q16, rowsAt(kb, 0), k16, i0, rows, j0, cols, p);
        for (int64_t r = 0; r < rows; ++r)
          expShiftedDivide(&p[r * cols], cols, in.row_max[qh.stat + i0 + r],
                           in.row_sum[qh.stat + i0 + r]);
        // ds = scale * p * (dout v^T - delta)
        ds.resize(p.size());
        const float *dout = &qh.dout[i0 * D];
        product(false, true, rows, cols, D, 1.0f, dout, dout16, D, rowsAt(vb, 0), v16, D, false,
                ds.data(), cols);
        for (int64_t r = 0; r < rows; ++r)
          scoreGradientRow(&p[r * cols], cols, qh.delta[i0 + r], a.scale, &ds[r * cols]);
        const CubeOperand dsc = forCube(ds, a, ds16);
        if (in.dq)
          product(false, false, rows, D, cols, 1.0f, dsc.f32, dsc.bf16, cols, rowsAt(kb, 0), k16, D,
                  true, &dq[h][i0 * D], D);
        if (in.dk)
          product(true, false, cols, D, rows, 1.0f, dsc.f32, dsc.bf16, cols, qb, q16, D, true,
                  dk.data(), D);
        if (in.dv) {
          const CubeOperand pc = forCube(p, a, p16);
          product(true, false, cols, D, rows, 1.0f, pc.f32, pc.bf16, cols, dout, dout16, D, true,
                  dv.data(), D);
        }
      }
    }
    const int64_t base = a.row(a.Nkv, b, kv, j0);
    if (in.dk)
      narrowRow(dk.data(), cols * D, a.dtype, a.overflow, in.dk, base);
    if (in.dv)
      narrowRow(dv.data(), cols * D, a.dtype, a.overflow, in.dv, base);
  }
  for (int64_t h = 0; in.dq && h < g; ++h)
    narrowRow(dq[h].data(), a.S * D, a.dtype, a.overflow, in.dq, a.row(a.N, b, kv * g + h, 0));
  size_t kept = 0;
  for (int64_t h = 0; h < g; ++h)
    kept += bytesOf(heads[h].q) + bytesOf(heads[h].dout) + bytesOf(dq[h]);
  if (kept > kScratchKeepBytes) {
    heads.clear();
    heads.shrink_to_fit();
    dq.clear();
    dq.shrink_to_fit();
  }
}

} // namespace
} // namespace kiln::kernels

using namespace kiln;
using namespace kiln::kernels;

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
  if (a.N == a.Nkv) { // rows are (b, n): n is its own key/value head
    for (int64_t r = row_begin; r < row_end; ++r)
      backwardGroup(in, a, r / a.N, r % a.N);
  } else { // rows are batches
    for (int64_t b = row_begin; b < row_end; ++b)
      for (int64_t kv = 0; kv < a.Nkv; ++kv)
        backwardGroup(in, a, b, kv);
  }
  publish(status, takeFloatStatus());
}

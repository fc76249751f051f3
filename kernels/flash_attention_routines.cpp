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
#include <cstring>
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
  bool bsnd;    // [B, S, heads, D], else [B, heads, S, D]
  int64_t rows; // the kernel's rows, which the routine spreads its units over
  OverflowMode overflow;
  int64_t group() const { return N / Nkv; }
  // Element (s, 0) of head n of batch b of a tensor of `heads` heads.
  int64_t row(int64_t heads, int64_t b, int64_t n, int64_t s) const {
    return bsnd ? ((b * S + s) * heads + n) * D : ((b * heads + n) * S + s) * D;
  }
  // Elements from one row of a head to the next.
  int64_t ld(int64_t heads) const { return bsnd ? heads * D : D; }
  // The last key query row i sees, plus one.
  int64_t keysFor(int64_t i) const { return causal ? i + 1 : S; }
  // Of a block of `cols` keys from j0, how many query row i sees (its first).
  int64_t seenIn(int64_t i, int64_t j0, int64_t cols) const {
    return std::clamp<int64_t>(keysFor(i) - j0, 0, cols);
  }
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
                   args[first + 8] == 1,
                   args[first + 9],
                   static_cast<OverflowMode>(args[first + 10])};
}

// Where the rows of one head of a tensor lie: row s at element first + s ld
// of data, in the compute dtype.
struct Head {
  const void *data;
  int64_t first, ld;
};

Head headOf(const void *data, const Attention &a, int64_t heads, int64_t b, int64_t n) {
  return {data, a.row(heads, b, n, 0), a.ld(heads)};
}

// Rows [s0, s0 + count) of a head, as f32 rows of D. Rows that lie apart
// are gathered first and widened in one call, not one call a row.
void loadRows(const Head &h, const Attention &a, int64_t s0, int64_t count,
              std::vector<float> &out) {
  out.resize(static_cast<size_t>(count * a.D));
  if (h.ld == a.D) {
    widenRow(h.data, a.dtype, h.first + s0 * a.D, count * a.D, out.data());
    return;
  }
  thread_local std::vector<uint8_t> gathered;
  const size_t row_bytes = static_cast<size_t>(a.D) * dtypeSize(a.dtype);
  gathered.resize(static_cast<size_t>(count) * row_bytes);
  const auto *bytes = static_cast<const uint8_t *>(h.data);
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(gathered.data() + r * row_bytes,
                bytes + (h.first + (s0 + r) * h.ld) * dtypeSize(a.dtype), row_bytes);
  widenRow(gathered.data(), a.dtype, 0, count * a.D, out.data());
}

// f32 rows of D stored as rows [s0, s0 + count) of head n: in BSND narrowed
// in one call and then scattered (narrowing is elementwise: the same bits
// and status as row by row).
void storeRows(const float *x, const Attention &a, int64_t heads, int64_t b, int64_t n, int64_t s0,
               int64_t count, void *out) {
  if (!a.bsnd) {
    narrowRow(x, count * a.D, a.dtype, a.overflow, out, a.row(heads, b, n, s0));
    return;
  }
  thread_local std::vector<uint8_t> narrowed;
  const size_t row_bytes = static_cast<size_t>(a.D) * dtypeSize(a.dtype);
  narrowed.resize(static_cast<size_t>(count) * row_bytes);
  narrowRow(x, count * a.D, a.dtype, a.overflow, narrowed.data(), 0);
  auto *bytes = static_cast<uint8_t *>(out);
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(bytes + a.row(heads, b, n, s0 + r) * dtypeSize(a.dtype),
                narrowed.data() + r * row_bytes, row_bytes);
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

// The head for the block products: where they run on bf16 units and the
// head's rows lie apart (BSND, N x D apart), its bits gathered into
// `scratch` (oneDNN's products on the strided rows took 4-8 % longer in a
// step than on the copy); else as it is.
Head forProducts(const Head &h, const Attention &a, std::vector<uint16_t> &scratch) {
  if (!bf16Products(a) || h.ld == a.D)
    return h;
  scratch.resize(static_cast<size_t>(a.S * a.D));
  const auto *bits = static_cast<const uint16_t *>(h.data) + h.first;
  for (int64_t s = 0; s < a.S; ++s)
    std::copy_n(bits + s * h.ld, a.D, scratch.data() + s * a.D);
  return {scratch.data(), 0, a.D};
}

// Element `at` of widened rows, or null where they were not widened.
const float *rowsAt(const std::vector<float> &rows, int64_t at) {
  return rows.empty() ? nullptr : rows.data() + at;
}

// One operand of a block product: its f32 values where widened, its bf16
// bits where the products may run on them (the same values), rows `ld`
// apart in both.
struct Operand {
  const float *f32 = nullptr;
  const uint16_t *bf16 = nullptr;
  int64_t ld = 0;
};

// Widened rows of D from element `at`, and where the products run on bf16
// units the bits of rows [s0, ...) of head `h`, which forProducts made
// contiguous.
Operand operandOf(const std::vector<float> &rows, int64_t at, const Head &h, const Attention &a,
                  int64_t s0) {
  if (!bf16Products(a))
    return {rowsAt(rows, at), nullptr, a.D};
  return {rowsAt(rows, at), static_cast<const uint16_t *>(h.data) + h.first + s0 * a.D, a.D};
}

// An operand's f32 values: as widened, else its bf16 bits (`rows` rows)
// widened into `scratch`.
const float *widened(const Operand &x, int64_t rows, std::vector<float> &scratch) {
  if (x.f32)
    return x.f32;
  scratch.resize(static_cast<size_t>(rows * x.ld));
  widenRow(x.bf16, DType::BF16, 0, rows * x.ld, scratch.data());
  return scratch.data();
}

// c [m, n] = op(x) op(y) (+ c when `accumulate`): on the bf16 operands where
// both have them, else in f32; on oneDNN (OpenBLAS 0.3.21's sgemm is about
// half its speed on recent cores, see docs/notes/gemm-backend.md), on sgemm
// where oneDNN refuses. An operand given only in bf16 is widened where the
// product falls back to f32.
void product(bool trans_x, bool trans_y, int64_t m, int64_t n, int64_t k, float alpha,
             const Operand &x, const Operand &y, bool accumulate, float *c, int64_t ldc) {
  if (x.bf16 && y.bf16 &&
      blockGemm(DType::BF16, m, n, k, alpha, {x.bf16, x.ld, trans_x}, {y.bf16, y.ld, trans_y},
                accumulate, c, ldc))
    return;
  thread_local std::vector<float> x_scratch, y_scratch;
  const float *x32 = widened(x, trans_x ? k : m, x_scratch);
  const float *y32 = widened(y, trans_y ? n : k, y_scratch);
  if (blockGemm(DType::F32, m, n, k, alpha, {x32, x.ld, trans_x}, {y32, y.ld, trans_y}, accumulate,
                c, ldc))
    return;
  gemm(trans_x, trans_y, m, n, k, alpha, x32, x.ld, y32, y.ld, accumulate ? 1.0f : 0.0f, c, ldc);
}

// scores [rows, cols] = scale * q k^T of a query block against a key block.
// Where causal, a row's keys past Attention::seenIn are computed (the
// block's product is whole) but not read: the row steps stop at the keys the
// row sees (expRow).
void blockScores(const Attention &a, const Operand &q, const Operand &k, int64_t rows, int64_t cols,
                 std::vector<float> &scores) {
  scores.resize(static_cast<size_t>(rows * cols));
  product(false, true, rows, cols, a.D, a.scale, q, k, false, scores.data(), cols);
}

// A row of scores, of which the first `seen` are seen, made probabilities by
// `exp` (the row step, over a count of scores from the first) with the
// unseen ones -inf, the same bits as over the whole masked row: the step
// runs up to the end of the 16-wide vector holding the last seen score (its
// sum adds in the same lanes and order), and past it each probability is 0,
// which exp(-inf - shift) / divisor is for a finite shift and a positive
// divisor (`exact`). Otherwise the step runs over the whole row, so a NaN
// or infinite row comes out as before.
template <typename Exp> void expRow(float *row, int64_t seen, int64_t cols, bool exact, Exp exp) {
  const int64_t stepped = exact ? std::min(cols, (seen + 15) / 16 * 16) : cols;
  std::fill(row + seen, row + stepped, -std::numeric_limits<float>::infinity());
  exp(stepped);
  std::fill(row + stepped, row + cols, 0.0f);
}

// P or dS (rows of `cols`) as the cube reads it, rounded to the compute
// dtype: on bf16 units its bf16 bits alone (`bits`; `p` is left as it
// was), else `p` rounded in place (nothing to do in f32).
Operand forCube(std::vector<float> &p, int64_t cols, const Attention &a,
                std::vector<uint16_t> &bits) {
  const auto n = static_cast<int64_t>(p.size());
  if (bf16Products(a)) {
    bits.resize(p.size());
    narrowRow(p.data(), n, DType::BF16, OverflowMode::InfNan, bits.data(), 0);
    return {nullptr, bits.data(), cols};
  }
  if (a.dtype == DType::BF16)
    roundRowToBf16(p.data(), n);
  else if (a.dtype != DType::F32)
    for (float &x : p)
      x = roundToDType(x, a.dtype, OverflowMode::InfNan);
  return {p.data(), nullptr, cols};
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
  // Scratch kept from call to call on each thread: no allocation per head.
  thread_local std::vector<float> qb, keys, values, p, acc, m, l;
  thread_local std::vector<uint16_t> p16, q_bits, k_bits, v_bits;
  const Head qh = forProducts(headOf(q, a, a.N, b, n), a, q_bits);
  const Head kh = forProducts(headOf(k, a, a.Nkv, b, kv), a, k_bits);
  const Head vh = forProducts(headOf(v, a, a.Nkv, b, kv), a, v_bits);
  // The head's keys and values, widened once: O(S D), read by every block;
  // nothing to widen where the products run on bf16 units.
  const bool widen = !bf16Products(a);
  if (widen) {
    loadRows(kh, a, 0, a.keysFor(a.S - 1), keys);
    loadRows(vh, a, 0, a.keysFor(a.S - 1), values);
  } else { // empty: rowsAt gives null, not an earlier call's rows
    keys.clear();
    values.clear();
    qb.clear();
  }
  for (int64_t i0 = 0; i0 < a.S; i0 += kOuter) {
    const int64_t rows = std::min(kOuter, a.S - i0), key_end = a.keysFor(i0 + rows - 1);
    if (widen)
      loadRows(qh, a, i0, rows, qb);
    m.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
    l.assign(static_cast<size_t>(rows), 0.0f);
    acc.assign(static_cast<size_t>(rows * D), 0.0f);
    for (int64_t j0 = 0; j0 < key_end; j0 += kInner) {
      const int64_t cols = std::min(kInner, key_end - j0);
      blockScores(a, operandOf(qb, 0, qh, a, i0), operandOf(keys, j0 * D, kh, a, j0), rows, cols,
                  p);
      for (int64_t r = 0; r < rows; ++r) {
        float *s = &p[r * cols];
        const int64_t seen = a.seenIn(i0 + r, j0, cols);
        // A NaN score makes the row NaN (std::max would drop it).
        const float block_max = rowMax(s, seen);
        const float mb = std::isnan(block_max) ? block_max : std::max(m[r], block_max);
        const float rescale = std::exp(m[r] - mb);
        float sum = 0;
        expRow(s, seen, cols, std::isfinite(mb), [&](int64_t n) { sum = expShiftedSum(s, n, mb); });
        l[r] = l[r] * rescale + sum;
        m[r] = mb;
        if (rescale != 1.0f)
          scaleRow(&acc[r * D], D, rescale);
      }
      product(false, false, rows, D, cols, 1.0f, forCube(p, cols, a, p16),
              operandOf(values, j0 * D, vh, a, j0), true, acc.data(), D);
    }
    for (int64_t r = 0; r < rows; ++r)
      divideRow(&acc[r * D], D, l[r]);
    storeRows(acc.data(), a, a.N, b, n, i0, rows, out);
    const int64_t stat = (b * a.N + n) * a.S + i0;
    if (row_max)
      std::copy(m.begin(), m.end(), row_max + stat);
    if (row_sum)
      std::copy(l.begin(), l.end(), row_sum + stat);
  }
  if (bytesOf(keys) + bytesOf(values) + bytesOf(q_bits) + bytesOf(k_bits) + bytesOf(v_bits) >
      kScratchKeepBytes) {
    std::vector<float>().swap(keys);
    std::vector<float>().swap(values);
    for (auto *bits : {&q_bits, &k_bits, &v_bits})
      std::vector<uint16_t>().swap(*bits);
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
// are f32), dout and delta = rowsum(dout * out) in f32, where q's and
// dout's rows are for the products, and where its saved statistics start.
struct QueryHead {
  int64_t stat = 0;
  std::vector<float> q, dout, delta;
  std::vector<uint16_t> q_bits, dout_bits; // gathered for the products
  Head q_rows{}, dout_rows{};
};

void loadQueryHead(const GradInputs &in, const Attention &a, int64_t b, int64_t n, QueryHead &h) {
  h.stat = (b * a.N + n) * a.S;
  thread_local std::vector<float> out;
  h.q_rows = forProducts(headOf(in.q, a, a.N, b, n), a, h.q_bits);
  h.dout_rows = forProducts(headOf(in.dout, a, a.N, b, n), a, h.dout_bits);
  if (!bf16Products(a))
    loadRows(h.q_rows, a, 0, a.S, h.q);
  else
    h.q.clear();
  loadRows(h.dout_rows, a, 0, a.S, h.dout);
  loadRows(headOf(in.out, a, a.N, b, n), a, 0, a.S, out);
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
  thread_local std::vector<uint16_t> p16, ds16, k_bits, v_bits;
  const Head kh = forProducts(headOf(in.k, a, a.Nkv, b, kv), a, k_bits);
  const Head vh = forProducts(headOf(in.v, a, a.Nkv, b, kv), a, v_bits);
  for (int64_t j0 = 0; j0 < a.S; j0 += kOuter) {
    const int64_t cols = std::min(kOuter, a.S - j0);
    if (!bf16Products(a)) { // on bf16 units the products read the bits alone
      loadRows(kh, a, j0, cols, kb);
      loadRows(vh, a, j0, cols, vb);
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
        const Operand q = operandOf(qh.q, i0 * D, qh.q_rows, a, i0);
        const Operand k = operandOf(kb, 0, kh, a, j0);
        const Operand v = operandOf(vb, 0, vh, a, j0);
        const Operand dout = operandOf(qh.dout, i0 * D, qh.dout_rows, a, i0);
        blockScores(a, q, k, rows, cols, p);
        for (int64_t r = 0; r < rows; ++r) {
          const float max = in.row_max[qh.stat + i0 + r], sum = in.row_sum[qh.stat + i0 + r];
          float *row = &p[r * cols];
          expRow(row, a.seenIn(i0 + r, j0, cols), cols, std::isfinite(max) && sum > 0,
                 [&](int64_t n) { expShiftedDivide(row, n, max, sum); });
        }
        // ds = scale * p * (dout v^T - delta)
        ds.resize(p.size());
        product(false, true, rows, cols, D, 1.0f, dout, v, false, ds.data(), cols);
        for (int64_t r = 0; r < rows; ++r)
          scoreGradientRow(&p[r * cols], cols, qh.delta[i0 + r], a.scale, &ds[r * cols]);
        const Operand dsc = forCube(ds, cols, a, ds16);
        if (in.dq)
          product(false, false, rows, D, cols, 1.0f, dsc, k, true, &dq[h][i0 * D], D);
        if (in.dk)
          product(true, false, cols, D, rows, 1.0f, dsc, q, true, dk.data(), D);
        if (in.dv)
          product(true, false, cols, D, rows, 1.0f, forCube(p, cols, a, p16), dout, true, dv.data(),
                  D);
      }
    }
    if (in.dk)
      storeRows(dk.data(), a, a.Nkv, b, kv, j0, cols, in.dk);
    if (in.dv)
      storeRows(dv.data(), a, a.Nkv, b, kv, j0, cols, in.dv);
  }
  for (int64_t h = 0; in.dq && h < g; ++h)
    storeRows(dq[h].data(), a, a.N, b, kv * g + h, 0, a.S, in.dq);
  size_t kept = bytesOf(k_bits) + bytesOf(v_bits);
  for (int64_t h = 0; h < g; ++h)
    kept += bytesOf(heads[h].q) + bytesOf(heads[h].dout) + bytesOf(dq[h]) +
            bytesOf(heads[h].q_bits) + bytesOf(heads[h].dout_bits);
  if (kept > kScratchKeepBytes) {
    heads.clear();
    heads.shrink_to_fit();
    dq.clear();
    dq.shrink_to_fit();
    std::vector<uint16_t>().swap(k_bits);
    std::vector<uint16_t>().swap(v_bits);
  }
}

// The units [first, end) of `units` that the kernel's rows [row_begin,
// row_end) of a.rows stand for: unit u belongs to row u * rows / units, so
// the tiles of a launch take every unit once, in order.
std::pair<int64_t, int64_t> unitsOf(const Attention &a, int64_t units, int64_t row_begin,
                                    int64_t row_end) {
  auto first = [&](int64_t row) { return (row * units + a.rows - 1) / a.rows; };
  return {first(row_begin), first(row_end)};
}

} // namespace
} // namespace kiln::kernels

using namespace kiln;
using namespace kiln::kernels;

extern "C" void kilnFlashAttention(void **buffers, int64_t row_begin, int64_t row_end,
                                   uint32_t *status, const int64_t *args) {
  const Attention a = attentionOf(args, 6);
  takeFloatStatus();
  const auto [first, end] = unitsOf(a, a.B * a.N, row_begin, row_end);
  for (int64_t u = first; u < end; ++u) // units are heads (b, n)
    forwardHead(buffers, args, a, u / a.N, u % a.N);
  publish(status, takeFloatStatus());
}

extern "C" void kilnFlashAttentionGrad(void **buffers, int64_t row_begin, int64_t row_end,
                                       uint32_t *status, const int64_t *args) {
  const Attention a = attentionOf(args, 10);
  const GradInputs in = gradInputsOf(buffers, args);
  takeFloatStatus();
  const auto [first, end] = unitsOf(a, a.B * a.Nkv, row_begin, row_end);
  for (int64_t u = first; u < end; ++u) // units are key/value heads (b, kv)
    backwardGroup(in, a, u / a.Nkv, u % a.Nkv);
  publish(status, takeFloatStatus());
}

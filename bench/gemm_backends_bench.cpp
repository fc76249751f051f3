// Which GEMM library kiln's matmul kernels should call: OpenBLAS cblas_sgemm
// vs oneDNN matmul, at Qwen-14B's training shapes (tokens M = 2048, i.e.
// batch 1 x seq 2048, plus M = 512 variants that run quicker).
//
//   linear layers     Y[M,N] = X[M,K] * W[N,K]^T   (PyTorch weight layout)
//     c_attn          K = 5120,  N = 15360
//     attn_c_proj     K = 5120,  N = 5120
//     mlp_w1_w2       K = 5120,  N = 13696  (w1 and w2 have the same shape)
//     mlp_c_proj      K = 13696, N = 5120
//   attention scores  S[h] = Q[h] * K[h]^T, Q, K: [heads, seq, 128]
//
// Flags besides Google Benchmark's: --gemm_flop_budget=F (flops per benchmark,
// default 2.5e11, 1 to 50 iterations), --attn_heads=H (default 40),
// --gemm_wait_idle=S (before each benchmark wait up to S seconds for the
// machine to be idle; for shared machines).
//
// Benchmarks (every one reports GFLOP/s as the counter "GFLOPs", 2*M*N*K per
// iteration, and runs a fixed iteration count sized by --gemm_flop_budget):
//   openblas_f32         cblas_sgemm on f32 operands
//   dnnl_f32             oneDNN matmul, f32, weights in the plain [N,K] layout
//   dnnl_f32_packed      same, weights reordered once (outside the timed loop)
//                        to the layout oneDNN prefers
//   dnnl_bf16            oneDNN matmul, bf16 operands, f32 result (only where
//   dnnl_bf16_packed     the CPU has native bf16, avx512_bf16)
//   f16_sgemm            f16 operands, converted exactly to f32 (F16C), then
//                        cblas_sgemm; counter convert_ms = the conversion part
//   cvt_f16_f32          the operand conversion alone (threads:1 and all)
//   openblas_rows64          sgemm in blocks of 64 rows into an f32 tile
//   openblas_rows64_epilogue ... plus bias add + cast to f16 while the tile is hot
//   openblas_whole_epilogue  whole-matrix sgemm, then the same epilogue (cold)
//   openblas_tiles{64,256}_epilogue  row tiles of 64 / 256 rows spread over
//                        the cores, each a single-threaded sgemm + the
//                        epilogue on its hot tile (OpenBLAS at 1 thread)
//
// Time is wall-clock; the CPU column is the whole process's CPU time (every
// thread), so CPU / (Time * cores) well below 1 means other processes were
// taking the cores while it ran.
//
// oneDNN code is compiled only with KILN_HAVE_DNNL (bench/CMakeLists.txt sets
// it when the dnnl package is found). OpenBLAS and oneDNN (OpenMP) both use as
// many threads as the machine has cores; each benchmark first waits 0.2 s so
// that the previous one's idle spinning threads are asleep.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <dlfcn.h>
#include <immintrin.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "support/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#if KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

// ---------------------------------------------------------------------------
// Buffers and data

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

template <typename T> struct Buffer {
  std::unique_ptr<T, FreeDeleter> data;
  size_t size = 0;
  T *get() const { return data.get(); }
};

template <typename T> Buffer<T> allocate(size_t n) {
  const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
  Buffer<T> b;
  b.data.reset(static_cast<T *>(std::aligned_alloc(64, bytes)));
  if (!b.data) {
    fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
    abort();
  }
  b.size = n;
  return b;
}

// Values in [-1, 1), deterministic per seed.
void fillRandom(float *p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 2147483648.0f);
  }
}

bool haveF16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"); }

// IEEE binary16 -> binary32, exact (reference; used where F16C is missing).
float halfToFloatScalar(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// binary32 -> binary16, round to nearest even (reference / fallback).
uint16_t floatToHalfScalar(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // inf / nan
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) // rounds to >= 65520: overflow
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (x < 0x38800000u) { // subnormal or zero in f16
    float a;
    std::memcpy(&a, &x, sizeof a);
    // 2^-24 is the f16 subnormal step; rint rounds half to even.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mant_odd; // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (x >> 13));
}

__attribute__((target("avx2,f16c"))) void halfToFloatF16c(const uint16_t *src, float *dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 8));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(b));
  }
  for (; i < n; ++i)
    dst[i] = halfToFloatScalar(src[i]);
}

__attribute__((target("avx2,f16c"))) void floatToHalfF16c(const float *src, uint16_t *dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    dst[i] = floatToHalfScalar(src[i]);
}

void halfToFloat(const uint16_t *src, float *dst, size_t n) {
  static const bool f16c = haveF16c();
  if (f16c) {
    halfToFloatF16c(src, dst, n);
  } else {
    for (size_t i = 0; i < n; ++i)
      dst[i] = halfToFloatScalar(src[i]);
  }
}

void floatToHalf(const float *src, uint16_t *dst, size_t n) {
  static const bool f16c = haveF16c();
  if (f16c) {
    floatToHalfF16c(src, dst, n);
  } else {
    for (size_t i = 0; i < n; ++i)
      dst[i] = floatToHalfScalar(src[i]);
  }
}

// The epilogue kernel: out[r, :] = f16(tile[r, :] + bias[:]).
__attribute__((target("avx2,f16c"))) void biasCastF16c(const float *tile, const float *bias,
                                                       uint16_t *out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *t = tile + r * cols;
    uint16_t *o = out + r * cols;
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const __m256 v = _mm256_add_ps(_mm256_loadu_ps(t + c), _mm256_loadu_ps(bias + c));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(o + c),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; c < cols; ++c)
      o[c] = floatToHalfScalar(t[c] + bias[c]);
  }
}

void biasCast(const float *tile, const float *bias, uint16_t *out, int64_t rows, int64_t cols) {
  static const bool f16c = haveF16c();
  if (f16c) {
    biasCastF16c(tile, bias, out, rows, cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = floatToHalfScalar(tile[r * cols + c] + bias[c]);
}

// bf16 = upper half of f32, round to nearest even (no NaNs in our data).
uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

int numCores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Runs fn(begin, end) over [0, n) split into `threads` contiguous chunks.
template <typename Fn> void parallelFor(size_t n, int threads, Fn fn) {
  if (threads <= 1 || n < 1u << 16) {
    fn(size_t{0}, n);
    return;
  }
  static kiln::ThreadPool pool; // one thread per core, for every call
  const size_t chunk = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  pool.parallelFor(threads, [&](int64_t t, int) {
    const size_t b = std::min(n, chunk * static_cast<size_t>(t));
    fn(b, std::min(n, b + chunk));
  });
}

void halfToFloatParallel(const uint16_t *src, float *dst, size_t n, int threads) {
  parallelFor(n, threads, [=](size_t b, size_t e) { halfToFloat(src + b, dst + b, e - b); });
}

// Operands are cached by (role, rows, cols) so that each is generated once
// per process, whichever benchmarks use it.
struct Operand {
  Buffer<float> f32;
  Buffer<uint16_t> f16;
  Buffer<uint16_t> bf16;
};

const Operand &operand(const std::string &role, int64_t rows, int64_t cols) {
  static std::map<std::tuple<std::string, int64_t, int64_t>, Operand> cache;
  auto key = std::make_tuple(role, rows, cols);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  Operand op;
  op.f32 = allocate<float>(n);
  fillRandom(op.f32.get(), n,
             std::hash<std::string>{}(role) ^ static_cast<uint64_t>(rows * 31 + cols));
  // Keep the f32 copy equal to the f16 values, so every path computes the same product.
  op.f16 = allocate<uint16_t>(n);
  floatToHalf(op.f32.get(), op.f16.get(), n);
  halfToFloat(op.f16.get(), op.f32.get(), n);
  op.bf16 = allocate<uint16_t>(n);
  for (size_t i = 0; i < n; ++i)
    op.bf16.get()[i] = floatToBf16(op.f32.get()[i]);
  return cache.emplace(key, std::move(op)).first->second;
}

// Freshly allocated output, pages touched before timing.
Buffer<float> output(size_t n) {
  Buffer<float> b = allocate<float>(n);
  std::memset(b.get(), 0, n * sizeof(float));
  return b;
}

// ---------------------------------------------------------------------------
// Shapes and common plumbing

struct Linear {
  const char *name;
  int64_t k;
  int64_t n;
};

constexpr Linear kLinears[] = {
    {"c_attn", 5120, 15360},
    {"attn_c_proj", 5120, 5120},
    {"mlp_w1_w2", 5120, 13696},
    {"mlp_c_proj", 13696, 5120},
};
constexpr int64_t kTokens[] = {512, 2048};
constexpr int64_t kHeadDim = 128;
int64_t g_heads = 40;          // --attn_heads
double g_flop_budget = 2.5e11; // --gemm_flop_budget: flops per benchmark (all iterations)
int g_threads = 1;

double linearFlops(int64_t m, const Linear &l) { return 2.0 * static_cast<double>(m) * l.n * l.k; }
double attnFlops(int64_t seq) { return 2.0 * static_cast<double>(g_heads) * seq * seq * kHeadDim; }

double g_wait_idle_s = 0; // --gemm_wait_idle

// OpenBLAS's idle workers spin for about 0.1 s after a call, and so do
// OpenMP's for a while: let the previous benchmark's threads go to sleep
// before timing the next one. With --gemm_wait_idle=S, also wait up to S
// seconds for the machine to be idle (other processes off the cores).
void settle() { kiln::bench::waitForIdle(std::max(g_wait_idle_s, 0.2)); }

int64_t iterationsFor(double flops) {
  return std::clamp<int64_t>(std::llround(g_flop_budget / flops), 1, 50);
}

void setGflops(benchmark::State &state, double flops_per_iter) {
  state.counters["GFLOPs"] = benchmark::Counter(
      1e-9 * flops_per_iter * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

benchmark::internal::Benchmark *configure(benchmark::internal::Benchmark *b, double flops) {
  return b->Iterations(iterationsFor(flops))
      ->UseRealTime()
      ->MeasureProcessCPUTime()
      ->Unit(benchmark::kMillisecond);
}

void sgemmNT(const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k), w,
              static_cast<blasint>(k), 0.0f, y, static_cast<blasint>(n));
}

// Spot check of a product Y = X * W^T (X [m,k], W [n,k]) against a double
// reference at a few positions, to catch layout mistakes: got(i, j) is the
// computed element; `tol` is relative to sum_k |x*w|.
template <typename Got>
void spotCheck(benchmark::State &state, const float *x, const float *w, int64_t m, int64_t n,
               int64_t k, Got got, double tol) {
  uint64_t s = 12345;
  for (int t = 0; t < 16; ++t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t i = t == 0   ? 0
                      : t == 1 ? m - 1
                               : static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(m));
    const int64_t j = t == 0   ? 0
                      : t == 1 ? n - 1
                               : static_cast<int64_t>((s >> 13) % static_cast<uint64_t>(n));
    double ref = 0, mag = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double p = static_cast<double>(x[i * k + kk]) * static_cast<double>(w[j * k + kk]);
      ref += p;
      mag += std::fabs(p);
    }
    const double v = got(i, j);
    if (!(std::fabs(v - ref) <= tol * mag)) {
      char msg[160];
      snprintf(msg, sizeof msg, "wrong result at (%lld, %lld): %g, expected %g",
               static_cast<long long>(i), static_cast<long long>(j), v, ref);
      state.SkipWithError(msg);
      return;
    }
  }
}

constexpr double kTolF32 = 1e-5;
constexpr double kTolF16Out = 2e-3;
constexpr double kTolBf16 = 1e-2;

// ---------------------------------------------------------------------------
// OpenBLAS

void openblasF32(benchmark::State &state, int64_t m, Linear l) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  Buffer<float> y = output(static_cast<size_t>(m * l.n));
  settle();
  for (auto _ : state) {
    sgemmNT(x.f32.get(), w.f32.get(), y.get(), m, l.n, l.k);
    benchmark::ClobberMemory();
  }
  setGflops(state, linearFlops(m, l));
  spotCheck(
      state, x.f32.get(), w.f32.get(), m, l.n, l.k,
      [&](int64_t i, int64_t j) { return y.get()[i * l.n + j]; }, kTolF32);
}

void openblasAttn(benchmark::State &state, int64_t seq) {
  const Operand &q = operand("q", g_heads * seq, kHeadDim);
  const Operand &k = operand("k", g_heads * seq, kHeadDim);
  Buffer<float> s = output(static_cast<size_t>(g_heads * seq * seq));
  settle();
  for (auto _ : state) {
    for (int64_t h = 0; h < g_heads; ++h)
      sgemmNT(q.f32.get() + h * seq * kHeadDim, k.f32.get() + h * seq * kHeadDim,
              s.get() + h * seq * seq, seq, seq, kHeadDim);
    benchmark::ClobberMemory();
  }
  setGflops(state, attnFlops(seq));
  {
    const int64_t h = g_heads - 1;
    spotCheck(
        state, q.f32.get() + h * seq * kHeadDim, k.f32.get() + h * seq * kHeadDim, seq, seq,
        kHeadDim, [&](int64_t i, int64_t j) { return s.get()[(h * seq + i) * seq + j]; }, kTolF32);
  }
}

// f16 storage: convert both operands exactly to f32, then sgemm.
void f16Sgemm(benchmark::State &state, int64_t m, Linear l) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  Buffer<float> x32 = output(static_cast<size_t>(m * l.k));
  Buffer<float> w32 = output(static_cast<size_t>(l.n * l.k));
  Buffer<float> y = output(static_cast<size_t>(m * l.n));
  double convert_s = 0;
  settle();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    halfToFloatParallel(x.f16.get(), x32.get(), x32.size, g_threads);
    halfToFloatParallel(w.f16.get(), w32.get(), w32.size, g_threads);
    convert_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sgemmNT(x32.get(), w32.get(), y.get(), m, l.n, l.k);
    benchmark::ClobberMemory();
  }
  setGflops(state, linearFlops(m, l));
  state.counters["convert_ms"] = 1e3 * convert_s / static_cast<double>(state.iterations());
  spotCheck(
      state, x.f32.get(), w.f32.get(), m, l.n, l.k,
      [&](int64_t i, int64_t j) { return y.get()[i * l.n + j]; }, kTolF32);
}

void f16SgemmAttn(benchmark::State &state, int64_t seq) {
  const Operand &q = operand("q", g_heads * seq, kHeadDim);
  const Operand &k = operand("k", g_heads * seq, kHeadDim);
  Buffer<float> q32 = output(q.f32.size);
  Buffer<float> k32 = output(k.f32.size);
  Buffer<float> s = output(static_cast<size_t>(g_heads * seq * seq));
  double convert_s = 0;
  settle();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    halfToFloatParallel(q.f16.get(), q32.get(), q32.size, g_threads);
    halfToFloatParallel(k.f16.get(), k32.get(), k32.size, g_threads);
    convert_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int64_t h = 0; h < g_heads; ++h)
      sgemmNT(q32.get() + h * seq * kHeadDim, k32.get() + h * seq * kHeadDim,
              s.get() + h * seq * seq, seq, seq, kHeadDim);
    benchmark::ClobberMemory();
  }
  setGflops(state, attnFlops(seq));
  state.counters["convert_ms"] = 1e3 * convert_s / static_cast<double>(state.iterations());
  {
    const int64_t h = g_heads - 1;
    spotCheck(
        state, q.f32.get() + h * seq * kHeadDim, k.f32.get() + h * seq * kHeadDim, seq, seq,
        kHeadDim, [&](int64_t i, int64_t j) { return s.get()[(h * seq + i) * seq + j]; }, kTolF32);
  }
}

// Conversion alone: X [M,K] and W [N,K] from f16 to f32.
void convertF16(benchmark::State &state, int64_t m, Linear l, int threads) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  Buffer<float> x32 = output(static_cast<size_t>(m * l.k));
  Buffer<float> w32 = output(static_cast<size_t>(l.n * l.k));
  settle();
  for (auto _ : state) {
    halfToFloatParallel(x.f16.get(), x32.get(), x32.size, threads);
    halfToFloatParallel(w.f16.get(), w32.get(), w32.size, threads);
    benchmark::ClobberMemory();
  }
  const double elems = static_cast<double>(x32.size + w32.size);
  state.counters["elems"] = elems;
  // Bytes moved: 2 read + 4 written per element.
  state.counters["GB/s"] = benchmark::Counter(
      1e-9 * 6.0 * elems * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Row-blocked sgemm (64 rows at a time) into a scratch tile, optionally with
// the bias + f16 cast epilogue applied while the tile is hot.
constexpr int64_t kRowBlock = 64;

void openblasRows(benchmark::State &state, int64_t m, Linear l, bool epilogue) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  const Operand &bias = operand("bias", 1, l.n);
  Buffer<float> tile = output(static_cast<size_t>(kRowBlock * l.n));
  Buffer<float> y32 = output(epilogue ? 1 : static_cast<size_t>(m * l.n));
  Buffer<uint16_t> y16 = allocate<uint16_t>(static_cast<size_t>(m * l.n));
  std::memset(y16.get(), 0, y16.size * sizeof(uint16_t));
  settle();
  for (auto _ : state) {
    for (int64_t r = 0; r < m; r += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, m - r);
      float *dst = epilogue ? tile.get() : y32.get() + r * l.n;
      sgemmNT(x.f32.get() + r * l.k, w.f32.get(), dst, rows, l.n, l.k);
      if (epilogue)
        biasCast(dst, bias.f32.get(), y16.get() + r * l.n, rows, l.n);
    }
    benchmark::ClobberMemory();
  }
  setGflops(state, linearFlops(m, l));
  if (epilogue)
    spotCheck(
        state, x.f32.get(), w.f32.get(), m, l.n, l.k,
        [&](int64_t i, int64_t j) {
          return halfToFloatScalar(y16.get()[i * l.n + j]) - bias.f32.get()[j];
        },
        kTolF16Out);
  else
    spotCheck(
        state, x.f32.get(), w.f32.get(), m, l.n, l.k,
        [&](int64_t i, int64_t j) { return y32.get()[i * l.n + j]; }, kTolF32);
}

// kiln's kernel layout: row tiles run in parallel, one per thread, each with
// a single-threaded sgemm into its own f32 tile followed by the epilogue.
void openblasRowTiles(benchmark::State &state, int64_t m, Linear l, int64_t block) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  const Operand &bias = operand("bias", 1, l.n);
  std::vector<Buffer<float>> tiles;
  for (int t = 0; t < g_threads; ++t)
    tiles.push_back(output(static_cast<size_t>(block * l.n)));
  Buffer<uint16_t> y16 = allocate<uint16_t>(static_cast<size_t>(m * l.n));
  std::memset(y16.get(), 0, y16.size * sizeof(uint16_t));
  auto worker = [&](int t) {
    for (int64_t r = t * block; r < m; r += g_threads * block) {
      const int64_t rows = std::min(block, m - r);
      sgemmNT(x.f32.get() + r * l.k, w.f32.get(), tiles[static_cast<size_t>(t)].get(), rows, l.n,
              l.k);
      biasCast(tiles[static_cast<size_t>(t)].get(), bias.f32.get(), y16.get() + r * l.n, rows, l.n);
    }
  };
  openblas_set_num_threads(1);
  settle();
  kiln::ThreadPool pool(g_threads);
  for (auto _ : state) {
    pool.parallelFor(g_threads, [&](int64_t t, int) { worker(static_cast<int>(t)); });
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(g_threads);
  setGflops(state, linearFlops(m, l));
  spotCheck(
      state, x.f32.get(), w.f32.get(), m, l.n, l.k,
      [&](int64_t i, int64_t j) {
        return halfToFloatScalar(y16.get()[i * l.n + j]) - bias.f32.get()[j];
      },
      kTolF16Out);
}

// Whole-matrix sgemm, then the same epilogue over the (cold) f32 result.
void openblasWholeEpilogue(benchmark::State &state, int64_t m, Linear l) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  const Operand &bias = operand("bias", 1, l.n);
  Buffer<float> y32 = output(static_cast<size_t>(m * l.n));
  Buffer<uint16_t> y16 = allocate<uint16_t>(static_cast<size_t>(m * l.n));
  std::memset(y16.get(), 0, y16.size * sizeof(uint16_t));
  double epilogue_s = 0;
  settle();
  for (auto _ : state) {
    sgemmNT(x.f32.get(), w.f32.get(), y32.get(), m, l.n, l.k);
    const auto t0 = std::chrono::steady_clock::now();
    biasCast(y32.get(), bias.f32.get(), y16.get(), m, l.n);
    epilogue_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::ClobberMemory();
  }
  setGflops(state, linearFlops(m, l));
  state.counters["epilogue_ms"] = 1e3 * epilogue_s / static_cast<double>(state.iterations());
  spotCheck(
      state, x.f32.get(), w.f32.get(), m, l.n, l.k,
      [&](int64_t i, int64_t j) {
        return halfToFloatScalar(y16.get()[i * l.n + j]) - bias.f32.get()[j];
      },
      kTolF16Out);
}

// ---------------------------------------------------------------------------
// oneDNN

#if KILN_HAVE_DNNL

dnnl::engine &dnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

bool dnnlHasBf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

// src [B?, M, K] row-major; weights logically [B?, K, N], stored as [B?, N, K]
// (transposed, the PyTorch layout) unless `packed`, in which case they are
// reordered once into the layout the primitive asks for.
struct DnnlMatmul {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst;
  std::string impl;
};

DnnlMatmul makeDnnlMatmul(int64_t batch, int64_t m, int64_t n, int64_t k, bool bf16, bool packed,
                          const void *src_data, const void *weights_data, float *dst_data) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  using dims = dnnl::memory::dims;
  const dt in = bf16 ? dt::bf16 : dt::f32;
  const bool batched = batch > 0;
  const dims src_dims = batched ? dims{batch, m, k} : dims{m, k};
  const dims w_dims = batched ? dims{batch, k, n} : dims{k, n};
  const dims dst_dims = batched ? dims{batch, m, n} : dims{m, n};
  const tag rowmajor = batched ? tag::abc : tag::ab;
  const tag transposed = batched ? tag::acb : tag::ba;
  dnnl::memory::desc src_md(src_dims, in, rowmajor);
  dnnl::memory::desc w_plain_md(w_dims, in, transposed);
  dnnl::memory::desc w_md = packed ? dnnl::memory::desc(w_dims, in, tag::any) : w_plain_md;
  dnnl::memory::desc dst_md(dst_dims, dt::f32, rowmajor);
  dnnl::matmul::desc desc(src_md, w_md, dst_md);
  dnnl::matmul::primitive_desc pd(desc, dnnlEngine());
  DnnlMatmul mm;
  mm.prim = dnnl::matmul(pd);
  mm.impl = pd.impl_info_str();
  mm.src = dnnl::memory(src_md, dnnlEngine(), const_cast<void *>(src_data));
  mm.dst = dnnl::memory(dst_md, dnnlEngine(), dst_data);
  dnnl::memory w_plain(w_plain_md, dnnlEngine(), const_cast<void *>(weights_data));
  if (packed && pd.weights_desc() != w_plain_md) {
    dnnl::stream s(dnnlEngine());
    mm.weights = dnnl::memory(pd.weights_desc(), dnnlEngine());
    dnnl::reorder(w_plain, mm.weights).execute(s, w_plain, mm.weights);
    s.wait();
  } else {
    mm.weights = w_plain;
  }
  return mm;
}

void runDnnl(benchmark::State &state, DnnlMatmul &mm, double flops) {
  dnnl::stream s(dnnlEngine());
  const std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, mm.src}, {DNNL_ARG_WEIGHTS, mm.weights}, {DNNL_ARG_DST, mm.dst}};
  settle();
  for (auto _ : state) {
    mm.prim.execute(s, args);
    s.wait();
  }
  setGflops(state, flops);
  state.SetLabel(mm.impl);
}

void dnnlLinear(benchmark::State &state, int64_t m, Linear l, bool bf16, bool packed) {
  const Operand &x = operand("x", m, l.k);
  const Operand &w = operand("w", l.n, l.k);
  Buffer<float> y = output(static_cast<size_t>(m * l.n));
  const void *xs = bf16 ? static_cast<const void *>(x.bf16.get()) : x.f32.get();
  const void *ws = bf16 ? static_cast<const void *>(w.bf16.get()) : w.f32.get();
  DnnlMatmul mm = makeDnnlMatmul(0, m, l.n, l.k, bf16, packed, xs, ws, y.get());
  runDnnl(state, mm, linearFlops(m, l));
  spotCheck(
      state, x.f32.get(), w.f32.get(), m, l.n, l.k,
      [&](int64_t i, int64_t j) { return y.get()[i * l.n + j]; }, bf16 ? kTolBf16 : kTolF32);
}

void dnnlAttn(benchmark::State &state, int64_t seq, bool bf16) {
  const Operand &q = operand("q", g_heads * seq, kHeadDim);
  const Operand &k = operand("k", g_heads * seq, kHeadDim);
  Buffer<float> s = output(static_cast<size_t>(g_heads * seq * seq));
  const void *qs = bf16 ? static_cast<const void *>(q.bf16.get()) : q.f32.get();
  const void *ks = bf16 ? static_cast<const void *>(k.bf16.get()) : k.f32.get();
  DnnlMatmul mm = makeDnnlMatmul(g_heads, seq, seq, kHeadDim, bf16, false, qs, ks, s.get());
  runDnnl(state, mm, attnFlops(seq));
  {
    const int64_t h = g_heads - 1;
    spotCheck(
        state, q.f32.get() + h * seq * kHeadDim, k.f32.get() + h * seq * kHeadDim, seq, seq,
        kHeadDim, [&](int64_t i, int64_t j) { return s.get()[(h * seq + i) * seq + j]; },
        bf16 ? kTolBf16 : kTolF32);
  }
}

#endif // KILN_HAVE_DNNL

// ---------------------------------------------------------------------------
// Setup

// oneDNN here uses libgomp, which reads OMP_NUM_THREADS when it is loaded,
// before main; set the count through the API instead (found at run time, so
// that the bench needs no -fopenmp).
int setOmpThreads(int threads) {
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  if (auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    set(threads);
  if (auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads")))
    return get();
  return -1;
}

// F16C conversion must be exact: compare with the scalar reference on every
// non-NaN f16 value, both directions.
void checkConversions() {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(all.size());
  halfToFloat(all.data(), f.data(), all.size());
  std::vector<uint16_t> back(all.size());
  floatToHalf(f.data(), back.data(), f.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if ((all[i] & 0x7c00u) == 0x7c00u && (all[i] & 0x3ffu) != 0)
      continue; // NaN
    const float ref = halfToFloatScalar(all[i]);
    if (std::memcmp(&ref, &f[i], sizeof ref) != 0 || back[i] != all[i] ||
        floatToHalfScalar(ref) != all[i]) {
      fprintf(stderr, "f16 conversion mismatch at 0x%04zx\n", i);
      abort();
    }
  }
}

std::string mName(int64_t m) { return "/M:" + std::to_string(m); }

void registerAll() {
  using benchmark::RegisterBenchmark;
  for (const int64_t m : kTokens) {
    for (const Linear &l : kLinears) {
      const std::string suffix = std::string("/") + l.name + mName(m);
      const double flops = linearFlops(m, l);
      configure(RegisterBenchmark(("openblas_f32" + suffix).c_str(), openblasF32, m, l), flops);
      configure(RegisterBenchmark(("f16_sgemm" + suffix).c_str(), f16Sgemm, m, l), flops);
      for (const int threads : {1, g_threads}) {
        RegisterBenchmark(("cvt_f16_f32" + suffix + "/threads:" + std::to_string(threads)).c_str(),
                          convertF16, m, l, threads)
            ->Iterations(5)
            ->UseRealTime()
            ->MeasureProcessCPUTime()
            ->Unit(benchmark::kMillisecond);
        if (g_threads == 1)
          break;
      }
      configure(RegisterBenchmark(("openblas_rows64" + suffix).c_str(), openblasRows, m, l, false),
                flops);
      configure(RegisterBenchmark(("openblas_rows64_epilogue" + suffix).c_str(), openblasRows, m, l,
                                  true),
                flops);
      configure(RegisterBenchmark(("openblas_whole_epilogue" + suffix).c_str(),
                                  openblasWholeEpilogue, m, l),
                flops);
      for (const int64_t block : {int64_t{64}, int64_t{256}})
        configure(RegisterBenchmark(
                      ("openblas_tiles" + std::to_string(block) + "_epilogue" + suffix).c_str(),
                      openblasRowTiles, m, l, block),
                  flops);
#if KILN_HAVE_DNNL
      configure(RegisterBenchmark(("dnnl_f32" + suffix).c_str(), dnnlLinear, m, l, false, false),
                flops);
      configure(
          RegisterBenchmark(("dnnl_f32_packed" + suffix).c_str(), dnnlLinear, m, l, false, true),
          flops);
      if (dnnlHasBf16()) {
        configure(RegisterBenchmark(("dnnl_bf16" + suffix).c_str(), dnnlLinear, m, l, true, false),
                  flops);
        configure(
            RegisterBenchmark(("dnnl_bf16_packed" + suffix).c_str(), dnnlLinear, m, l, true, true),
            flops);
      }
#endif
    }
    // Attention scores: heads x [seq,128] x [128,seq], seq = m.
    const std::string suffix =
        "/attn_scores/H:" + std::to_string(g_heads) + "/seq:" + std::to_string(m);
    const double flops = attnFlops(m);
    configure(RegisterBenchmark(("openblas_f32" + suffix).c_str(), openblasAttn, m), flops);
    configure(RegisterBenchmark(("f16_sgemm" + suffix).c_str(), f16SgemmAttn, m), flops);
#if KILN_HAVE_DNNL
    configure(RegisterBenchmark(("dnnl_f32" + suffix).c_str(), dnnlAttn, m, false), flops);
    if (dnnlHasBf16())
      configure(RegisterBenchmark(("dnnl_bf16" + suffix).c_str(), dnnlAttn, m, true), flops);
#endif
  }
}

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--gemm_flop_budget=", 0) == 0) {
      g_flop_budget = std::atof(arg.c_str() + 19);
    } else if (arg.rfind("--gemm_wait_idle=", 0) == 0) {
      g_wait_idle_s = std::atof(arg.c_str() + 17);
    } else if (arg.rfind("--attn_heads=", 0) == 0) {
      g_heads = std::max<int64_t>(1, std::atoll(arg.c_str() + 13));
    } else {
      benchmark::ReportUnrecognizedArguments(argc, argv);
      return 1;
    }
  }
  g_threads = numCores();
  openblas_set_num_threads(g_threads);
  const int omp_threads = setOmpThreads(g_threads);
  checkConversions();

  benchmark::AddCustomContext("cores", std::to_string(g_threads));
  benchmark::AddCustomContext(
      "openblas", std::string(openblas_get_config()) + " core=" + openblas_get_corename() +
                      " threads=" + std::to_string(openblas_get_num_threads()));
  benchmark::AddCustomContext("f16c", haveF16c() ? "yes" : "no (scalar conversion)");
#if KILN_HAVE_DNNL
  const dnnl_version_t *v = dnnl_version();
  benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) +
                                            "." + std::to_string(v->patch) +
                                            " omp_threads=" + std::to_string(omp_threads));
  char isa[16];
  snprintf(isa, sizeof isa, "0x%x", static_cast<unsigned>(dnnl::get_effective_cpu_isa()));
  benchmark::AddCustomContext(
      "onednn_isa",
      std::string(isa) +
          (dnnlHasBf16() ? " (native bf16: yes)" : " (native bf16: no, bf16 benchmarks skipped)"));
#else
  (void)omp_threads;
  benchmark::AddCustomContext("onednn", "not built (dnnl package not found)");
#endif
  benchmark::AddCustomContext("flop_budget", std::to_string(g_flop_budget));

  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

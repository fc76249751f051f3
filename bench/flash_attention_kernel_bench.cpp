// FlashAttentionScore's host routines alone (kernels/flash_attention_routines):
// the forward and the backward of one attention, causal, N 8 query heads, D
// 64, on buffers made once; in BNSD and (bf16_bsnd) in BSND. The small
// Qwen's attention at the sequence lengths of bench/flash_attention.sh, B 1,
// called on one thread over every row: reported time is the calling
// thread's CPU time, so a busy host slows it less than the wall clock; the
// BLAS runs on that thread alone. B 4 at 256 is the small Qwen's step
// (bench/step_profile.sh): its heads no longer fit in a core's L2; the
// _pool rows run it as the executor does, half the rows on each worker of
// the shared pool, in wall time.
//
//   forward/DT/S/B   kilnFlashAttention, the statistics stored
//   backward/DT/S/B  kilnFlashAttentionGrad
// Counters: GFLOP/s over the causal attention's matmul FLOPs (the forward's
// two, the backward's five with the recomputed scores).
#include <benchmark/benchmark.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include <cblas.h>

#include "ir/dtype.h"
#include "ir/float16.h"
#include "kernels/flash_attention_routines.h"
#include "ops/attention_layout.h"
#include "support/thread_pool.h"

namespace {

using kiln::DType;

constexpr int64_t kHeads = 8, kHeadDim = 64;

// A [B, kHeads, S, kHeadDim] tensor of values in [-1, 1) in `dtype`.
std::vector<uint8_t> randomTensor(DType dtype, int64_t B, int64_t S, uint32_t seed) {
  const int64_t n = B * kHeads * S * kHeadDim;
  std::vector<uint8_t> bytes(static_cast<size_t>(n * kiln::dtypeSize(dtype)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float x = dist(rng);
    if (dtype == DType::F32)
      reinterpret_cast<float *>(bytes.data())[i] = x;
    else
      reinterpret_cast<uint16_t *>(bytes.data())[i] =
          kiln::floatToBFloat16(x, kiln::OverflowMode::InfNan);
  }
  return bytes;
}

// The kernel's rows: the heads (b, n) in BNSD, the positions (b, s) in BSND.
int64_t rowsOf(bool bsnd, int64_t B, int64_t S) { return B * (bsnd ? S : kHeads); }

// The attention arguments after the buffer slots (library_kernels.h).
std::vector<int64_t> attentionArgs(DType dtype, int64_t B, int64_t S, bool bsnd) {
  return {static_cast<int64_t>(dtype),
          B,
          kHeads,
          kHeads,
          S,
          kHeadDim,
          std::bit_cast<int64_t>(0.125),
          1,
          static_cast<int64_t>(bsnd ? kiln::ops::AttentionLayout::BSND
                                    : kiln::ops::AttentionLayout::BNSD),
          rowsOf(bsnd, B, S),
          static_cast<int64_t>(kiln::OverflowMode::InfNan)};
}

double causalMatmulFlops(int64_t B, int64_t S, int matmuls) {
  return matmuls * 2.0 * static_cast<double>(B) * kHeads * kHeadDim * static_cast<double>(S) *
         (S + 1) / 2;
}

// The routine over rows [0, rows): on the calling thread, or (`pool`) split
// in halves, one per worker of the shared pool, as the executor runs it.
template <typename Routine> void runRows(bool pool, int64_t rows, Routine routine) {
  if (!pool) {
    routine(0, rows);
    return;
  }
  kiln::ThreadPool &threads = kiln::ThreadPool::shared();
  const int64_t tasks = threads.size();
  threads.parallelFor(tasks,
                      [&](int64_t t, int) { routine(rows * t / tasks, rows * (t + 1) / tasks); });
}

void forward(benchmark::State &state, DType dtype, bool bsnd, bool pool) {
  const int64_t S = state.range(0), B = state.range(1);
  auto q = randomTensor(dtype, B, S, 1), k = randomTensor(dtype, B, S, 2),
       v = randomTensor(dtype, B, S, 3);
  std::vector<uint8_t> out(q.size());
  std::vector<float> row_max(B * kHeads * S), row_sum(B * kHeads * S);
  void *buffers[] = {q.data(), k.data(), v.data(), out.data(), row_max.data(), row_sum.data()};
  std::vector<int64_t> args = {0, 1, 2, 3, 4, 5};
  const auto tail = attentionArgs(dtype, B, S, bsnd);
  args.insert(args.end(), tail.begin(), tail.end());
  uint32_t status = 0;
  for (auto _ : state)
    runRows(pool, rowsOf(bsnd, B, S), [&](int64_t r0, int64_t r1) {
      kilnFlashAttention(buffers, r0, r1, &status, args.data());
    });
  state.counters["GFLOP/s"] = benchmark::Counter(causalMatmulFlops(B, S, 2) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void backward(benchmark::State &state, DType dtype, bool bsnd, bool pool) {
  const int64_t S = state.range(0), B = state.range(1);
  auto q = randomTensor(dtype, B, S, 1), k = randomTensor(dtype, B, S, 2),
       v = randomTensor(dtype, B, S, 3);
  auto dout = randomTensor(dtype, B, S, 4);
  std::vector<uint8_t> out(q.size()), dq(q.size()), dk(q.size()), dv(q.size());
  std::vector<float> row_max(B * kHeads * S), row_sum(B * kHeads * S);
  std::vector<int64_t> fwd_args = {0, 1, 2, 3, 4, 5};
  const auto tail = attentionArgs(dtype, B, S, bsnd);
  fwd_args.insert(fwd_args.end(), tail.begin(), tail.end());
  void *fwd_buffers[] = {q.data(), k.data(), v.data(), out.data(), row_max.data(), row_sum.data()};
  uint32_t status = 0;
  kilnFlashAttention(fwd_buffers, 0, rowsOf(bsnd, B, S), &status, fwd_args.data());
  void *buffers[] = {q.data(),       k.data(),       v.data(),  out.data(), dout.data(),
                     row_max.data(), row_sum.data(), dq.data(), dk.data(),  dv.data()};
  std::vector<int64_t> args = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  args.insert(args.end(), tail.begin(), tail.end());
  for (auto _ : state)
    runRows(pool, rowsOf(bsnd, B, S), [&](int64_t r0, int64_t r1) {
      kilnFlashAttentionGrad(buffers, r0, r1, &status, args.data());
    });
  state.counters["GFLOP/s"] = benchmark::Counter(causalMatmulFlops(B, S, 5) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void sequenceLengths(benchmark::internal::Benchmark *b) {
  b->Args({256, 1})->Args({512, 1})->Args({2048, 1})->Unit(benchmark::kMillisecond);
  // The small Qwen's step (batch 4 x 256): four times the head data, past a
  // core's L2, as the step's kernel reads it.
  b->Args({256, 4});
}

BENCHMARK_CAPTURE(forward, f32, DType::F32, false, false)->Apply(sequenceLengths);
BENCHMARK_CAPTURE(forward, bf16, DType::BF16, false, false)->Apply(sequenceLengths);
BENCHMARK_CAPTURE(forward, bf16_bsnd, DType::BF16, true, false)->Apply(sequenceLengths);
BENCHMARK_CAPTURE(backward, f32, DType::F32, false, false)->Apply(sequenceLengths);
BENCHMARK_CAPTURE(backward, bf16, DType::BF16, false, false)->Apply(sequenceLengths);
BENCHMARK_CAPTURE(backward, bf16_bsnd, DType::BF16, true, false)->Apply(sequenceLengths);
// On every core, as in the step (wall time).
BENCHMARK_CAPTURE(forward, bf16_bsnd_pool, DType::BF16, true, true)
    ->Args({256, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(backward, bf16_bsnd_pool, DType::BF16, true, true)
    ->Args({256, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace

// One thread throughout, as the executor runs a routine on each of its own
// threads (kernels::useSingleThreadedBlas).
int main(int argc, char **argv) {
  openblas_set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

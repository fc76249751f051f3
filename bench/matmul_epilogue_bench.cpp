// What a fused matmul epilogue costs in kiln's compiled kernels: at Qwen-14B's
// linear-layer shapes, Y[M,N] = X[M,K] @ W[K,N] in f32, compare
//
//   cblas/...        plain cblas_sgemm writing C, OpenBLAS on every core
//                    (openblas_set_num_threads(cores)); the ceiling;
//   kiln_matmul/...  kiln's compiled kernel for a lone MatMul (f32 out);
//   kiln_bias_cast/...   MatMul with bias, then Cast to f16, one group
//                        ("matmul_bias", Intermediates::F32);
//   kiln_scale_cast/...  MatMul, Mul by a broadcast [N] scale, Cast to f16,
//                        one group ("matmul_elemwise", Intermediates::F32);
//   epilogue_only/VARIANT/... the kernel of each variant called directly on
//                        a ready [M, N] f32 accumulator: the epilogue's own
//                        cost (ms and GB/s: accumulator read + output write).
//
// kiln's executor runs OpenBLAS single-threaded (useSingleThreadedBlas) per
// row block on its own thread pool (one thread per core), so the kiln rows
// measure kiln's blocking as well as its epilogue. (Until commit 79f4240 a
// GEMM kernel's row tile was ExecutorOptions::tile_elements / N, 2 to 6 rows
// at these N, and ran at 5-30% of cblas; it is now at least 256 rows, one
// block per thread.)
//
// Compiling (compileKernels + Executor::create) is outside the timed loop;
// only executor->run(inputs) is timed, which includes what run() does
// besides the kernel (copying every input tensor into its value table,
// zero-filling each output, copying the outputs into the returned map).
// Every benchmark reports "GFLOPs" = 2*M*N*K per iteration as a rate, over
// wall time, and runs a fixed number of iterations sized by
// --mm_flop_budget=F (flops per benchmark, default 1.2e11, 1 to 5 iterations).
// The last timed run of each kiln graph is checked (untimed) on sampled
// elements of its output against a dot product. Other counters:
// threads, row_local (1: the epilogue consumes each row block's accumulator
// right after its GEMM, 0: the whole result first), faults
// (minor page faults per run: the fresh pages run()'s input copies and
// output buffers touch).
//
// The CPU column is the whole process's CPU time, so CPU / (Time x cores)
// well below 1 means other processes had the cores (or the work was
// single-threaded). --mm_wait_idle=S waits up to S seconds before each
// benchmark for the machine to be idle; --mm_dump_ir=DIR writes each kiln
// kernel's program and optimised LLVM IR to DIR.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compiler/codegen/kernel_compiler.h"
#include "compiler/codegen/object_compiler.h"
#include "ir/float16.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "kernels/kernel_loader.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "support/thread_pool.h"
#include "target/target.h"

namespace {

using namespace kiln;

double g_flop_budget = 1.2e11;
double g_wait_idle_s = 0; // --mm_wait_idle
std::string g_dump_dir;   // --mm_dump_ir

// Lets the previous benchmark's spinning BLAS threads go to sleep; with
// --mm_wait_idle=S also waits up to S seconds for the machine to be idle.
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  bench::waitForIdle(g_wait_idle_s);
}

using bench::cores;
using bench::minorFaults;

struct MmShape {
  const char *name;
  int64_t m, k, n;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

enum class Variant { Lone, BiasCast, ScaleCast };

const char *variantName(Variant v) {
  switch (v) {
  case Variant::Lone:
    return "matmul";
  case Variant::BiasCast:
    return "bias_cast";
  case Variant::ScaleCast:
    return "scale_cast";
  }
  return "?";
}

// Values in [-1, 1), deterministic per seed.
void fillRandom(float *p, int64_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 2147483648.0f);
  }
}

Tensor randomTensor(Shape shape, uint64_t seed) {
  Tensor t(TensorType{DType::F32, std::move(shape)});
  fillRandom(t.dataAs<float>(), t.numElements(), seed);
  return t;
}

// The operands of one shape, kept while consecutive benchmarks use it.
struct Operands {
  int64_t m = 0, k = 0, n = 0;
  Tensor a, w, bias, scale;
};

Operands &operandsFor(const MmShape &s) {
  static std::unique_ptr<Operands> current;
  if (!current || current->m != s.m || current->k != s.k || current->n != s.n) {
    current.reset(); // free the old ones first
    auto o = std::make_unique<Operands>();
    o->m = s.m;
    o->k = s.k;
    o->n = s.n;
    o->a = randomTensor({s.m, s.k}, 1);
    o->w = randomTensor({s.k, s.n}, 2);
    o->bias = randomTensor({s.n}, 3);
    o->scale = randomTensor({s.n}, 4);
    current = std::move(o);
  }
  return *current;
}

int iterationsFor(const MmShape &s) {
  const double it = std::round(g_flop_budget / s.flops());
  return static_cast<int>(std::clamp(it, 1.0, 5.0));
}

void reportFlops(benchmark::State &state, const MmShape &s) {
  state.counters["GFLOPs"] = benchmark::Counter(
      s.flops() * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------
// OpenBLAS on every core

void BM_cblas(benchmark::State &state, MmShape s) {
  Operands &o = operandsFor(s);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  openblas_set_num_threads(cores());
  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m),
                static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, o.a.dataAs<float>(),
                static_cast<int>(s.k), o.w.dataAs<float>(), static_cast<int>(s.n), 0.0f, c.data(),
                static_cast<int>(s.n));
  };
  sgemm(); // warm up: OpenBLAS's threads and buffers, C's pages
  settle();
  for (auto _ : state) {
    sgemm();
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  reportFlops(state, s);
  state.counters["threads"] = cores();
}

// ---------------------------------------------------------------------------
// kiln

struct Compiled {
  std::unique_ptr<Graph> graph; // the executor refers to it
  std::unique_ptr<runtime::Executor> executor;
  ops::TensorMap inputs;
};

Expected<Compiled> compile(const MmShape &s, Variant v, const runtime::ExecutorOptions &options) {
  Operands &o = operandsFor(s);
  Compiled c;
  c.graph = std::make_unique<Graph>(std::string("mm_") + variantName(v));
  Graph &g = *c.graph;
  ValueId a = g.addInput("a", {DType::F32, {s.m, s.k}}, InputRole::Data);
  ValueId w = g.addInput("w", {DType::F32, {s.k, s.n}}, InputRole::Parameter);
  c.inputs["a"] = o.a;
  c.inputs["w"] = o.w;
  ops::OpBuilder b(g);
  auto scope = b.scope("layer");
  ValueId y = kNoValue;
  std::string kind;
  switch (v) {
  case Variant::Lone:
    y = b.create("MatMul", "proj", {a, w});
    break;
  case Variant::BiasCast: {
    ValueId bias = g.addInput("bias", {DType::F32, {s.n}}, InputRole::Parameter);
    c.inputs["bias"] = o.bias;
    ValueId mm = b.create("MatMul", "proj", {a, w, bias});
    y = b.create("Cast", "cast", {mm}, {{"dtype", DType::F16}});
    kind = "matmul_bias";
    break;
  }
  case Variant::ScaleCast: {
    ValueId scale = g.addInput("scale", {DType::F32, {s.n}}, InputRole::Parameter);
    c.inputs["scale"] = o.scale;
    ValueId mm = b.create("MatMul", "proj", {a, w});
    ValueId scaled = b.create("Mul", "scale", {mm, scale});
    y = b.create("Cast", "cast", {scaled}, {{"dtype", DType::F16}});
    kind = "matmul_elemwise";
    break;
  }
  }
  if (!b.status().isOk())
    return Error(b.status().message());
  g.addOutput("y", y);
  if (!kind.empty()) {
    GroupId id = g.addGroup(
        FusionGroup{"fused.layer.proj", kind, "matmul_epilogue_bench", Intermediates::F32});
    for (size_t n = 0; n < g.numNodes(); ++n)
      g.node(static_cast<NodeId>(n)).group = id;
  }
  KILN_ASSIGN_OR_RETURN(target::Target target, target::loadTarget("ascend910b"));
  codegen::KernelCompileFailure failure;
  auto kernels = codegen::compileKernels(g, target, {}, &failure);
  if (!kernels)
    return Error(kernels.message());
  if (kernels->kernels.size() != 1)
    return Error("expected one kernel, got " + std::to_string(kernels->kernels.size()));
  KILN_ASSIGN_OR_RETURN(c.executor, runtime::Executor::create(g, std::move(*kernels), options));
  return c;
}

// Sampled elements of `y` against a dot product and the variant's epilogue.
std::string check(const MmShape &s, Variant v, const Tensor &y) {
  Operands &o = operandsFor(s);
  const float *a = o.a.dataAs<float>(), *w = o.w.dataAs<float>();
  uint64_t r = 12345;
  for (int sample = 0; sample < 32; ++sample) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t i = static_cast<int64_t>((r >> 33) % static_cast<uint64_t>(s.m));
    const int64_t j = static_cast<int64_t>((r >> 13) % static_cast<uint64_t>(s.n));
    double want = 0, scale = 0;
    for (int64_t p = 0; p < s.k; ++p) {
      want += static_cast<double>(a[i * s.k + p]) * w[p * s.n + j];
      scale += std::fabs(static_cast<double>(a[i * s.k + p]) * w[p * s.n + j]);
    }
    if (v == Variant::BiasCast)
      want += o.bias.dataAs<float>()[j];
    if (v == Variant::ScaleCast)
      want *= o.scale.dataAs<float>()[j];
    const double got = y.getFloat(i * s.n + j);
    const double tol = (v == Variant::Lone ? 1e-5 : 2e-3) * (scale + std::fabs(want)) + 1e-3;
    if (!(std::fabs(got - want) <= tol)) {
      char buf[200];
      snprintf(buf, sizeof buf, "y[%lld,%lld] = %g, expected %g", static_cast<long long>(i),
               static_cast<long long>(j), got, want);
      return buf;
    }
  }
  return {};
}

void BM_kiln(benchmark::State &state, MmShape s, Variant v) {
  auto c = compile(s, v, {});
  if (!c) {
    state.SkipWithError(c.message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  openblas_set_num_threads(1); // as Executor::create leaves it
  const executable::CompiledKernel &kernel = c->executor->kernels().kernels[0];
  if (!g_dump_dir.empty()) {
    auto build = codegen::buildKernel(*c->graph, kernel.spec); // the program, built again
    if (!build) {
      state.SkipWithError(build.message().c_str());
      return;
    }
    std::string ir;
    auto object = codegen::compileKernelObject(build->program, kernel.symbol, {}, &ir);
    std::string name = std::string(variantName(v)) + "_" + s.name;
    std::replace(name.begin(), name.end(), '/', '_');
    std::ofstream out(g_dump_dir + "/" + name + ".ll");
    out << "; " << kernel.spec.name << " (" << kernel.spec.kind << "), accumulator row-local "
        << kernel.launch.accumulator_row_local << "\n; " << codegen::programToString(build->program)
        << "\n"
        << ir;
  }
  settle();
  const double faults = minorFaults();
  benchmark::IterationCount done = 0;
  for (auto _ : state) {
    auto out = c->executor->run(c->inputs);
    if (!out) {
      state.SkipWithError(out.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(out->size());
    if (++done == state.max_iterations) { // check the last result, untimed
      state.PauseTiming();
      const std::string bad = check(s, v, out->at("y"));
      if (!bad.empty())
        state.SkipWithError(bad.c_str());
      state.ResumeTiming();
    }
  }
  reportFlops(state, s);
  state.counters["threads"] = cores();
  state.counters["faults"] =
      benchmark::Counter(minorFaults() - faults, benchmark::Counter::kAvgIterations);
  state.counters["row_local"] = kernel.launch.accumulator_row_local ? 1 : 0;
}

// The epilogue alone: the same compiled kernel called directly (loaded with
// KernelLoader) on a ready f32 accumulator of the whole [M, N] result, in
// tiles of ExecutorOptions::tile_elements / N rows on a ThreadPool
// (one thread per core). The accumulator is read from memory, as in the
// executor, where each thread's row block (256+ rows x N f32) outgrows L2
// before its epilogue runs.
void BM_epilogue(benchmark::State &state, MmShape s, Variant v) {
  auto c = compile(s, v, {});
  if (!c) {
    state.SkipWithError(c.message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  const Graph &g = *c->graph;
  const executable::CompiledKernel &kernel = c->executor->kernels().kernels[0];
  const executable::KernelLaunch &launch = kernel.launch;
  auto loader = kernels::KernelLoader::create();
  if (!loader) {
    state.SkipWithError(loader.message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  auto entry = (*loader)->load(c->executor->kernels().objects[kernel.object], kernel.symbol);
  if (!entry) {
    state.SkipWithError(entry.message().c_str());
    for (auto _ : state) {
    }
    return;
  }
  std::vector<void *> buffers;
  double bytes = 0;
  for (ValueId value : kernel.spec.inputs)
    for (const GraphInput &in : g.inputs())
      if (in.value == value) {
        buffers.push_back(c->inputs.at(in.name).data());
        if (in.name == "bias" || in.name == "scale")
          bytes += static_cast<double>(c->inputs.at(in.name).byteSize());
      }
  std::vector<float> acc(static_cast<size_t>(s.m * s.n));
  fillRandom(acc.data(), s.m * s.n, 5);
  buffers.push_back(acc.data());
  Tensor out(g.type(g.outputs()[0].value));
  buffers.push_back(out.data());
  bytes += static_cast<double>(acc.size() * sizeof(float) + out.byteSize());

  ThreadPool pool;
  std::vector<std::vector<uint64_t>> scratch(
      static_cast<size_t>(pool.size()), std::vector<uint64_t>(static_cast<size_t>(std::max<int64_t>(
                                            1, launch.scratch_elements_per_row))));
  const int64_t rows = launch.rows;
  const int64_t rows_per_tile =
      std::max<int64_t>(1, runtime::ExecutorOptions{}.tile_elements / s.n);
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  auto epilogue = [&] {
    pool.parallelFor(tiles, [&](int64_t t, int worker) {
      const int64_t r0 = t * rows_per_tile, r1 = std::min(rows, r0 + rows_per_tile);
      uint32_t status = 0;
      (*entry)(buffers.data(), scratch[worker].data(), r0, r1, &status);
    });
  };
  epilogue(); // warm
  settle();
  for (auto _ : state) {
    epilogue();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["threads"] = pool.size();
}

void registerAll() {
  // Qwen-14B: hidden 5120, 40 heads, intermediate 13696 (w1 and w2 share a shape).
  const MmShape shapes[] = {
      {"c_attn/M512", 512, 5120, 15360},       {"attn_c_proj/M512", 512, 5120, 5120},
      {"mlp_w1/M512", 512, 5120, 13696},       {"mlp_c_proj/M512", 512, 13696, 5120},
      {"attn_c_proj/M2048", 2048, 5120, 5120},
  };
  for (const MmShape &s : shapes) {
    const int iters = iterationsFor(s);
    auto reg = [&](const std::string &name, auto fn) {
      benchmark::RegisterBenchmark(name.c_str(), fn)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->Iterations(iters);
    };
    const std::string tag = s.name;
    reg("cblas/" + tag, [s](benchmark::State &st) { BM_cblas(st, s); });
    reg("kiln_matmul/" + tag, [s](benchmark::State &st) { BM_kiln(st, s, Variant::Lone); });
    reg("kiln_bias_cast/" + tag, [s](benchmark::State &st) { BM_kiln(st, s, Variant::BiasCast); });
    reg("kiln_scale_cast/" + tag,
        [s](benchmark::State &st) { BM_kiln(st, s, Variant::ScaleCast); });
    for (Variant v : {Variant::Lone, Variant::BiasCast, Variant::ScaleCast})
      benchmark::RegisterBenchmark(
          ("epilogue_only/" + std::string(variantName(v)) + "/" + tag).c_str(),
          [s, v](benchmark::State &st) { BM_epilogue(st, s, v); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->MinTime(0.1);
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<char *> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && arg.rfind("--mm_flop_budget=", 0) == 0)
      g_flop_budget = std::atof(arg.c_str() + 17);
    else if (i > 0 && arg.rfind("--mm_wait_idle=", 0) == 0)
      g_wait_idle_s = std::atof(arg.c_str() + 15);
    else if (i > 0 && arg.rfind("--mm_dump_ir=", 0) == 0)
      g_dump_dir = arg.substr(13);
    else
      rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data()))
    return 1;
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

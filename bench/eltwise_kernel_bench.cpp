// kiln's generated elementwise (vector) kernels in GB/s, against a memcpy of
// the same bytes. Every case is a small graph compiled for ascend910b with
// codegen::compileKernels and run on the host; bytes are what the kernels
// must read plus what they write (each input and output once), so a kernel
// that streams at memory speed matches the memcpy rows.
//
// Sizes: "16M" is 16,773,120 elements (3276 x 5120: Qwen-14B's hidden size;
// softmax [8192, 2048] = 16,777,216), "1M" is 1,044,480 (204 x 5120; softmax
// [512, 2048] = 1,048,576).
//
//   memcpy_1t/DT/SIZE      std::memcpy of one tensor of that dtype and size,
//                          one thread; bytes = 2 x the tensor (read + write)
//   memcpy_mt/DT/SIZE      the same split over a ThreadPool as large as the
//                          executor's (one thread per core)
//   <mode>/<case>/DT/SIZE  a kiln kernel (or two), where mode is
//     run      executor->run(inputs) after Executor::create, everything
//              run() does: it also copies each input tensor into its value
//              table, zero-fills each output it allocates and copies the
//              outputs into the returned map
//     kernel   the same compiled kernels loaded with KernelLoader and called
//              directly on buffers allocated once, rows split into tiles on a
//              ThreadPool exactly as Executor::launch does: the
//              generated code alone
//
// Cases ([T, 5120] unless said, T = 3276 or 204):
//   mul_exp      y = Exp(Mul(x, s)), s a scalar input: two kernels, unfused
//                (bytes: both kernels, 4 x the tensor)
//   add          Add(x, y)
//   bias_add     Add(x, bias[5120]) (broadcast)
//   fused4       ((x * y + bias) * x) - y, one "eltwise" group, Storage
//                intermediates
//   cast         Cast f32 -> f16
//   softmax      Softmax over rows of 2048, f32
//   attn_softmax Div by a scalar, CausalMask, Softmax as one "softmax" group
//                (F32 intermediates), [heads, 256, 256], 8 heads (1M: 0.5M
//                elements) or 32 (16M: 2M), f32
//   transpose    [1, T, 40, 128] -> [1, 40, T, 128] (attention's head split)
//   add_1d       Add(x, y) on [T * 5120] vectors, f32 (diagnostic: a 1-D
//                tensor is one row to the executor)
//
// Counters: kernels (kernels in the graph), faults (run mode: minor page
// faults per run, i.e. fresh pages the executor's per-run allocations touch).
//
// Time is wall time; the CPU column is the whole process's CPU time, so
// CPU / (Time x cores) well below 1 on a multi-threaded row means other
// processes had the cores. --eltwise_wait_idle=S waits up to S seconds before
// each benchmark for the machine to be idle; --eltwise_dump_ir=DIR writes each
// kernel's optimised LLVM IR to DIR/<case>.<k>.ll (the IR that was compiled).
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "bench/eltwise_cases.h"
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
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

double g_wait_idle_s = 0;
std::string g_dump_dir;

using namespace kiln::bench;

void settle() { bench::waitForIdle(g_wait_idle_s); }

// A compiled case: the graph, its inputs, the executor, and the same kernels
// loaded for direct calls on buffers allocated once.
struct Case {
  CaseKey key;
  std::unique_ptr<Graph> graph;
  ops::TensorMap inputs;
  double bytes = 0; // read + written per run
  std::unique_ptr<runtime::Executor> executor;
  // Direct calls.
  codegen::CompiledKernels kernels;
  std::unique_ptr<kernels::KernelLoader> loader;
  std::vector<kernels::KernelEntry> entries;
  std::vector<Tensor> values; // every value of the graph, allocated once
  std::unique_ptr<ThreadPool> pool;
  std::vector<std::vector<uint64_t>> scratch; // per worker
  std::string error;
};

std::string dumpIr(const Case &c) {
  for (size_t k = 0; k < c.kernels.kernels.size(); ++k) {
    const codegen::CompiledKernel &kernel = c.kernels.kernels[k];
    auto build = codegen::buildKernel(*c.graph, kernel.spec); // the program, built again
    if (!build)
      return build.message();
    std::string ir;
    auto object = codegen::compileKernelObject(build->program, kernel.symbol, {}, &ir);
    if (!object)
      return object.message();
    std::string name = c.key.name();
    std::replace(name.begin(), name.end(), '/', '_');
    std::ofstream out(g_dump_dir + "/" + name + "." + std::to_string(k) + ".ll");
    out << "; kernel " << kernel.spec.name << " (" << kernel.spec.kind << "), rows "
        << build->program.rows() << ", outer_rank " << build->program.outer_rank
        << "\n; program:\n";
    std::string program = codegen::programToString(build->program);
    size_t start = 0;
    while (start < program.size()) {
      size_t end = program.find('\n', start);
      if (end == std::string::npos)
        end = program.size();
      out << "; " << program.substr(start, end - start) << "\n";
      start = end + 1;
    }
    out << ir;
  }
  return {};
}

// One launch of kernel `index` over all its rows, tiled as Executor::launch.
void launchDirect(Case &c, size_t index) {
  const codegen::CompiledKernel &kernel = c.kernels.kernels[index];
  std::vector<void *> buffers;
  for (ValueId v : kernel.spec.inputs)
    buffers.push_back(c.values[v].data());
  for (ValueId v : kernel.spec.outputs)
    buffers.push_back(c.values[v].data());
  const int64_t rows = kernel.launch.rows;
  if (rows == 0)
    return;
  const int64_t rows_per_tile =
      std::max<int64_t>(1, runtime::ExecutorOptions{}.tile_elements / kernel.launch.row_elements);
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const kernels::KernelEntry entry = c.entries[index];
  c.pool->parallelFor(tiles, [&](int64_t t, int worker) {
    const int64_t r0 = t * rows_per_tile, r1 = std::min(rows, r0 + rows_per_tile);
    uint32_t status = 0;
    entry(buffers.data(), c.scratch[worker].data(), r0, r1, &status);
  });
}

void runDirect(Case &c) {
  for (size_t k = 0; k < c.entries.size(); ++k)
    launchDirect(c, k);
}

std::unique_ptr<Case> makeCase(const CaseKey &key) {
  auto c = std::make_unique<Case>();
  c->key = key;
  c->graph = std::make_unique<Graph>("bench_" + std::string(opName(key.op)));
  Graph &g = *c->graph;
  auto bytes = buildGraph(key, g);
  if (!bytes) {
    c->error = bytes.message();
    return c;
  }
  c->bytes = *bytes;
  uint64_t seed = 1;
  for (const GraphInput &in : g.inputs()) {
    // The scalar of mul_exp stays small so that Exp does not overflow.
    const bool scalar = g.type(in.value).shape.empty();
    c->inputs[in.name] =
        randomTensor(g.type(in.value), seed++, scalar ? 0.5f : -2.0f, scalar ? 0.6f : 2.0f);
  }
  auto target = target::loadTarget("ascend910b");
  if (!target) {
    c->error = target.message();
    return c;
  }
  auto kernels = codegen::compileKernels(g, *target, {});
  if (!kernels) {
    c->error = kernels.message();
    return c;
  }
  c->kernels = *kernels; // a copy for the direct calls
  for (const codegen::CompiledKernel &k : c->kernels.kernels)
    if (k.gemm) {
      c->error = "unexpected GEMM kernel";
      return c;
    }
  auto executor = runtime::Executor::create(g, std::move(*kernels));
  if (!executor) {
    c->error = executor.message();
    return c;
  }
  c->executor = std::move(*executor);

  auto loader = kernels::KernelLoader::create();
  if (!loader) {
    c->error = loader.message();
    return c;
  }
  c->loader = std::move(*loader);
  for (const codegen::CompiledKernel &k : c->kernels.kernels) {
    auto entry = c->loader->load(c->kernels.objects[k.object], k.symbol);
    if (!entry) {
      c->error = entry.message();
      return c;
    }
    c->entries.push_back(*entry);
  }
  c->values.resize(g.numValues());
  for (const GraphInput &in : g.inputs())
    c->values[in.value] = c->inputs.at(in.name);
  int64_t scratch_slots = 0;
  for (const codegen::CompiledKernel &k : c->kernels.kernels) {
    for (ValueId v : k.spec.outputs)
      if (c->values[v].byteSize() == 0)
        c->values[v] = Tensor(g.type(v));
    scratch_slots = std::max(scratch_slots, k.launch.scratch_elements_per_row);
  }
  c->pool = std::make_unique<ThreadPool>();
  c->scratch.assign(c->pool->size(), std::vector<uint64_t>(static_cast<size_t>(scratch_slots)));

  // The direct calls must compute what run() does, bit for bit.
  auto out = c->executor->run(c->inputs);
  if (!out) {
    c->error = out.message();
    return c;
  }
  runDirect(*c);
  const Tensor &want = out->at("y");
  const Tensor &got = c->values[g.outputs()[0].value];
  if (!(want.type() == got.type()) || std::memcmp(want.data(), got.data(), want.byteSize()) != 0) {
    c->error = "direct kernel calls differ from executor->run";
    return c;
  }
  if (!g_dump_dir.empty())
    c->error = dumpIr(*c);
  return c;
}

// The case of the running benchmark, kept while consecutive benchmarks use it.
Case &caseFor(const CaseKey &key) {
  static std::unique_ptr<Case> current;
  if (!current || !(current->key == key)) {
    current.reset(); // free the previous one's memory first
    current = makeCase(key);
  }
  return *current;
}

void skip(benchmark::State &state, const std::string &why) {
  state.SkipWithError(why.c_str());
  for (auto _ : state) {
  }
}

void BM_run(benchmark::State &state, CaseKey key) {
  Case &c = caseFor(key);
  if (!c.error.empty())
    return skip(state, c.error);
  settle();
  const double faults = minorFaults();
  for (auto _ : state) {
    auto out = c.executor->run(c.inputs);
    if (!out) {
      state.SkipWithError(out.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(out->size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(c.bytes) * state.iterations());
  state.counters["kernels"] = static_cast<double>(c.kernels.kernels.size());
  state.counters["faults"] =
      benchmark::Counter(minorFaults() - faults, benchmark::Counter::kAvgIterations);
}

void BM_kernel(benchmark::State &state, CaseKey key) {
  Case &c = caseFor(key);
  if (!c.error.empty())
    return skip(state, c.error);
  runDirect(c); // warm
  settle();
  for (auto _ : state) {
    runDirect(c);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(c.bytes) * state.iterations());
  state.counters["kernels"] = static_cast<double>(c.kernels.kernels.size());
}

// ---------------------------------------------------------------------------
// memcpy baselines

// A buffer copied in `threads` contiguous, cache-line aligned shares on a
// thread pool, as the executor runs a kernel's tiles.
void parallelCopy(ThreadPool &pool, int threads, char *dst, const char *src, size_t bytes) {
  const size_t chunk = (bytes / threads + 63) / 64 * 64;
  pool.parallelFor(threads, [&](int64_t t, int) {
    const size_t begin = std::min(bytes, chunk * static_cast<size_t>(t));
    const size_t end = std::min(bytes, begin + chunk);
    if (end > begin)
      std::memcpy(dst + begin, src + begin, end - begin);
  });
}

void BM_memcpy(benchmark::State &state, size_t bytes, int threads) {
  std::vector<char> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; i += 4096)
    src[i] = static_cast<char>(i >> 12);
  ThreadPool pool(threads);
  parallelCopy(pool, threads, dst.data(), src.data(), bytes); // warm
  settle();
  for (auto _ : state) {
    parallelCopy(pool, threads, dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(2 * bytes) * state.iterations());
  state.counters["threads"] = threads;
}

void registerAll() {
  const Op ops_both[] = {Op::MulExp, Op::Add, Op::BiasAdd, Op::Fused4, Op::Transpose};
  auto configure = [](benchmark::internal::Benchmark *b, bool big) {
    b->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MeasureProcessCPUTime()
        ->MinTime(big ? 0.3 : 0.1);
  };
  for (bool big : {true, false}) {
    const int64_t elements = tokens(big) * kHidden;
    for (DType dt : {DType::F32, DType::F16}) {
      const std::string tail =
          std::string(dt == DType::F32 ? "f32" : "f16") + (big ? "/16M" : "/1M");
      const size_t bytes = static_cast<size_t>(elements * dtypeSize(dt));
      configure(
          benchmark::RegisterBenchmark(("memcpy_1t/" + tail).c_str(),
                                       [bytes](benchmark::State &st) { BM_memcpy(st, bytes, 1); }),
          big);
      configure(benchmark::RegisterBenchmark(
                    ("memcpy_mt/" + tail).c_str(),
                    [bytes](benchmark::State &st) { BM_memcpy(st, bytes, cores()); }),
                big);
      std::vector<Op> ops(std::begin(ops_both), std::end(ops_both));
      if (dt == DType::F32) {
        ops.push_back(Op::Cast);
        ops.push_back(Op::Softmax);
        ops.push_back(Op::AttnSoftmax);
        ops.push_back(Op::Add1d);
      }
      for (Op op : ops) {
        const CaseKey key{op, dt, big};
        configure(benchmark::RegisterBenchmark(("run/" + key.name()).c_str(),
                                               [key](benchmark::State &st) { BM_run(st, key); }),
                  big);
        configure(benchmark::RegisterBenchmark(("kernel/" + key.name()).c_str(),
                                               [key](benchmark::State &st) { BM_kernel(st, key); }),
                  big);
      }
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<char *> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && arg.rfind("--eltwise_wait_idle=", 0) == 0)
      g_wait_idle_s = std::atof(arg.c_str() + 20);
    else if (i > 0 && arg.rfind("--eltwise_dump_ir=", 0) == 0)
      g_dump_dir = arg.substr(18);
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

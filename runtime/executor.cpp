#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ir/float_status.h"
#include "kernels/gemm.h"
#include "kernels/row_sums.h"
#include "runtime/buffer_donation.h"
#include "runtime/dnnl_blocks.h"

namespace kiln::runtime {

Executor::Executor(const Graph &graph, executable::Executable kernels,
                   const ExecutorOptions &options)
    : graph_(graph), kernels_(std::move(kernels)), options_(options),
      own_pool_(options.threads > 0 ? std::make_unique<ThreadPool>(options.threads) : nullptr),
      pool_(own_pool_ ? *own_pool_ : ThreadPool::shared()), scratch_(pool_.size()),
      acc_tiles_(pool_.size()) {}

Expected<std::unique_ptr<Executor>> Executor::create(const Graph &graph,
                                                     executable::Executable kernels,
                                                     const ExecutorOptions &options) {
  std::unique_ptr<Executor> ex(new Executor(graph, std::move(kernels), options));
  KILN_ASSIGN_OR_RETURN(ex->loader_, kernels::KernelLoader::create());
  for (const executable::CompiledKernel &k : ex->kernels_.kernels) {
    if (k.host) {
      ex->entries_.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(kernels::KernelEntry entry,
                          ex->loader_->load(ex->kernels_.objects[k.object], k.symbol, k.spec.name));
    ex->entries_.push_back(entry);
  }
  std::vector<executable::KernelSpec> specs;
  for (const executable::CompiledKernel &k : ex->kernels_.kernels) {
    ex->is_alias_.push_back(executable::aliasesItsInput(graph, k.spec));
    specs.push_back(k.spec);
  }
  executable::Lifetimes lifetimes;
  lifetimes.input_outside = options.input_in_place;
  if (!lifetimes.input_outside)
    lifetimes.input_outside = [](const GraphInput &) { return true; };
  lifetimes.output_leaves = options.output_leaves;
  ex->plan_ = executable::planMemory(graph, specs, executable::kDefaultBufferAlignment, lifetimes);
  std::unordered_map<std::string_view, int64_t> offsets;
  for (const executable::BufferPlacement &b : ex->plan_.buffers)
    offsets[b.value] = b.offset;
  for (ValueId v = 0; v < static_cast<ValueId>(graph.numValues()); ++v) {
    ex->value_names_.push_back(graph.valueName(v));
    auto at = offsets.find(ex->value_names_.back());
    ex->offset_.push_back(at == offsets.end() ? -1 : at->second);
  }
  ex->arena_name_ = graph.name() + " arena";
  ex->last_use_kernel_.assign(graph.numValues(), -1);
  for (size_t i = 0; i < ex->kernels_.kernels.size(); ++i)
    for (ValueId v : ex->kernels_.kernels[i].spec.inputs)
      ex->last_use_kernel_[v] = static_cast<ValueId>(i);
  ex->leave_after_.resize(ex->kernels_.kernels.size());
  for (const GraphOutput &out : graph.outputs()) {
    if (options.output_leaves && options.output_leaves(out)) {
      // After its last reader, or the kernel that made it.
      ValueId at = ex->last_use_kernel_[out.value];
      for (size_t i = 0; i < ex->kernels_.kernels.size(); ++i)
        for (ValueId v : ex->kernels_.kernels[i].spec.outputs)
          if (v == out.value)
            at = std::max(at, static_cast<ValueId>(i));
      if (at >= 0)
        ex->leave_after_[at].push_back(out.value);
    }
    ex->last_use_kernel_[out.value] = static_cast<ValueId>(ex->kernels_.kernels.size());
  }
  ex->over_input_ = donatableInputs(graph, ex->kernels_, ex->offset_, ex->last_use_kernel_);
  kernels::useSingleThreadedBlas(); // tiles are the parallelism
  return ex;
}

namespace {

// One rank's values during a run, its arena, and the inputs it counts on
// its device.
struct RankRun {
  RankRun(const Graph &g, const std::vector<std::string> &n, DeviceMemory *m)
      : graph(g), names(n), memory(m), values(g.numValues()), owned(g.numValues(), 0) {}

  // The arena and the inputs outside it that the device does not hold
  // (weights, optimizer state and gradients the caller counts already), all
  // from the start. `offsets`: per value, its place in the arena or -1.
  Status begin(const std::string &arena_name, int64_t arena_bytes,
               const std::vector<int64_t> &offsets) {
    if (!memory)
      return Status::ok();
    KILN_RETURN_IF_ERROR(memory->allocate(arena_name, arena_bytes));
    arena_counted = true;
    for (const GraphInput &in : graph.inputs()) {
      if (offsets[in.value] >= 0 || memory->holds(names[in.value]))
        continue;
      const TensorType &t = graph.type(in.value);
      KILN_RETURN_IF_ERROR(memory->allocate(
          names[in.value], numElements(t.shape) * static_cast<int64_t>(dtypeSize(t.dtype))));
      owned[in.value] = 1;
    }
    return Status::ok();
  }
  void release(ValueId v) {
    if (owned[v])
      memory->release(names[v]);
    owned[v] = 0;
  }
  // The arena goes with the results (they leave the device), and so do the
  // inputs counted outside it that nobody read.
  void end(const std::string &arena_name) {
    for (const GraphInput &in : graph.inputs())
      release(in.value);
    if (arena_counted)
      memory->release(arena_name);
    arena_counted = false;
  }

  const Graph &graph;
  const std::vector<std::string> &names;
  DeviceMemory *memory;
  std::vector<Tensor> values;
  std::vector<char> owned; // inputs counted by this run
  std::shared_ptr<uint8_t[]> arena;
  bool arena_counted = false;
};

} // namespace

Expected<ops::TensorMap> Executor::run(const ops::TensorMap &inputs, DeviceMemory *memory,
                                       FloatStatus *status) {
  KILN_ASSIGN_OR_RETURN(std::vector<ops::TensorMap> outputs,
                        runGroup({&inputs}, {memory}, {status}));
  return std::move(outputs.front());
}

Expected<ops::TensorMap> Executor::runDonating(ops::TensorMap inputs, DeviceMemory *memory,
                                               FloatStatus *status) {
  donated_ = options_.after_kernel ? nullptr : &inputs;
  auto outputs = runGroup({&inputs}, {memory}, {status});
  donated_ = nullptr;
  if (!outputs)
    return outputs.error();
  return std::move(outputs->front());
}

Expected<std::vector<ops::TensorMap>>
Executor::runGroup(const std::vector<const ops::TensorMap *> &inputs,
                   const std::vector<DeviceMemory *> &memory,
                   const std::vector<FloatStatus *> &status) {
  const size_t ranks = inputs.size();
  auto raise = [&](size_t r, uint32_t bits) {
    if (bits && r < status.size() && status[r])
      status[r]->raise(bits);
  };
  Profiler *profiler = profile_.profiler;
  auto device = [&](size_t r) { return r < profile_.devices.size() ? profile_.devices[r] : 0; };
  auto hostWork = [&](size_t r, const char *what, Profiler::Clock::time_point start) {
    if (profiler)
      profiler->host(profile_.step, device(r), what, start, Profiler::Clock::now());
  };
  std::vector<RankRun> runs;
  runs.reserve(ranks);
  std::vector<std::shared_ptr<uint8_t[]>> arenas;
  for (size_t r = 0; r < ranks; ++r) {
    const auto start = Profiler::Clock::now();
    runs.emplace_back(graph_, value_names_, r < memory.size() ? memory[r] : nullptr);
    KILN_RETURN_IF_ERROR(ops::bindGraphInputs(graph_, *inputs[r], runs[r].values));
    if (donated_)
      donated_->clear(); // the run's values hold the inputs alone
    KILN_RETURN_IF_ERROR(runs[r].begin(arena_name_, plan_.peak_bytes, offset_));
    runs[r].arena = takeArena();
    arenas.push_back(runs[r].arena);
    for (const GraphInput &in : graph_.inputs()) // received: into the arena
      if (offset_[in.value] >= 0) {
        Tensor &value = runs[r].values[in.value];
        Tensor placed = place(in.value, runs[r].arena);
        copyBytes(placed, value);
        value = std::move(placed);
      }
    hostWork(r, "bind inputs", start);
  }
  std::vector<std::vector<Tensor> *> group;
  for (RankRun &run : runs)
    group.push_back(&run.values);
  auto onRank = [&](size_t r, Status s) {
    return ranks == 1 || s ? s : s.error().withContext("tensor-parallel rank " + std::to_string(r));
  };
  // A kernel's time on a rank includes the executor's bookkeeping around it
  // (releasing its inputs' last use, copying leaving outputs off).
  for (size_t k = 0; k < kernels_.kernels.size(); ++k) {
    const executable::CompiledKernel &kernel = kernels_.kernels[k];
    auto timed = [&](size_t r, Profiler::Clock::time_point start) {
      if (profiler)
        profiler->kernel(profile_.step, device(r), profile_.program, k, start,
                         Profiler::Clock::now());
    };
    auto finish = [&](size_t r) -> Status {
      std::vector<Tensor> &values = runs[r].values;
      if (options_.after_kernel)
        KILN_RETURN_IF_ERROR(onRank(r, options_.after_kernel(k, values)));
      for (ValueId v : kernel.spec.inputs)
        if (last_use_kernel_[v] == static_cast<ValueId>(k)) {
          values[v] = Tensor();
          runs[r].release(v);
        }
      for (ValueId v : leave_after_[k])
        values[v] = std::as_const(values[v]).copy(); // off the device; kept for the results
      return Status::ok();
    };
    if (kernel.collective && !is_alias_[k]) {
      const auto start = Profiler::Clock::now();
      KILN_ASSIGN_OR_RETURN(const uint32_t bits, runCollective(k, group, arenas));
      for (size_t r = 0; r < ranks; ++r) {
        raise(r, bits);
        KILN_RETURN_IF_ERROR(finish(r));
        timed(r, start);
      }
      continue;
    }
    for (size_t r = 0; r < ranks; ++r) {
      const auto start = Profiler::Clock::now();
      std::vector<Tensor> &values = runs[r].values;
      if (is_alias_[k]) {
        const ValueId in = kernel.spec.inputs.front(), out = kernel.spec.outputs.front();
        values[out] = values[in].reshaped(graph_.type(out).shape);
      } else if (kernel.host) {
        auto bits = runOnHost(k, values, runs[r].arena);
        KILN_RETURN_IF_ERROR(onRank(r, bits.status()));
        raise(r, *bits);
      } else {
        raise(r, launch(k, values, runs[r].arena));
      }
      KILN_RETURN_IF_ERROR(finish(r));
      timed(r, start);
    }
  }
  std::vector<ops::TensorMap> outputs(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    const auto start = Profiler::Clock::now();
    for (const GraphOutput &out : graph_.outputs())
      outputs[r][out.name] = runs[r].values[out.value];
    runs[r].end(arena_name_);
    hostWork(r, "collect outputs", start);
  }
  return outputs;
}

void Executor::copyBytes(Tensor &to, const Tensor &from) {
  if (to.byteSize() > 0)
    std::memcpy(to.data(), from.data(), to.byteSize());
}

std::shared_ptr<uint8_t[]> Executor::takeArena() {
  for (const std::shared_ptr<uint8_t[]> &arena : arenas_)
    if (arena.use_count() == 1)
      return arena;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(plan_.peak_bytes, 1));
  arenas_.push_back(Tensor::allocateBlock(bytes, executable::kDefaultBufferAlignment));
  arena_bytes_allocated_ += static_cast<int64_t>(bytes);
  return arenas_.back();
}

Tensor Executor::place(ValueId v, const std::shared_ptr<uint8_t[]> &arena) const {
  if (offset_[v] < 0) // not planned: a value no kernel of the plan writes
    return Tensor::uninitialized(graph_.type(v));
  return Tensor::view(graph_.type(v), arena, static_cast<size_t>(offset_[v]));
}

Tensor Executor::outputPlace(ValueId v, std::vector<Tensor> &values,
                             const std::shared_ptr<uint8_t[]> &arena) const {
  const ValueId in = donated_ ? over_input_[v] : kNoValue;
  // The kernel has read the input's pointer already; moved, its bytes have
  // one holder and are written without a copy.
  if (in != kNoValue && values[in].holdsBytesAlone())
    return std::move(values[in]);
  return place(v, arena);
}

// A fallback kernel: the op's reference kernel, one thread, the job's
// rounding, its results written into the arena.
Expected<uint32_t> Executor::runOnHost(size_t index, std::vector<Tensor> &values,
                                       const std::shared_ptr<uint8_t[]> &arena) {
  const executable::KernelSpec &spec = kernels_.kernels[index].spec;
  const Node &node = graph_.node(spec.members.front());
  const ops::RegisteredOp *op = ops::opsOf(graph_).find(node.op);
  if (!op)
    return Error("node '" + node.name + "': unknown op '" + node.op + "'");
  std::vector<const Tensor *> args;
  for (ValueId v : node.inputs)
    args.push_back(&values[v]);
  std::vector<Tensor> results;
  for (ValueId v : node.outputs) {
    results.push_back(place(v, arena)); // zeroed, as a reference kernel expects
    if (results.back().byteSize() > 0)
      std::memset(results.back().data(), 0, results.back().byteSize());
  }
  ops::KernelContext ctx;
  ctx.overflow = kernels_.overflow;
  ctx.node_name = node.name;
  // The reference kernel rounds through ir/float16.cpp on this thread.
  takeFloatStatus();
  Status s = op->impl.kernel(ctx, args, results, node.attrs);
  const uint32_t status = takeFloatStatus();
  if (!s)
    return s.error().withContext("node '" + node.name + "' (" + node.op + ", on the host)");
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    Tensor &value = values[node.outputs[k]] = place(node.outputs[k], arena);
    // A kernel that replaced its result (with one of its inputs, say):
    // copied into the arena, so that no value shares bytes another outlives.
    if (std::as_const(value).data() != std::as_const(results[k]).data())
      copyBytes(value, results[k]);
  }
  return status;
}

float *Executor::accumulatorBuffer(const kernels::GemmPlan &gemm) {
  // Written whole, so kept between launches and never initialised.
  const size_t size = static_cast<size_t>(gemm.batch * gemm.m * gemm.n);
  if (whole_acc_size_ < size) {
    whole_acc_.reset(new float[size]);
    whole_acc_size_ = size;
  }
  return whole_acc_.get();
}

float *Executor::wholeAccumulator(const kernels::GemmPlan &gemm, const Tensor &a, const Tensor &b,
                                  std::optional<kernels::GemmOperands> &operands) {
  float *acc = accumulatorBuffer(gemm);
  if (!operands) {
    if (dnnlBlocks(pool_, gemm, a.dtype(), a.data(), b.data(), acc))
      return acc;
    operands.emplace(gemm, a.data(), a.dtype(), b.data(), b.dtype());
  }
  if (gemm.batch == 1) {
    // One column block per thread (16-column aligned), all rows each.
    const int64_t blocks = pool_.size();
    const int64_t width = ((gemm.n + blocks - 1) / blocks + 15) / 16 * 16;
    pool_.parallelFor(blocks, [&](int64_t t, int) {
      const int64_t c0 = std::min(gemm.n, t * width), c1 = std::min(gemm.n, c0 + width);
      kernels::gemmBlock(gemm, *operands, 0, gemm.m, c0, c1, acc + c0, gemm.n);
    });
    return acc;
  }
  const int64_t total = gemm.batch * gemm.m;
  const int64_t block = std::max<int64_t>(1, options_.tile_elements / std::max<int64_t>(1, gemm.n));
  pool_.parallelFor((total + block - 1) / block, [&](int64_t t, int) {
    const int64_t r0 = t * block, r1 = std::min(total, r0 + block);
    kernels::gemmRows(gemm, *operands, r0, r1, acc + r0 * gemm.n);
  });
  return acc;
}

uint32_t Executor::launch(size_t index, std::vector<Tensor> &values,
                          const std::shared_ptr<uint8_t[]> &arena) {
  const executable::CompiledKernel &kernel = kernels_.kernels[index];
  const executable::KernelLaunch &launch = kernel.launch;
  const kernels::KernelEntry entry = entries_[index];

  // Inputs are read in place (const: a shared weight is not copied); every
  // output is written whole at its place in the arena.
  std::vector<void *> buffers;
  for (ValueId v : kernel.spec.inputs)
    buffers.push_back(const_cast<void *>(std::as_const(values[v]).data()));
  const size_t acc_slot = buffers.size();
  if (kernel.gemm)
    buffers.push_back(nullptr); // the accumulator, set per tile
  for (ValueId v : kernel.spec.outputs) {
    values[v] = outputPlace(v, values, arena);
    buffers.push_back(values[v].data());
  }

  const int64_t rows = launch.rows;
  if (rows == 0)
    return 0;
  const int64_t row_elements = launch.row_elements;
  const kernels::GemmPlan *gemm = kernel.gemm ? &*kernel.gemm : nullptr;
  // f32 and bf16 operands (on a host with bf16 units): the whole accumulator
  // first, on oneDNN, one single-threaded block per thread. Others (f16,
  // widened to f32): when the epilogue stays within rows, each tile (at
  // least 256 rows, one per thread) runs its GEMM rows and then its epilogue
  // while they are hot; otherwise the whole accumulator comes first, a
  // single matmul as one BLAS call per core over a block of columns (each
  // packs its part of the weight once), a batch by blocks of rows.
  const Tensor *gemm_a = gemm ? &values[kernel.spec.inputs[gemm->a_input]] : nullptr;
  const Tensor *gemm_b = gemm ? &values[kernel.spec.inputs[gemm->b_input]] : nullptr;
  // bf16 x bf16 on the host's bf16 units: oneDNN for the whole accumulator.
  const bool bf16 = gemm && gemm->m > 0 && gemm->n > 0 && gemm->k > 0 &&
                    gemm_a->dtype() == DType::BF16 && gemm_b->dtype() == DType::BF16 &&
                    kernels::hostHasBf16Gemm();
  // f32 x f32 on oneDNN too: a batch (attention's scores and context) as its
  // batched kernel, whole matrices per thread, instead of an sgemm call per
  // slice of rows; a single matmul by blocks (dnnlBlocks). On a Zen 5 host its f32
  // kernel runs at 1.8x OpenBLAS 0.3.21's (docs/performance.md).
  const bool f32 = gemm && gemm->m > 0 && gemm->n > 0 && gemm->k > 0 &&
                   gemm_a->dtype() == DType::F32 && gemm_b->dtype() == DType::F32;
  const bool on_dnnl = bf16 || f32;
  // A lone matmul's f32 output (INFNAN mode: saturation clamps in the
  // store): oneDNN writes it and each block is checked for inf and NaN
  // while hot, instead of the epilogue reading and writing it again.
  if (on_dnnl && launch.output_is_accumulator && kernels_.overflow == OverflowMode::InfNan)
    if (std::optional<uint32_t> stored =
            dnnlBlocksStored(pool_, *gemm, gemm_a->dtype(), gemm_a->data(), gemm_b->data(),
                             static_cast<float *>(buffers[acc_slot + 1])))
      return *stored;
  const bool whole_gemm = gemm && (on_dnnl || !launch.accumulator_row_local);
  int64_t rows_per_tile = std::max<int64_t>(1, options_.tile_elements / row_elements);
  if (gemm && !whole_gemm) {
    // Each sgemm call packs the whole weight again: 64-row calls lose about
    // 40% of the throughput, 256-row ones 10% (docs/notes/gemm-backend.md).
    // One large block per thread, at least 256 rows.
    const int64_t per_thread = (rows + pool_.size() - 1) / pool_.size();
    rows_per_tile = std::max(rows_per_tile, std::min(rows, std::max<int64_t>(per_thread, 256)));
  }
  const int64_t tiles = (rows + rows_per_tile - 1) / rows_per_tile;
  const size_t scratch_slots = static_cast<size_t>(launch.scratch_elements_per_row);
  alignas(4) uint32_t status = 0; // the tiles or their bits in atomically

  // A single matmul split by rows with an epilogue that stays within rows
  // (and no sums over them): each thread runs the epilogue on its rows
  // right after its GEMM block, while they are hot.
  if (on_dnnl && gemm->batch == 1 && gemm->m >= gemm->n && gemm->m == rows &&
      launch.accumulator_row_local &&
      std::none_of(launch.row_sums.begin(), launch.row_sums.end(), [](char s) { return s; })) {
    float *acc = accumulatorBuffer(*gemm);
    if (dnnlBlocksThen(pool_, *gemm, gemm_a->dtype(), gemm_a->data(), gemm_b->data(), acc,
                       [&](const kernels::GemmBlock &block, int worker) {
                         std::vector<uint64_t> &scratch = scratch_[worker];
                         if (scratch.size() < scratch_slots)
                           scratch.resize(scratch_slots);
                         std::vector<void *> local = buffers;
                         local[acc_slot] = acc;
                         entry(local.data(), scratch.data(), block.row_begin, block.row_end,
                               &status);
                       }))
      return status;
    status = 0; // a block oneDNN refused: the whole kernel again, below
  }
  std::optional<kernels::GemmOperands> operands;
  if (gemm && !(whole_gemm && on_dnnl))
    operands.emplace(*gemm, gemm_a->data(), gemm_a->dtype(), gemm_b->data(), gemm_b->dtype());
  if (whole_gemm)
    buffers[acc_slot] = wholeAccumulator(*gemm, *gemm_a, *gemm_b, operands);

  // Row sums: per output, one zeroed f32 partial per tile (its slot points at
  // the tile's), added in tile order after the tiles.
  std::vector<std::pair<size_t, int64_t>> row_sums; // output, offset in row_sums_
  int64_t row_sum_floats = 0;
  for (size_t o = 0; o < launch.row_sums.size(); ++o)
    if (launch.row_sums[o]) {
      row_sums.emplace_back(o, row_sum_floats);
      row_sum_floats += tiles * values[kernel.spec.outputs[o]].numElements();
    }
  if (!row_sums.empty())
    row_sums_.assign(static_cast<size_t>(row_sum_floats), 0.0f);

  pool_.parallelFor(tiles, [&](int64_t t, int worker) {
    const int64_t r0 = t * rows_per_tile, r1 = std::min(rows, r0 + rows_per_tile);
    std::vector<uint64_t> &scratch = scratch_[worker];
    if (scratch.size() < scratch_slots)
      scratch.resize(scratch_slots);
    std::vector<void *> local = buffers;
    for (const auto &[o, offset] : row_sums)
      local[acc_slot + o] =
          row_sums_.data() + offset + t * values[kernel.spec.outputs[o]].numElements();
    if (gemm && !whole_gemm) {
      std::vector<float> &tile = acc_tiles_[worker];
      tile.resize(static_cast<size_t>((r1 - r0) * gemm->n));
      kernels::gemmRows(*gemm, *operands, r0, r1, tile.data());
      // The epilogue indexes the accumulator by global row: shift the tile's base.
      local[acc_slot] =
          reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(tile.data()) -
                                   static_cast<uintptr_t>(r0 * gemm->n) * sizeof(float));
    }
    entry(local.data(), scratch.data(), r0, r1, &status);
  });
  for (const auto &[o, offset] : row_sums) {
    Tensor &out = values[kernel.spec.outputs[o]];
    status |= kernels::combineRowSums(row_sums_.data() + offset, tiles, out.numElements(),
                                      out.data(), out.dtype(), kernels_.overflow);
  }
  return status;
}

} // namespace kiln::runtime

// Runs a compiled graph on the host CPU: the kernels in order, each kernel's
// rows split into tiles that run in parallel; the ranks of a tensor-parallel
// group in lockstep, collectives between kernels. Each rank's run has one
// arena laid out by the graph's memory plan (executable/memory_plan.h):
// every value a kernel writes (and every input the device receives) is a
// view at its planned offset, the other inputs are read where the caller
// holds them, and a device counts exactly the arena and the inputs outside
// it that it does not hold already. A GEMM
// kernel computes each tile's f32 result and hands it straight to its
// epilogue while it is in cache, the CPU's counterpart of FixPipe draining
// L0C. This is the single-device executor the multi-device runtime builds on.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executable/executable.h"
#include "executable/memory_plan.h"
#include "ir/graph.h"
#include "kernels/gemm.h"
#include "kernels/kernel_loader.h"
#include "ops/interpreter.h"
#include "runtime/device.h"
#include "runtime/float_status.h"
#include "runtime/profiler.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

struct ExecutorOptions {
  int threads = 0; // 0: one per core
  // Elements a tile aims at: enough work per task to amortise the dispatch.
  int64_t tile_elements = 1 << 15;
  // Called after each kernel with every live value (by ValueId; the kernel's
  // inputs are still held); an error stops the run and is returned. The
  // values are views into the arena, whose bytes later kernels reuse: one
  // kept past the call must be copied (Tensor::copy).
  std::function<Status(size_t kernel, const std::vector<Tensor> &values)> after_kernel;
  // Outputs that leave the device as they are made (a gradient
  // reduce-scattered during the backward): in the arena until their last
  // reader in the graph, copied off it then, still returned with the others.
  std::function<bool(const GraphOutput &)> output_leaves;
  // Inputs read where the caller holds them (a trainer's weights, moments
  // and gradient sums). Every other input the device receives for the run
  // (token ids, scalars, what a pipeline stage is sent): it is copied into
  // the arena at its planned place and its bytes are reused after its last
  // reader. Empty: every input is read in place.
  std::function<bool(const GraphInput &)> input_in_place;
  // ZeRO-3: the whole of weight `name` on tensor-parallel rank `rank` (its
  // piece), which a DataParallelGather assembles from every replica's slice.
  std::function<Expected<Tensor>(const std::string &name, int rank)> gather_weight;
};

class Executor {
public:
  // Loads every kernel object of `kernels` (compiled for `graph`).
  static Expected<std::unique_ptr<Executor>>
  create(const Graph &graph, executable::Executable kernels, const ExecutorOptions &options = {});

  // Runs the graph: `inputs` must hold every graph input by name with exactly
  // its type; returns the graph outputs by name (views into the run's arena,
  // which they keep alive on the host; the next run takes another arena
  // until they are dropped). With `memory`, the run counts on that device
  // its arena and the inputs outside it the device does not hold already,
  // from the start, and exceeding its capacity stops the run.
  // With `status`, every kernel that overflowed raises it (the register is
  // only ever set here, never cleared).
  Expected<ops::TensorMap> run(const ops::TensorMap &inputs, DeviceMemory *memory = nullptr,
                               FloatStatus *status = nullptr);

  // run() for a caller that gives up `inputs`: an output named like an
  // input of its type (an update's new weights and moments) is written over
  // that input's bytes where nothing else holds them any more and the
  // kernel making it reads the input only at the element it writes
  // (buffer_donation.h); elsewhere, and under ExecutorOptions::after_kernel,
  // it lies in the arena as in run(). Device memory is counted as in run().
  Expected<ops::TensorMap> runDonating(ops::TensorMap inputs, DeviceMemory *memory = nullptr,
                                       FloatStatus *status = nullptr);

  // Runs the graph on every rank of a tensor-parallel group at once:
  // inputs[r] and memory[r] (null: not counted) are rank r's. The ranks go
  // kernel by kernel in lockstep, each kernel on every rank before the next,
  // so a collective kernel finds every rank's input ready and combines them
  // in rank order. status[r] (null or absent: not kept) is rank r's
  // register. run() is the group of one.
  Expected<std::vector<ops::TensorMap>> runGroup(const std::vector<const ops::TensorMap *> &inputs,
                                                 const std::vector<DeviceMemory *> &memory,
                                                 const std::vector<FloatStatus *> &status = {});

  const executable::Executable &kernels() const { return kernels_; }
  // The arena of each rank's run.
  const executable::MemoryPlan &memoryPlan() const { return plan_; }
  // Host bytes of the arenas allocated so far (a run reuses one no view of
  // which is left).
  int64_t arenaBytesAllocated() const { return arena_bytes_allocated_; }

  // Times every kernel of the runs that follow, and the executor's own work
  // around them, into `scope.profiler` (profiler.h); a scope without a
  // profiler stops it.
  void profileInto(ProfileScope scope) { profile_ = std::move(scope); }

private:
  Executor(const Graph &graph, executable::Executable kernels, const ExecutorOptions &options);
  // Each returns the kernel's float status (ir/float_status.h) on its rank(s).
  uint32_t launch(size_t kernel, std::vector<Tensor> &values,
                  const std::shared_ptr<uint8_t[]> &arena);
  // A matmul's whole f32 accumulator (for an epilogue that reads across
  // rows, or bf16 on oneDNN when `operands` is empty); `operands` are made
  // when oneDNN cannot run it.
  float *wholeAccumulator(const kernels::GemmPlan &gemm, const Tensor &a, const Tensor &b,
                          std::optional<kernels::GemmOperands> &operands);
  // The buffer for it, kept between launches and never initialised.
  float *accumulatorBuffer(const kernels::GemmPlan &gemm);
  Expected<uint32_t> runOnHost(size_t kernel, std::vector<Tensor> &values,
                               const std::shared_ptr<uint8_t[]> &arena);
  // `from`'s bytes into `to` (of the same type), which lies in an arena.
  static void copyBytes(Tensor &to, const Tensor &from);
  Expected<uint32_t> runCollective(size_t kernel, std::vector<std::vector<Tensor> *> &group,
                                   const std::vector<std::shared_ptr<uint8_t[]>> &arenas);
  Expected<uint32_t> runSequenceCollective(const Node &node,
                                           std::vector<std::vector<Tensor> *> &group,
                                           const std::vector<std::shared_ptr<uint8_t[]>> &arenas);
  // An arena no view points into any more, or a new one.
  std::shared_ptr<uint8_t[]> takeArena();
  // Value `v` at its planned offset in `arena`.
  Tensor place(ValueId v, const std::shared_ptr<uint8_t[]> &arena) const;
  // Where kernel output `v` is written: over its donated input's bytes
  // (runDonating), or place(v, arena).
  Tensor outputPlace(ValueId v, std::vector<Tensor> &values,
                     const std::shared_ptr<uint8_t[]> &arena) const;

  const Graph &graph_;
  executable::Executable kernels_;
  ExecutorOptions options_;
  std::unique_ptr<kernels::KernelLoader> loader_;
  std::vector<kernels::KernelEntry> entries_;
  std::vector<ValueId> last_use_kernel_; // per value: the last kernel reading it
  // Per kernel: the leaving outputs (ExecutorOptions::output_leaves) copied
  // off the arena after it.
  std::vector<std::vector<ValueId>> leave_after_;
  std::vector<std::string> value_names_; // per value: its name in device memory
  // Per kernel: its output is its input's bytes (executable::aliasesItsInput);
  // nothing runs.
  std::vector<char> is_alias_;
  // Per value: the graph input it may be written over (buffer_donation.h).
  std::vector<ValueId> over_input_;
  // During runDonating: the caller's inputs, emptied once bound.
  ops::TensorMap *donated_ = nullptr;
  executable::MemoryPlan plan_;
  std::vector<int64_t> offset_; // per value: its offset in the arena; -1: not in it
  std::string arena_name_;      // in device memory
  std::vector<std::shared_ptr<uint8_t[]>> arenas_;
  int64_t arena_bytes_allocated_ = 0;
  ProfileScope profile_;
  std::unique_ptr<ThreadPool> own_pool_;       // ExecutorOptions::threads set: a pool of that size
  ThreadPool &pool_;                           // own_pool_, or the process's
  std::vector<std::vector<uint64_t>> scratch_; // per worker
  std::vector<float> row_sums_;                // per tile, for kernels with row sums
  std::vector<std::vector<float>> acc_tiles_;  // per worker
  // The whole accumulator of a matmul whose epilogue reads across rows.
  std::unique_ptr<float[]> whole_acc_;
  size_t whole_acc_size_ = 0;
};

} // namespace kiln::runtime

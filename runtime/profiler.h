// A per-kernel profiler that writes what msprof writes for an Ascend job, so
// the tools and habits built around msprof read kiln's profiles too:
//
//   op_summary.csv    one row per kernel launch (and per piece of host work
//                     between kernels) per step and device: Step Id,
//                     Device_id, Op Name (the kernel's scoped name), OP Type,
//                     Task Type (AI_CORE for cube kernels, AI_VECTOR_CORE,
//                     AI_CPU for reference kernels on the host, HCCL for
//                     collectives, HOST for the runtime's own work), Task
//                     Start Time(us) since the profile began, Task
//                     Duration(us), Input Shapes, Output Shapes, Data Types,
//                     and kiln's FLOPs, Bytes, GFLOP/s, GB/s, Roofline %
//                     (host_roofline.h).
//   op_statistic.csv  per device and OP Type: Count, Total / Avg / Min / Max
//                     Time(us), Ratio(%) of the device's total.
//   fusion_op.csv     every fused kernel of every program: the pass or rule
//                     that formed it and its member ops.
//   step_trace.csv    per step: its wall time, the time of its kernels and of
//                     its host work, how much of the step they cover, and
//                     the tensor bytes copied (0: no weight copied).
//   trace.json        Chrome / Perfetto: one event per kernel and per piece
//                     of host work, on its device's track.
//
// Timing a kernel is two clock reads around its launch; the profiler keeps
// every event in memory and writes the files at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "executable/executable.h"
#include "executable/kernel_cost.h"
#include "ir/graph.h"
#include "runtime/host_roofline.h"
#include "support/error.h"

namespace kiln::runtime {

class Profiler {
public:
  using Clock = std::chrono::steady_clock;

  explicit Profiler(HostRoofline roofline);

  // A compiled program whose kernels will be timed ("step", "update"); returns
  // its id for kernel(). The graph and kernels are described, not kept.
  int addProgram(const std::string &label, const Graph &graph,
                 const executable::Executable &kernels);

  void kernel(int64_t step, int device, int program, size_t kernel, Clock::time_point start,
              Clock::time_point end);
  // Work of the runtime outside the compiled kernels (binding inputs, the
  // gradient allreduce, the gradient norm).
  void host(int64_t step, int device, const std::string &what, Clock::time_point start,
            Clock::time_point end);
  // The step's wall time, and the tensor bytes copied and allocated during
  // it (Tensor::bytesCopied(), Tensor::bytesAllocated()).
  void stepTime(int64_t step, Clock::time_point start, Clock::time_point end,
                uint64_t bytes_copied = 0, uint64_t bytes_allocated = 0);

  // The host's ceilings measured again (after the run, as the files are
  // about to be written): each file's ratios are then against the better of
  // the two measurements (HostRoofline::keepBest).
  void keepBestRoofline(const HostRoofline &later) { roofline_.keepBest(later); }

  // Writes the five files into `dir` (created if missing).
  Status write(const std::string &dir) const;
  // What a profiled run calls as it ends: the ceilings measured again on
  // `pool` (keepBestRoofline), then the files written.
  Status finish(const std::string &dir, ThreadPool &pool);

private:
  struct KernelInfo {
    std::string name, type, task_type, formed_by;
    std::string input_shapes, output_shapes, data_types;
    std::vector<std::string> members; // "name(Op)"
    executable::KernelCost cost;
    // A kernel driving a matmul, or fused attention: its matmuls' 2*M*N*K
    // (0 otherwise) and its operands' dtype, which picks the host's best
    // GEMM rate for the step's floor (HostRoofline::bestGemmRate).
    double gemm_flops = 0;
    DType gemm_dtype = DType::F32;
  };
  struct Program {
    std::string label;
    std::vector<KernelInfo> kernels;
  };
  struct Event {
    int64_t step;
    int device;
    int program; // -1: host work, named by `what`
    size_t kernel;
    std::string what;
    double start_us, duration_us;
  };
  struct StepSpan {
    double start_us, duration_us;
    uint64_t bytes_copied, bytes_allocated;
  };

  double micros(Clock::time_point t) const;
  const KernelInfo *info(const Event &e) const;
  std::string opSummary() const;
  std::string opStatistic() const;
  std::string fusionOps() const;
  std::string stepTrace() const;
  std::string traceJson() const;

  HostRoofline roofline_;
  Clock::time_point origin_;
  std::vector<Program> programs_;
  std::vector<Event> events_;
  std::map<int64_t, StepSpan> steps_;
};

// Creates the profile folder up front, so a bad --profile fails before the
// run rather than after it.
Status createProfileDir(const std::string &dir);

// Sets up what a profiled executor run records: the program's id in the
// profiler, the step, and the device each rank of the group runs on.
struct ProfileScope {
  Profiler *profiler = nullptr;
  int program = -1;
  int64_t step = 0;
  std::vector<int> devices; // per rank
};

} // namespace kiln::runtime

#include "session/model_run.h"

#include <cmath>
#include <memory>

#include "ir/float_status.h"
#include "runtime/executor.h"
#include "runtime/host_roofline.h"
#include "runtime/profiler.h"
#include "support/thread_pool.h"

namespace kiln::session {

Expected<ops::TensorMap> runKernels(const Graph &graph, codegen::CompiledKernels kernels,
                                    const ops::TensorMap &inputs, const std::string &profile_dir,
                                    runtime::FloatStatus &status) {
  std::unique_ptr<runtime::Profiler> profiler;
  if (!profile_dir.empty()) {
    KILN_RETURN_IF_ERROR(runtime::createProfileDir(profile_dir));
    profiler =
        std::make_unique<runtime::Profiler>(runtime::measureHostRoofline(ThreadPool::shared()));
  }
  const int program = profiler ? profiler->addProgram("run", graph, kernels) : -1;
  KILN_ASSIGN_OR_RETURN(auto executor, runtime::Executor::create(graph, std::move(kernels)));
  executor->profileInto({profiler.get(), program, 1, {0}});
  const auto start = runtime::Profiler::Clock::now();
  KILN_ASSIGN_OR_RETURN(ops::TensorMap outputs, executor->run(inputs, nullptr, &status));
  if (profiler) {
    profiler->stepTime(1, start, runtime::Profiler::Clock::now());
    KILN_RETURN_IF_ERROR(profiler->finish(profile_dir, ThreadPool::shared()));
  }
  return outputs;
}

Expected<ops::TensorMap> runInterpreter(const Graph &graph, const ops::TensorMap &inputs,
                                        OverflowMode overflow, runtime::FloatStatus &status) {
  ops::InterpretOptions options;
  options.overflow = overflow;
  takeFloatStatus(); // the interpreter raises this thread's status
  Expected<ops::TensorMap> outputs = ops::interpret(graph, inputs, options);
  status.raise(takeFloatStatus());
  return outputs;
}

std::string firstNonFinite(const ops::TensorMap &outputs) {
  std::vector<const ops::TensorMap::value_type *> order;
  for (const char *first : {"loss", "grad_norm"})
    if (auto it = outputs.find(first); it != outputs.end())
      order.push_back(&*it);
  for (const auto &entry : outputs)
    if (entry.first != "loss" && entry.first != "grad_norm")
      order.push_back(&entry);
  for (const auto *entry : order) {
    const Tensor &t = entry->second;
    if (!isFloat(t.dtype()))
      continue;
    for (int64_t i = 0; i < t.numElements(); ++i)
      if (const float v = t.getFloat(i); !std::isfinite(v))
        return "'" + entry->first + "' is " + (std::isnan(v) ? "nan" : "inf");
  }
  return "";
}

} // namespace kiln::session

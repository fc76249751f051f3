#include "debug/value_compare.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "runtime/executor.h"

namespace kiln::debug {
namespace {

ValueError measure(const std::string &name, const Tensor &got, const Tensor &want, double tol) {
  ValueError e;
  e.name = name;
  e.dtype = want.dtype();
  e.elements = want.numElements();
  const bool floats = isFloat(got.dtype()) && isFloat(want.dtype());
  for (int64_t i = 0; i < e.elements && i < got.numElements(); ++i) {
    const double a = floats ? got.getFloat(i) : static_cast<double>(got.getInt(i));
    const double b = floats ? want.getFloat(i) : static_cast<double>(want.getInt(i));
    if (std::isfinite(a) != std::isfinite(b) || std::isnan(a) != std::isnan(b)) {
      ++e.nonfinite;
      continue;
    }
    if (!std::isfinite(a))
      continue; // the same inf or both NaN
    const double diff = std::fabs(a - b);
    e.max_abs = std::max(e.max_abs, diff);
    if (std::fabs(b) > tol)
      e.max_rel = std::max(e.max_rel, diff / std::fabs(b));
    if (diff > tol + tol * std::fabs(b))
      ++e.outside;
  }
  return e;
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

} // namespace

Expected<ValueTrace> traceCompiled(const Graph &graph, codegen::CompiledKernels kernels,
                                   const ops::TensorMap &inputs) {
  std::vector<std::vector<ValueId>> outputs;
  for (const codegen::CompiledKernel &k : kernels.kernels)
    outputs.push_back(k.spec.outputs);
  ValueTrace trace;
  runtime::ExecutorOptions options;
  options.after_kernel = [&](size_t k, const std::vector<Tensor> &values) -> Status {
    for (ValueId v : outputs[k]) // the arena's bytes are reused: keep a copy
      trace.emplace_back(graph.valueName(v), values[v].copy());
    return Status::ok();
  };
  KILN_ASSIGN_OR_RETURN(auto executor,
                        runtime::Executor::create(graph, std::move(kernels), options));
  KILN_RETURN_IF_ERROR(executor->run(inputs).status());
  return trace;
}

Expected<ValueTrace> traceReference(const Graph &graph, const ops::TensorMap &inputs,
                                    OverflowMode overflow) {
  ValueTrace trace;
  ops::InterpretOptions options;
  options.overflow = overflow;
  options.after_node = [&](const Node &node, const std::vector<Tensor> &outputs) -> Status {
    for (size_t k = 0; k < outputs.size(); ++k) {
      // Inside an f32 group values are held in f32; compare what the dtype stores.
      const DType dtype = graph.type(node.outputs[k]).dtype;
      trace.emplace_back(graph.valueName(node.outputs[k]),
                         outputs[k].dtype() == dtype ? outputs[k]
                                                     : outputs[k].castTo(dtype, overflow));
    }
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(ops::interpret(graph, inputs, options).status());
  return trace;
}

CompareReport compareTraces(const Graph &graph, const ValueTrace &got, const ValueTrace &want,
                            double tolerance) {
  CompareReport report;
  report.tolerance = tolerance;
  std::unordered_map<std::string, const Tensor *> wanted;
  for (const auto &[name, t] : want)
    wanted[name] = &t;
  for (const auto &[name, t] : got) {
    auto it = wanted.find(name);
    if (it == wanted.end() || !(it->second->shape() == t.shape()))
      continue;
    ValueError e = measure(name, t, *it->second, tolerance);
    const std::string node = name.substr(0, name.find('#'));
    if (NodeId id = graph.findNode(node); id != kNoNode)
      e.op = graph.node(id).op;
    if (e.diverges() && !report.first_divergence)
      report.first_divergence = report.values.size();
    report.values.push_back(std::move(e));
  }
  return report;
}

nlohmann::json CompareReport::toJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const ValueError &e : values)
    list.push_back({{"name", e.name},
                    {"op", e.op},
                    {"dtype", dtypeName(e.dtype)},
                    {"elements", e.elements},
                    {"max_abs", e.max_abs},
                    {"max_rel", e.max_rel},
                    {"outside", e.outside},
                    {"nonfinite", e.nonfinite}});
  nlohmann::json j = {{"against", against}, {"tolerance", tolerance}, {"values", list}};
  j["first_divergence"] =
      first_divergence ? nlohmann::json(values[*first_divergence].name) : nlohmann::json();
  return j;
}

std::string CompareReport::toText(size_t top) const {
  std::ostringstream os;
  os << values.size() << " values compared against the " << against << " run, tolerance "
     << fmt(tolerance) << "\n";
  if (first_divergence) {
    const ValueError &e = values[*first_divergence];
    os << "first divergence: " << e.name << " (" << e.op << ", " << dtypeName(e.dtype)
       << "): " << e.outside << " of " << e.elements << " elements outside, " << e.nonfinite
       << " not finite in one run only, max abs " << fmt(e.max_abs) << ", max rel "
       << fmt(e.max_rel) << "\n";
  } else {
    os << "no value leaves the tolerance\n";
  }
  std::vector<const ValueError *> worst;
  for (const ValueError &e : values)
    worst.push_back(&e);
  std::stable_sort(worst.begin(), worst.end(), [](const ValueError *a, const ValueError *b) {
    return a->nonfinite != b->nonfinite ? a->nonfinite > b->nonfinite : a->max_rel > b->max_rel;
  });
  worst.resize(std::min(top, worst.size()));
  if (worst.empty())
    return os.str();
  os << "largest errors:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-52s %-20s %-5s %10s %10s %8s\n", "value", "op", "dtype",
                "max_abs", "max_rel", "outside");
  os << line;
  for (const ValueError *e : worst) {
    std::snprintf(line, sizeof line, "  %-52s %-20s %-5s %10.3g %10.3g %8lld\n", e->name.c_str(),
                  e->op.c_str(), std::string(dtypeName(e->dtype)).c_str(), e->max_abs, e->max_rel,
                  static_cast<long long>(e->outside + e->nonfinite));
    os << line;
  }
  return os.str();
}

} // namespace kiln::debug

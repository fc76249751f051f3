#include "debug/overflow_locator.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <sstream>

#include "ir/file_names.h"
#include "ir/graph_extract.h"
#include "ir/safetensors.h"
#include "runtime/executor.h"

namespace kiln::debug {
namespace {

std::string number(double v) {
  std::ostringstream os;
  os.precision(5);
  os << v;
  return os.str();
}

std::string describe(const ValueRange &r) {
  std::string s = r.name + " " + typeToString(r.type) + ": ";
  if (!r.finite())
    s += std::to_string(r.inf) + " inf, " + std::to_string(r.nan) + " nan; ";
  return s + "finite values in [" + number(r.min) + ", " + number(r.max) + "]";
}

std::optional<int64_t> layerOf(const std::string &name) {
  static const std::regex layer(R"((^|\.)h\.(\d+)\.)");
  std::smatch m;
  if (std::regex_search(name, m, layer))
    return std::stoll(m[2]);
  return std::nullopt;
}

void suggest(OverflowReport &r, const OverflowJob &job) {
  const bool attention = r.op_name.find(".attn.") != std::string::npos;
  bool low_precision = false;
  for (const ValueRange &v : r.op_outputs)
    low_precision = low_precision || v.type.dtype == DType::F16;
  if (attention && low_precision) {
    const std::optional<int64_t> layer = layerOf(r.op_name);
    const bool listed =
        job.attention_fp32_layers.empty() || !layer ||
        std::find(job.attention_fp32_layers.begin(), job.attention_fp32_layers.end(), *layer) !=
            job.attention_fp32_layers.end();
    if (!job.attention_fp32_pass)
      r.suggestions.push_back("AttentionFp32CastPass is off in this job: switch it on "
                              "(--enable-pass AttentionFp32CastPass) so QK^T is stored and the "
                              "softmax computed in fp32");
    else if (!listed)
      r.suggestions.push_back("layer " + std::to_string(*layer) +
                              " is not in --attention-fp32-layers: add it");
  }
  if (low_precision) {
    r.suggestions.push_back("keep this op in fp32: a --keep-dtype file with the line '" +
                            r.op_name + "' (or 'OpType::" + r.op + "' for every " + r.op + ")");
    if (job.precision_mode == "allow_mix_precision" || job.precision_mode == "force_fp16")
      r.suggestions.push_back("or --precision-mode allow_mix_precision_bf16 (ascend910b): bf16 "
                              "has fp32's range");
  }
  if (r.backward)
    r.suggestions.push_back("a gradient overflowed: scale the loss down (dynamic loss scaling) "
                            "or clip gradients");
}

} // namespace

OverflowJob overflowJobOf(const driver::ResolvedJob &job) {
  OverflowJob o;
  const passes::PrecisionSettings &precision = job.context->precision();
  o.precision_mode = std::string(passes::precisionModeName(precision.mode));
  o.overflow = job.overflow;
  const std::string pass = "AttentionFp32CastPass";
  if (const passes::Pass *p = job.registry->find(pass))
    o.attention_fp32_pass = job.context->isEnabled(pass, p->info().default_on);
  o.attention_fp32_layers.assign(precision.attention_fp32_layers.begin(),
                                 precision.attention_fp32_layers.end());
  return o;
}

ValueRange rangeOf(const std::string &name, const Tensor &t) {
  ValueRange r;
  r.name = name;
  r.type = t.type();
  if (!isFloat(t.dtype())) {
    for (int64_t i = 0; i < t.numElements(); ++i) {
      const double v = static_cast<double>(t.getInt(i));
      r.min = i == 0 ? v : std::min(r.min, v);
      r.max = i == 0 ? v : std::max(r.max, v);
    }
    return r;
  }
  bool any = false;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const double v = t.getFloat(i);
    if (std::isnan(v)) {
      ++r.nan;
    } else if (std::isinf(v)) {
      ++r.inf;
    } else {
      r.min = any ? std::min(r.min, v) : v;
      r.max = any ? std::max(r.max, v) : v;
      any = true;
    }
  }
  return r;
}

nlohmann::json ValueRange::toJson() const {
  return {{"name", name}, {"type", typeToString(type)}, {"min", min}, {"max", max}, {"nan", nan},
          {"inf", inf}};
}

nlohmann::json OverflowReport::toJson() const {
  nlohmann::json j = {{"found", found}, {"kernels_run", kernels_run}};
  if (!found)
    return j;
  if (!bad_input.empty())
    j["bad_input"] = bad_input;
  if (!kernel.empty())
    j["kernel"] = {
        {"name", kernel}, {"kind", kernel_kind}, {"formed_by", formed_by}, {"index", kernel_index}};
  if (!op_name.empty()) {
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
    for (const ValueRange &v : op_inputs)
      ins.push_back(v.toJson());
    for (const ValueRange &v : op_outputs)
      outs.push_back(v.toJson());
    j["op"] = {
        {"name", op_name}, {"op", op}, {"backward", backward}, {"inputs", ins}, {"outputs", outs}};
  }
  if (!dump.empty())
    j["dump"] = dump;
  j["suggestions"] = suggestions;
  return j;
}

std::string OverflowReport::toText() const {
  if (!found)
    return "no kernel produced inf or nan (" + std::to_string(kernels_run) + " kernels run)\n";
  std::string s;
  if (!bad_input.empty())
    return "input '" + bad_input + "' already holds inf or nan\n";
  s += "first overflow: kernel " + std::to_string(kernel_index) + " '" + kernel + "' (" +
       kernel_kind + (formed_by.empty() ? "" : ", formed by " + formed_by) + ")\n";
  if (op_name.empty()) {
    s += "  the reference interpreter does not reproduce it op by op: the compiled kernel and "
         "the interpreter round differently here\n";
  } else {
    s += "  op " + op_name + " (" + op + "), " + (backward ? "backward" : "forward") + "\n";
    for (const ValueRange &v : op_inputs)
      s += "  input  " + describe(v) + "\n";
    for (const ValueRange &v : op_outputs)
      s += "  output " + describe(v) + "\n";
  }
  if (!dump.empty())
    s += "  inputs and outputs dumped to " + dump + "\n";
  if (!suggestions.empty()) {
    s += "suggestions:\n";
    for (const std::string &line : suggestions)
      s += "  - " + line + "\n";
  }
  return s;
}

Expected<OverflowReport> locateOverflow(const Graph &graph, codegen::CompiledKernels kernels,
                                        const ops::TensorMap &inputs, const OverflowJob &job,
                                        const OverflowOptions &options) {
  OverflowReport report;
  for (const GraphInput &in : graph.inputs()) {
    auto it = inputs.find(in.name);
    if (it != inputs.end() && isFloat(it->second.dtype()) &&
        !rangeOf(in.name, it->second).finite()) {
      report.found = true;
      report.bad_input = in.name;
      return report;
    }
  }

  // Run the kernels until one stores inf or NaN; keep what it read.
  std::vector<codegen::KernelSpec> specs;
  for (const codegen::CompiledKernel &k : kernels.kernels)
    specs.push_back(k.spec);
  const std::string stop = "kiln.overflow.stop";
  ops::TensorMap kernel_inputs;
  runtime::ExecutorOptions exec;
  exec.after_kernel = [&](size_t k, const std::vector<Tensor> &values) -> Status {
    report.kernels_run = static_cast<int64_t>(k) + 1;
    for (ValueId v : specs[k].outputs) {
      if (!isFloat(values[v].dtype()) || rangeOf("", values[v]).finite())
        continue;
      report.found = true;
      report.kernel_index = static_cast<int64_t>(k);
      for (ValueId in : specs[k].inputs)
        kernel_inputs[graph.valueName(in)] = values[in];
      return Error(stop);
    }
    return Status::ok();
  };
  KILN_ASSIGN_OR_RETURN(auto executor, runtime::Executor::create(graph, std::move(kernels), exec));
  auto ran = executor->run(inputs);
  if (!ran && ran.message() != stop)
    return ran.error();
  if (!report.found)
    return report;

  const codegen::KernelSpec &spec = specs[report.kernel_index];
  report.kernel = spec.name;
  report.kernel_kind = spec.kind;
  report.formed_by = spec.formed_by;

  // The same kernel op by op on the interpreter, stopping at the first non-finite result.
  KILN_ASSIGN_OR_RETURN(Graph piece,
                        extractSubgraph(graph, spec.members, spec.inputs, spec.outputs, spec.name));
  ops::TensorMap seen = kernel_inputs;
  ops::InterpretOptions interp;
  interp.overflow = job.overflow;
  interp.after_node = [&](const Node &node, const std::vector<Tensor> &outputs) -> Status {
    bool bad = false;
    for (size_t k = 0; k < outputs.size(); ++k) {
      seen[piece.valueName(node.outputs[k])] = outputs[k];
      bad = bad || (isFloat(outputs[k].dtype()) && !rangeOf("", outputs[k]).finite());
    }
    if (!bad)
      return Status::ok();
    report.op_name = node.name;
    report.op = node.op;
    report.backward = node.name.rfind("grad.", 0) == 0;
    for (ValueId v : node.inputs)
      report.op_inputs.push_back(rangeOf(piece.valueName(v), seen.at(piece.valueName(v))));
    for (ValueId v : node.outputs)
      report.op_outputs.push_back(rangeOf(piece.valueName(v), seen.at(piece.valueName(v))));
    return Error(stop);
  };
  auto rerun = ops::interpret(piece, kernel_inputs, interp);
  if (!rerun && rerun.message() != stop)
    return rerun.error();

  if (!report.op_name.empty() && !options.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.dump_dir, ec);
    SafetensorsFile dump;
    const Node &node = piece.node(piece.findNode(report.op_name));
    for (ValueId v : node.inputs)
      dump.tensors["input:" + piece.valueName(v)] = seen.at(piece.valueName(v));
    for (ValueId v : node.outputs)
      dump.tensors["output:" + piece.valueName(v)] = seen.at(piece.valueName(v));
    dump.metadata["op"] = report.op_name;
    dump.metadata["kernel"] = report.kernel;
    // The op's name comes from the model file and may hold '/', "..", NUL:
    // the file name keeps its safe characters and stays in the folder.
    report.dump = (std::filesystem::path(options.dump_dir) /
                   ("overflow." + fileStem(report.op_name) + ".safetensors"))
                      .string();
    KILN_RETURN_IF_ERROR(writeSafetensors(report.dump, dump));
  }
  suggest(report, job);
  return report;
}

} // namespace kiln::debug

#include "debug/overflow_locator.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "formats/safetensors.h"
#include "ir/float16.h"
#include "ir/float_status.h"
#include "ir/graph_extract.h"
#include "passes/fusion/flash_attention_fusion.h"
#include "runtime/executor.h"
#include "support/file_names.h"

namespace kiln::debug {

std::string reportNumber(double v) {
  std::ostringstream os;
  os.precision(5);
  os << v;
  return os.str();
}

namespace {

std::string describe(const ValueRange &r) {
  std::string s = r.name + " " + typeToString(r.type) + ": ";
  if (!r.finite())
    s += std::to_string(r.inf) + " inf, " + std::to_string(r.nan) + " nan; ";
  return s + "finite values in [" + reportNumber(r.min) + ", " + reportNumber(r.max) + "]";
}

// Whether `t`, which the graph declares as `declared`, holds a value its
// dtype cannot store: inf, NaN, or — held in f32 inside a fused kernel — a
// value that rounding to the declared dtype would overflow (ir/float16.cpp).
bool overflows(const Tensor &t, DType declared) {
  if (!isFloat(t.dtype()))
    return false;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const double v = std::abs(static_cast<double>(t.getFloat(i)));
    const bool bad = declared == DType::F16    ? !(v < 65520.0)
                     : declared == DType::BF16 ? !(v <= kBF16Max)
                                               : !std::isfinite(v);
    if (bad)
      return true;
  }
  return false;
}

// Advice for when no fix could be tried (a graph without the passes' job).
void suggest(OverflowReport &r, const OverflowJob &job) {
  const bool attention = r.op_name.find(".attn.") != std::string::npos;
  bool low_precision = false;
  for (const ValueRange &v : r.op_outputs)
    low_precision = low_precision || v.type.dtype == DType::F16;
  if (attention && low_precision && !job.attention_fp32_pass)
    r.suggestions.push_back("AttentionFp32CastPass is off in this job: switch it on "
                            "(--enable-pass AttentionFp32CastPass) so QK^T is stored and the "
                            "softmax computed in fp32");
  if (low_precision && job.target_has_bf16)
    r.suggestions.push_back("--precision-mode allow_mix_precision_bf16: bf16 has fp32's range");
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
  o.target = job.target.name;
  o.target_has_bf16 = job.target.supports(DType::BF16);
  o.cube_takes_f32 = job.target.cubeTakes(DType::F32);
  const std::string pass = "AttentionFp32CastPass";
  if (const passes::Pass *p = job.registry->find(pass))
    o.attention_fp32_pass = job.context->decide(*p).enabled;
  const std::set<int64_t> layers =
      job.context->options(passes::kAttentionFp32CastPassName).getInts("layers");
  o.attention_fp32_layers.assign(layers.begin(), layers.end());
  o.flash_attention_available =
      job.target.hasFusedOp(passes::kFlashAttentionOp) && !passes::fusesAttention(*job.context);
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

nlohmann::json FixCandidate::toJson() const {
  nlohmann::json j = {{"description", description},
                      {"flags", flags},
                      {"tried", tried},
                      {"verified", verified},
                      {"outcome", outcome}};
  if (tried && std::isfinite(error))
    j["error"] = error;
  if (!keep_dtype.empty())
    j["keep_dtype"] = keep_dtype;
  return j;
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
    j["op"] = {{"name", op_name},      {"op", op},
               {"backward", backward}, {"held_in_f32", held_in_f32},
               {"inputs", ins},        {"outputs", outs}};
  }
  if (!dump.empty())
    j["dump"] = dump;
  j["suggestions"] = suggestions;
  nlohmann::json fixes_json = nlohmann::json::array();
  for (const FixCandidate &f : fixes)
    fixes_json.push_back(f.toJson());
  j["fixes"] = fixes_json;
  if (!reference.empty())
    j["reference"] = reference;
  if (!reference_note.empty())
    j["reference_note"] = reference_note;
  return j;
}

std::string OverflowReport::toText() const {
  if (!found)
    return "no kernel overflowed: the float status stayed clear and no output holds inf or nan (" +
           std::to_string(kernels_run) + " kernels run)\n";
  std::string s;
  if (!bad_input.empty())
    return "input '" + bad_input + "' already holds inf or nan\n";
  s += "first overflow: kernel " + std::to_string(kernel_index) + " '" + kernel + "' (" +
       kernel_kind + (formed_by.empty() ? "" : ", formed by " + formed_by) + ")\n";
  if (op_name.empty()) {
    s += "  the kernel's members run op by op with its numerics do not reproduce it\n";
  } else {
    s += "  op " + op_name + " (" + op + "), " + (backward ? "backward" : "forward") +
         (held_in_f32 ? "; held in f32 inside the fused kernel, it overflows where it is stored"
                      : "") +
         "\n";
    for (const ValueRange &v : op_inputs)
      s += "  input  " + describe(v) + "\n";
    for (const ValueRange &v : op_outputs)
      s += "  output " + describe(v) + "\n";
  }
  if (!dump.empty())
    s += "  inputs and outputs dumped to " + dump + "\n";
  if (!fixes.empty()) {
    s += "fixes, each re-run on this step and checked against " + reference + ":\n";
    if (!reference_note.empty())
      s += "  note: " + reference_note + "\n";
    bool any = false;
    for (const FixCandidate &f : fixes)
      if (f.verified) {
        any = true;
        s += "  - " + f.description + ": " + f.flags + " (" + f.outcome + ")\n";
      }
    if (!any)
      s += "  none of the fixes tried removes the overflow\n";
    for (const FixCandidate &f : fixes)
      if (!f.verified)
        s += "  tried, does not help: " + f.description + " (" + f.outcome + ")\n";
  }
  if (!suggestions.empty()) {
    s += "suggestions:\n";
    for (const std::string &line : suggestions)
      s += "  - " + line + "\n";
  }
  return s;
}

namespace {

// The overflowing op's inputs and outputs as a safetensors file in `dir`.
Status dumpOp(const Graph &piece, const ops::TensorMap &seen, const std::string &dir,
              OverflowReport &report) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
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
  report.dump =
      (std::filesystem::path(dir) / ("overflow." + fileStem(report.op_name) + ".safetensors"))
          .string();
  KILN_RETURN_IF_ERROR(writeSafetensors(report.dump, dump));
  return Status::ok();
}

} // namespace

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

  // Run the kernels until one raises the device's float status or stores inf
  // or NaN; keep what it read.
  std::vector<codegen::KernelSpec> specs;
  for (const codegen::CompiledKernel &k : kernels.kernels)
    specs.push_back(k.spec);
  const std::string stop = "kiln.overflow.stop";
  ops::TensorMap kernel_inputs;
  runtime::FloatStatus status;
  runtime::ExecutorOptions exec;
  exec.after_kernel = [&](size_t k, const std::vector<Tensor> &values) -> Status {
    report.kernels_run = static_cast<int64_t>(k) + 1;
    bool bad = status.overflowed();
    for (ValueId v : specs[k].outputs)
      bad = bad || (isFloat(values[v].dtype()) && !rangeOf("", values[v]).finite());
    if (!bad)
      return Status::ok();
    report.found = true;
    report.kernel_index = static_cast<int64_t>(k);
    for (ValueId in : specs[k].inputs) // the arena's bytes are reused: keep a copy
      kernel_inputs[graph.valueName(in)] = values[in].copy();
    return Error(stop);
  };
  KILN_ASSIGN_OR_RETURN(auto executor, runtime::Executor::create(graph, std::move(kernels), exec));
  auto ran = executor->run(inputs, nullptr, &status);
  if (!ran && ran.message() != stop)
    return ran.error();
  if (!report.found)
    return report;

  const codegen::KernelSpec &spec = specs[report.kernel_index];
  report.kernel = spec.name;
  report.kernel_kind = spec.kind;
  report.formed_by = spec.formed_by;

  // The same kernel op by op on the interpreter with the kernel's numerics
  // (an f32 group holds its intermediates in f32), stopping at the first op
  // whose rounding raised the status or whose result its dtype cannot hold.
  KILN_ASSIGN_OR_RETURN(Graph piece,
                        extractSubgraph(graph, spec.members, spec.inputs, spec.outputs, spec.name));
  ops::TensorMap seen = kernel_inputs;
  ops::InterpretOptions interp;
  interp.overflow = job.overflow;
  interp.fused_numerics = true;
  takeFloatStatus();
  interp.after_node = [&](const Node &node, const std::vector<Tensor> &outputs) -> Status {
    bool bad = takeFloatStatus() != 0;
    bool held = false;
    for (size_t k = 0; k < outputs.size(); ++k) {
      seen[piece.valueName(node.outputs[k])] = outputs[k];
      const DType declared = piece.type(node.outputs[k]).dtype;
      const bool out_of_range = overflows(outputs[k], declared);
      held = held || (out_of_range && outputs[k].dtype() != declared);
      bad = bad || out_of_range;
    }
    if (!bad)
      return Status::ok();
    report.op_name = node.name;
    report.op = node.op;
    report.backward = node.name.rfind("grad.", 0) == 0;
    report.held_in_f32 = held;
    for (ValueId v : node.inputs)
      report.op_inputs.push_back(rangeOf(piece.valueName(v), seen.at(piece.valueName(v))));
    for (ValueId v : node.outputs)
      report.op_outputs.push_back(rangeOf(piece.valueName(v), seen.at(piece.valueName(v))));
    return Error(stop);
  };
  auto rerun = ops::interpret(piece, kernel_inputs, interp);
  if (!rerun && rerun.message() != stop)
    return rerun.error();

  if (!report.op_name.empty() && !options.dump_dir.empty())
    KILN_RETURN_IF_ERROR(dumpOp(piece, seen, options.dump_dir, report));
  suggest(report, job);
  return report;
}

} // namespace kiln::debug

#include "runtime/profiler.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln::runtime {

namespace {

// msprof's names for the data types it reports.
std::string msprofDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "FLOAT";
  case DType::F16:
    return "FLOAT16";
  case DType::BF16:
    return "DT_BF16";
  case DType::I32:
    return "INT32";
  case DType::I64:
    return "INT64";
  case DType::Bool:
    return "BOOL";
  }
  return std::string(dtypeName(dtype));
}

// "4,256,512;512,512": shapes separated by ';', dims by ',' (msprof's form).
std::string shapeList(const Graph &graph, const std::vector<ValueId> &values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      out += ';';
    const Shape &shape = graph.type(values[i]).shape;
    for (size_t d = 0; d < shape.size(); ++d)
      out += (d ? "," : "") + std::to_string(shape[d]);
  }
  return out;
}

std::string dtypeList(const Graph &graph, const std::vector<ValueId> &values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ";" : "") + msprofDType(graph.type(values[i]).dtype);
  return out;
}

// A CSV field, quoted when it holds a separator or a quote (RFC 4180).
std::string csv(const std::string &field) {
  if (field.find_first_of(",\"\n") == std::string::npos)
    return field;
  std::string out = "\"";
  for (char c : field)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v, int precision = 3) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(precision);
  os << v;
  return os.str();
}

std::string taskType(const executable::CompiledKernel &kernel) {
  if (kernel.collective)
    return "HCCL";
  if (kernel.host)
    return "AI_CPU";
  return kernel.gemm ? "AI_CORE" : "AI_VECTOR_CORE";
}

} // namespace

Profiler::Profiler(HostRoofline roofline) : roofline_(roofline), origin_(Clock::now()) {}

double Profiler::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

int Profiler::addProgram(const std::string &label, const Graph &graph,
                         const executable::Executable &kernels) {
  Program program{label, {}};
  for (const executable::CompiledKernel &kernel : kernels.kernels) {
    const executable::KernelSpec &spec = kernel.spec;
    KernelInfo info;
    info.name = spec.name;
    info.type = spec.grouped ? spec.kind : graph.node(spec.members.front()).op;
    info.task_type = taskType(kernel);
    info.formed_by = spec.formed_by;
    info.input_shapes = shapeList(graph, spec.inputs);
    info.output_shapes = shapeList(graph, spec.outputs);
    info.data_types = dtypeList(graph, spec.inputs) + "->" + dtypeList(graph, spec.outputs);
    for (NodeId id : spec.members)
      info.members.push_back(graph.node(id).name + "(" + graph.node(id).op + ")");
    info.cost = executable::kernelCost(graph, spec);
    const std::string &op = graph.node(spec.members.front()).op;
    if (!kernel.host && !kernel.gemm && spec.members.size() == 1 &&
        (op == "FlashAttentionScore" || op == "FlashAttentionScoreGrad")) {
      // Fused attention is its matmuls (the cost model counts their 2*M*N*K):
      // part of the step's GEMM work and its floor, at its operands' rate.
      info.gemm_flops = info.cost.matmul_flops;
      info.gemm_dtype = graph.type(spec.inputs[0]).dtype;
    }
    if (const auto &gemm = kernel.gemm; gemm && !kernel.host) {
      info.gemm_flops = 2.0 * static_cast<double>(gemm->batch) * static_cast<double>(gemm->m) *
                        static_cast<double>(gemm->n) * static_cast<double>(gemm->k);
      const bool bf16 = graph.type(spec.inputs[gemm->a_input]).dtype == DType::BF16 &&
                        graph.type(spec.inputs[gemm->b_input]).dtype == DType::BF16;
      info.gemm_dtype = bf16 ? DType::BF16 : DType::F32;
    }
    program.kernels.push_back(std::move(info));
  }
  programs_.push_back(std::move(program));
  return static_cast<int>(programs_.size()) - 1;
}

void Profiler::kernel(int64_t step, int device, int program, size_t kernel, Clock::time_point start,
                      Clock::time_point end) {
  events_.push_back(
      {step, device, program, kernel, {}, micros(start), micros(end) - micros(start)});
}

void Profiler::host(int64_t step, int device, const std::string &what, Clock::time_point start,
                    Clock::time_point end) {
  events_.push_back({step, device, -1, 0, what, micros(start), micros(end) - micros(start)});
}

void Profiler::stepTime(int64_t step, Clock::time_point start, Clock::time_point end,
                        uint64_t bytes_copied, uint64_t bytes_allocated) {
  steps_[step] = {micros(start), micros(end) - micros(start), bytes_copied, bytes_allocated};
}

const Profiler::KernelInfo *Profiler::info(const Event &e) const {
  return e.program < 0 ? nullptr : &programs_[e.program].kernels[e.kernel];
}

std::string Profiler::opSummary() const {
  std::string out = "Step Id,Device_id,Op Name,OP Type,Task Type,Task Start Time(us),"
                    "Task Duration(us),Input Shapes,Output Shapes,Data Types,FLOPs,Bytes,"
                    "GFLOP/s,GB/s,Roofline %\n";
  for (const Event &e : events_) {
    const KernelInfo *k = info(e);
    const double seconds = e.duration_us * 1e-6;
    out += std::to_string(e.step) + "," + std::to_string(e.device) + ",";
    if (!k) {
      out += csv(e.what) + "," + csv(e.what) + ",HOST," + number(e.start_us) + "," +
             number(e.duration_us) + ",,,,,,,,\n";
      continue;
    }
    const double flops = k->cost.flops, bytes = k->cost.bytes();
    out += csv(k->name) + "," + csv(k->type) + "," + k->task_type + "," + number(e.start_us) + "," +
           number(e.duration_us) + "," + csv(k->input_shapes) + "," + csv(k->output_shapes) + "," +
           csv(k->data_types) + "," + number(flops, 0) + "," + number(bytes, 0) + "," +
           number(seconds > 0 ? flops / seconds * 1e-9 : 0) + "," +
           number(seconds > 0 ? bytes / seconds * 1e-9 : 0) + "," +
           number(roofline_.percent(flops, bytes, seconds), 1) + "\n";
  }
  return out;
}

std::string Profiler::opStatistic() const {
  struct Stat {
    int64_t count = 0;
    double total = 0, min = 1e300, max = 0;
  };
  std::map<int, std::map<std::string, Stat>> by_device;
  std::map<int, double> device_total;
  for (const Event &e : events_) {
    const KernelInfo *k = info(e);
    Stat &s = by_device[e.device][k ? k->type : e.what];
    ++s.count;
    s.total += e.duration_us;
    s.min = std::min(s.min, e.duration_us);
    s.max = std::max(s.max, e.duration_us);
    device_total[e.device] += e.duration_us;
  }
  std::string out = "Device_id,OP Type,Count,Total Time(us),Avg Time(us),Min Time(us),"
                    "Max Time(us),Ratio(%)\n";
  for (const auto &[device, stats] : by_device) {
    std::vector<std::pair<std::string, Stat>> sorted(stats.begin(), stats.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto &a, const auto &b) { return a.second.total > b.second.total; });
    for (const auto &[type, s] : sorted)
      out += std::to_string(device) + "," + csv(type) + "," + std::to_string(s.count) + "," +
             number(s.total) + "," + number(s.total / static_cast<double>(s.count)) + "," +
             number(s.min) + "," + number(s.max) + "," +
             number(device_total[device] > 0 ? 100.0 * s.total / device_total[device] : 0, 2) +
             "\n";
  }
  return out;
}

std::string Profiler::fusionOps() const {
  std::string out = "Program,Fusion Op,Formed By,OP Type,Number of Original Ops,Original Ops,"
                    "Memory Input(bytes),Memory Output(bytes)\n";
  for (const Program &program : programs_) {
    std::set<std::string> seen; // identical kernels of one program appear once each
    for (const KernelInfo &k : program.kernels) {
      if (k.members.size() < 2 || !seen.insert(k.name).second)
        continue;
      std::string members;
      for (size_t i = 0; i < k.members.size(); ++i)
        members += (i ? ";" : "") + k.members[i];
      out += csv(program.label) + "," + csv(k.name) + "," + csv(k.formed_by) + "," + csv(k.type) +
             "," + std::to_string(k.members.size()) + "," + csv(members) + ",";
      // Inputs and outputs of the kernel only: its intermediates stay on chip.
      out += number(k.cost.input_bytes, 0) + "," + number(k.cost.output_bytes, 0) + "\n";
    }
  }
  return out;
}

std::string Profiler::stepTrace() const {
  std::map<int64_t, double> kernel_us, host_us, gemm_us, floor_us;
  for (const Event &e : events_) {
    (e.program < 0 ? host_us : kernel_us)[e.step] += e.duration_us;
    const KernelInfo *k = info(e);
    if (k && k->gemm_flops > 0) {
      gemm_us[e.step] += e.duration_us;
      if (const double rate = roofline_.bestGemmRate(k->gemm_dtype); rate > 0)
        floor_us[e.step] += 1e6 * k->gemm_flops / rate;
    }
  }
  std::string out = "Step Id,Step Time(us),Kernel Time(us),Host Time(us),Covered(%),Copied(bytes),"
                    "Allocated(bytes),GEMM Time(us),GEMM Floor(us)\n";
  for (const auto &[step, span] : steps_) {
    const double covered = kernel_us[step] + host_us[step];
    out += std::to_string(step) + "," + number(span.duration_us) + "," + number(kernel_us[step]) +
           "," + number(host_us[step]) + "," +
           number(span.duration_us > 0 ? 100.0 * covered / span.duration_us : 0, 1) + "," +
           std::to_string(span.bytes_copied) + "," + std::to_string(span.bytes_allocated) + "," +
           number(gemm_us[step]) + "," + number(floor_us[step]) + "\n";
  }
  return out;
}

std::string Profiler::traceJson() const {
  std::set<int> devices;
  for (const Event &e : events_)
    devices.insert(e.device);
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "kiln"}}}});
  for (int d : devices)
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", d},
                      {"args", {{"name", "npu:" + std::to_string(d)}}}});
  for (const Event &e : events_) {
    const KernelInfo *k = info(e);
    nlohmann::json args = {{"step", e.step}};
    if (k) {
      args["program"] = programs_[e.program].label;
      args["op_type"] = k->type;
      args["task_type"] = k->task_type;
      args["input_shapes"] = k->input_shapes;
      args["flops"] = k->cost.flops;
      args["bytes"] = k->cost.bytes();
    }
    events.push_back({{"ph", "X"},
                      {"name", k ? k->name : e.what},
                      {"cat", k ? k->task_type : "HOST"},
                      {"pid", 0},
                      {"tid", e.device},
                      {"ts", e.start_us},
                      {"dur", e.duration_us},
                      {"args", std::move(args)}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Status createProfileDir(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error("--profile: cannot create the folder '" + dir + "': " + ec.message());
  return Status::ok();
}

Status Profiler::finish(const std::string &dir, ThreadPool &pool) {
  keepBestRoofline(measureHostRoofline(pool));
  return write(dir);
}

Status Profiler::write(const std::string &dir) const {
  KILN_RETURN_IF_ERROR(createProfileDir(dir));
  const std::pair<const char *, std::string> files[] = {
      {"op_summary.csv", opSummary()}, {"op_statistic.csv", opStatistic()},
      {"fusion_op.csv", fusionOps()},  {"step_trace.csv", stepTrace()},
      {"trace.json", traceJson()},
  };
  for (const auto &[name, text] : files)
    KILN_RETURN_IF_ERROR(writeFileAtomic(dir + "/" + name, text));
  return Status::ok();
}

} // namespace kiln::runtime

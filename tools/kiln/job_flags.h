// The job flags every command that compiles takes (compile, run, and later
// train and debug), parsed by this one piece of code: --job, --target,
// --dtype, --overflow-mode, --fusion-switch-file, --enable-pass,
// --disable-pass, --fusion-rules, --custom-ops, --allow-unknown-passes and the pass
// instrumentation flags.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "passes/pass_manager.h"

namespace kiln::cli {

struct JobFlags {
  std::string job_file;
  std::string fusion_switch_file;
  driver::JobSettings settings; // target, dtype, overflow, pass lists, rule folders
  std::vector<std::string> print_ir_before;
  std::vector<std::string> print_ir_after;
  bool pass_timing = false;
  bool pass_statistics = false;
};

void addJobFlags(CLI::App &cmd, JobFlags &flags);
// MODEL, --training, --batch and --seq: which graph a compile-only command builds.
void addModelFlags(CLI::App &cmd, driver::ModelRequest &model);
// --input-shape NAME:D0,D1,... (repeatable): an ONNX model's input shapes.
void addInputShapeFlag(CLI::App &cmd, std::map<std::string, std::vector<int64_t>> &shapes);
// Reads the job file and the switch file into a JobSpec and resolves it.
Expected<driver::ResolvedJob> resolveJobFlags(const JobFlags &flags, DType default_dtype);
passes::Instrumentation instrumentationOf(const JobFlags &flags);
// --cache-dir, --cache-mode and --explain-cache-misses.
void addKernelFlags(CLI::App &cmd, driver::KernelSettings &settings);

} // namespace kiln::cli

// `kiln compile` of one model request, through the whole-program cache
// (program_cache.h): a hit reads the compiled program back; a miss builds the
// graph, runs the job's passes, compiles the kernels (through the kernel
// cache), encodes the program and stores it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/codegen/kernel_compiler.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/driver/program_payload.h"
#include "passes/pass_manager.h"

namespace kiln::driver {

struct ProgramRequest {
  ModelRequest model;
  KernelSettings kernels;
  // Watching the passes (print-IR, timing, statistics) needs them to run:
  // asking for any of it bypasses the program cache.
  passes::Instrumentation instrumentation;
  bool passes_only = false; // no kernels, no program cache
  // The program goes into an artifact: a compile checks that its kernels
  // re-derive as loading will (artifact_builder.h). A cached program was
  // compiled by this same kiln build and is used as stored.
  bool for_artifact = false;
};

struct ProgramCompile {
  // Its bucket's objects carry their code; its report text is filled when it
  // was read back or stored (report() is what to write).
  CompiledProgram program;
  std::optional<Graph> graph;        // after the passes, when compiled now (not read back)
  bool has_kernels = false;          // false with passes_only
  codegen::KernelStats kernel_stats; // this run's
  std::string cache_dir;             // empty without a cache
  std::string program_key;           // hex; empty when the program cache was not used
  bool from_cache = false;
  std::string bucket_error; // why program.bucket has no text (kernels fell back, ...)
  // With explain_misses: why the program missed, then each kernel that did.
  std::vector<std::string> miss_explanations;
  std::vector<codegen::KernelFallback> fallbacks;

  // What --report writes: the pass report and the kernel table, with this
  // run's kernel counts and, when the program cache was used, its key and
  // whether it hit.
  Expected<nlohmann::json> report() const;
  // The graph after the passes as kiln graph JSON (indented by one), as
  // `kiln compile -o graph.json` writes it.
  Expected<std::string> graphJson() const;

  nlohmann::json fresh_report; // the report as compiled now (null on a hit)
};

// A compile the target cannot hold fails with every diagnostic; the pass
// report with an "errors" list then goes to `failure_report` when given.
Expected<ProgramCompile> compileProgram(const ProgramRequest &request, const ResolvedJob &job,
                                        nlohmann::json *failure_report = nullptr);

// The kernel table of the report: counts and, per kernel, its name, kind,
// key, members and tiling.
nlohmann::json kernelsToJson(const codegen::CompiledKernels &compiled);

} // namespace kiln::driver

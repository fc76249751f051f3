// The key of a whole-program entry: what `kiln compile` of one model request
// produces depends on, each part hashed apart so a miss can say which changed
// (Inductor's FxGraphCache keys a graph the same way).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "compiler/cache/cache_key.h"

namespace kiln::cache {

// Each field is canonical text: equal inputs hash equally.
struct ProgramKeyInputs {
  std::string name;            // for messages only: the model as given, and the step
  std::string model;           // the model file's bytes (config.json or graph JSON)
  std::string request;         // training, batch, seq
  std::string job;             // the resolved job: precision settings, every pass's state
  std::string job_files;       // the bytes of the files the job names (rules, custom ops, lists)
  std::string target;          // canonical target description
  std::string host_features;   // the kernel keys the program names depend on it
  std::string kiln_build;      // kiln's version, the hash of its compiler sources, LLVM's version
  std::string codegen_options; // object options and what a kernel that does not fit does
};

// The parts in hashing order; explanations use these names.
inline constexpr std::array<std::string_view, 8> kProgramKeyPartNames = {
    "model",  "request",       "job",        "job_files",
    "target", "host_features", "kiln_build", "codegen_options"};

// kind is EntryKind::Program; the domain differs from a kernel key's, so the
// two never collide.
CacheKey makeProgramKey(const ProgramKeyInputs &inputs);

} // namespace kiln::cache

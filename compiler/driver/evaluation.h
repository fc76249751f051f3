// What `kiln eval` evaluates: the model's forward compiled once for the
// job (parallel::EvalProgram, one device), and the weights it runs on (a
// Hugging Face checkpoint, with a PEFT adapter's tensors when one is
// given). runtime/evaluation.h runs it over the token windows.
#pragma once

#include <string>

#include "compiler/driver/compile.h"
#include "compiler/driver/kernels.h"
#include "compiler/frontend/decoder_config.h"
#include "compiler/parallel/training_program.h"
#include "ops/interpreter.h"

namespace kiln::driver {

struct EvalRequest {
  ModelRequest model;       // model.batch: the windows one run takes; model.seq their length
  std::string weights_path; // a safetensors file, a sharded checkpoint's index, the model folder
  std::string lora_path;    // a PEFT adapter folder, applied without dropout; empty: none
};

struct PreparedEval {
  parallel::EvalProgram program;
  ops::TensorMap weights; // by name: the base's parameters and the adapter's tensors
};

// Reads the weights (and the adapter, checked against `config`, the
// model's), then compiles the forward. Weights holding NaN or inf are
// evaluated with a warning, as kiln run does.
Expected<PreparedEval> prepareEvaluation(const EvalRequest &request,
                                         const frontend::DecoderConfig &config,
                                         const ResolvedJob &job, const KernelSettings &settings);

} // namespace kiln::driver

// Evaluating a model on held-out tokens: the forward alone
// (parallel::EvalProgram) over consecutive windows of a token file, the mean
// of the windows' losses and its perplexity. `kiln eval` runs one device's
// program here; the trainer's validation runs its layout's
// (trainer_validation.cpp) and reports the same record.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/parallel/training_program.h"
#include "ops/interpreter.h"
#include "runtime/token_data.h"
#include "support/error.h"

namespace kiln::runtime {

struct EvalRecord {
  // The mean over the windows of each window's loss (the model's mean over
  // its seq - 1 predicted tokens); every window counts the same.
  double loss = 0;
  double perplexity = 0; // exp(loss)
  int64_t windows = 0;
  int64_t tokens = 0; // windows x seq
  double seconds = 0; // running the forward, nothing compiled
  double tokens_per_s = 0;
  // A kernel raised the float status (in saturation mode the only sign that
  // a finite loss may be wrong) or the loss is not finite.
  bool overflow = false;
  // {"loss", "perplexity", "windows", "tokens", "seconds", "tokens_per_s",
  // "overflow"}; a loss that is not finite is null.
  nlohmann::json toJson() const;
  // "loss 5.1234  perplexity 168.0  (1024 tokens in 64 windows, 51234 tokens/s)"
  std::string toText() const;
  // The record of `windows` windows of `seq` tokens whose losses sum to `sum`.
  static EvalRecord of(double sum, int64_t windows, int64_t seq, double seconds, bool overflow);
};

// The windows an evaluation reads: the file's whole windows (TokenData::windows),
// at most `max_tokens` / seq of them (0: no cap), rounded down to whole
// batches of `batch` windows. An error naming the file when not one batch
// fits.
Expected<int64_t> evalWindows(const TokenData &data, const std::string &path, int64_t batch,
                              int64_t max_tokens);

// One device's evaluation: `program` (one stage, no tensor parallelism)
// over the first `windows` windows of `data` (a multiple of its micro-batch),
// `weights` by name (cast to each input's dtype; an error names a missing or
// misshapen one and `weights_source`).
Expected<EvalRecord> evaluate(const parallel::EvalProgram &program, const ops::TensorMap &weights,
                              const std::string &weights_source, const TokenData &data,
                              int64_t windows);

} // namespace kiln::runtime

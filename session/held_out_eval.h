// What `kiln eval` runs: the held-out token file opened for the model's
// vocabulary and window length, the windows it reads (the file's whole
// windows, at most max_tokens of tokens, in whole batches;
// runtime/evaluation.h evalWindows), the forward compiled once for the job
// with the weights and adapter read (driver/evaluation.h), and the mean
// loss, perplexity and speed of running it over them.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/driver/evaluation.h"
#include "runtime/evaluation.h"
#include "runtime/token_data.h"

namespace kiln::session {

struct HeldOutEval {
  driver::EvalRequest request; // its model's seq given (not 0)
  std::string data;            // the token file
  runtime::TokenDType data_dtype = runtime::TokenDType::U16;
  int64_t max_tokens = 0; // 0: the whole file
  driver::KernelSettings kernels;
};

Expected<runtime::EvalRecord> evaluateHeldOut(const HeldOutEval &eval,
                                              const frontend::DecoderConfig &config,
                                              const driver::ResolvedJob &job);

} // namespace kiln::session

// Fuzzes the checkpoint reader: a safetensors file that kiln train would
// resume from. Anything accepted has sane counters and finite tensors, and
// its tensors split into weights and AdamW moments by name.
#include <cmath>

#include "runtime/checkpoint.h"
#include "runtime/loss_scaler.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string source = "step-000001.safetensors";
  auto file = parseSafetensors(fuzz::asText(data, size), source);
  if (!file)
    return 0;
  const size_t tensors = file->tensors.size();
  auto state = runtime::checkpointFromSafetensors(std::move(*file), source);
  fuzz::requireNamesSource(state, source);
  if (!state)
    return 0;
  fuzz::require(state->step >= 0 && state->updates >= 0 && state->updates <= state->step &&
                    state->good_steps >= 0 && state->overflows_in_a_row >= 0 &&
                    state->loss_scale >= 1 && state->loss_scale <= runtime::kMaxLossScale,
                "an accepted checkpoint has inconsistent counters");
  fuzz::require(state->weights.size() + state->moments.size() == tensors,
                "a tensor of the checkpoint went missing");
  for (const auto &[name, t] : state->moments)
    fuzz::require(name.rfind("adam.", 0) == 0, "a weight was taken for a moment", name);
  for (const auto *tensors_of : {&state->weights, &state->moments})
    for (const auto &[name, t] : *tensors_of)
      if (isFloat(t.dtype()))
        for (int64_t k = 0; k < t.numElements(); ++k)
          fuzz::require(std::isfinite(t.getFloat(k)), "an accepted tensor is not finite", name);
  return 0;
}

// What a job decides about precision: the mode, the op lists and the nodes
// that keep their dtype (which layers' attention computes in fp32 is an
// option of AttentionFp32CastPass).
#pragma once

#include <set>
#include <string>

#include "passes/precision/mixlist.h"
#include "passes/precision/precision_mode.h"

namespace kiln::passes {

struct PrecisionSettings {
  PrecisionMode mode = PrecisionMode::MustKeepOriginDType;
  MixList mixlist = MixList::builtin();
  KeepDType keep_dtype;
};

// The pass whose option "layers" (the i of transformer.h.i; empty: every
// layer) --attention-fp32-layers and precision.attention_fp32_layers set.
inline constexpr const char *kAttentionFp32CastPassName = "AttentionFp32CastPass";

} // namespace kiln::passes

// What a job decides about precision: the mode, the op lists, the nodes that
// keep their dtype, and which layers' attention computes in fp32.
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
  // Layers (the i of transformer.h.i) whose attention AttentionFp32CastPass
  // rewrites; empty: every layer.
  std::set<int64_t> attention_fp32_layers;
  // Where the layers came from, for messages: "--attention-fp32-layers" or
  // "job.json: $.precision.attention_fp32_layers".
  std::string attention_fp32_layers_source;
};

} // namespace kiln::passes

// Rotary position embedding in a decoder's graph, as Hugging Face's
// rotary_emb and apply_rotary_pos_emb build it, and the two small helpers
// every part of the decoder builder uses.
#pragma once

#include <string_view>

#include "compiler/frontend/decoder_config.h"
#include "ops/op_builder.h"

namespace kiln::frontend {

// x as `to`; no node when the dtype already matches.
ValueId castTo(ops::OpBuilder &b, ValueId x, DType from, DType to, std::string_view name);
ValueId reshapeTo(ops::OpBuilder &b, ValueId x, Shape shape, std::string_view name);

// cos and sin [1, S, 1, dim] in f32, to broadcast over [B, S, heads, dim];
// Llama 3.1's frequencies scaled where the config says so.
struct RotaryTables {
  ValueId cos = kNoValue, sin = kNoValue;
  int64_t dim = 0; // the channels that turn: rotary_pct of the head
};
RotaryTables rotaryTables(ops::OpBuilder &b, const DecoderConfig &config, int64_t seq);

// apply_rotary_pos_emb on x of `shape` [B, S, heads, head_dim] and `dtype`,
// in f32; where the tables turn fewer channels than the head has, the rest
// pass through.
ValueId applyRotary(ops::OpBuilder &b, const RotaryTables &tables, ValueId x, std::string_view name,
                    const Shape &shape, DType dtype);

} // namespace kiln::frontend

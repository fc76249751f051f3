// See decoder_rotary.h.
#include "compiler/frontend/decoder_rotary.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln::frontend {

ValueId castTo(ops::OpBuilder &b, ValueId x, DType from, DType to, std::string_view name) {
  if (from == to)
    return x;
  return b.create("Cast", name, {x}, {{"dtype", to}});
}

ValueId reshapeTo(ops::OpBuilder &b, ValueId x, Shape shape, std::string_view name) {
  return b.create("Reshape", name, {x}, {{"shape", std::move(shape)}});
}

RotaryTables rotaryTables(ops::OpBuilder &b, const DecoderConfig &config, int64_t seq) {
  RotaryTables t;
  t.dim = config.rotaryDim();
  AttrMap attrs{{"seq_len", seq}, {"dim", t.dim}, {"base", config.rope_theta}};
  if (const RopeScaling &r = config.rope_scaling; r.enabled()) {
    attrs.set("scaling_factor", r.factor);
    attrs.set("low_freq_factor", r.low_freq_factor);
    attrs.set("high_freq_factor", r.high_freq_factor);
    attrs.set("original_max_position", r.original_max_position_embeddings);
  }
  std::vector<ValueId> cs = b.createMulti("RotaryCosSin", "rotary_emb", {}, std::move(attrs));
  if (cs.size() != 2) {
    if (!cs.empty())
      b.fail(Error(b.scopedName("rotary_emb") + ": RotaryCosSin gave " + std::to_string(cs.size()) +
                   " outputs, expected cos and sin"));
    return t;
  }
  t.cos = reshapeTo(b, cs[0], {1, seq, 1, t.dim}, "rotary_emb.cos");
  t.sin = reshapeTo(b, cs[1], {1, seq, 1, t.dim}, "rotary_emb.sin");
  return t;
}

ValueId applyRotary(ops::OpBuilder &b, const RotaryTables &tables, ValueId x, std::string_view name,
                    const Shape &shape, DType dtype) {
  auto s = b.scope(name);
  ValueId xf = castTo(b, x, dtype, DType::F32, "to_f32");
  const int64_t batch = shape[0], seq = shape[1], heads = shape[2], head_dim = shape[3];
  const bool partial = tables.dim < head_dim;
  ValueId rot = xf;
  ValueId pass = kNoValue;
  if (partial) {
    rot = b.create("Slice", "rot", {xf},
                   {{"begin", std::vector<int64_t>{0, 0, 0, 0}},
                    {"end", std::vector<int64_t>{batch, seq, heads, tables.dim}}});
    pass = b.create("Slice", "pass", {xf},
                    {{"begin", std::vector<int64_t>{0, 0, 0, tables.dim}},
                     {"end", std::vector<int64_t>{batch, seq, heads, head_dim}}});
  }
  ValueId with_cos = b.create("Mul", "mul_cos", {rot, tables.cos});
  ValueId half = b.create("RotateHalf", "rotate_half", {rot});
  ValueId with_sin = b.create("Mul", "mul_sin", {half, tables.sin});
  ValueId y = b.create("Add", "add", {with_cos, with_sin});
  if (partial)
    y = b.create("Concat", "concat", {y, pass}, {{"axis", int64_t{3}}});
  return castTo(b, y, DType::F32, dtype, "to_dtype");
}

} // namespace kiln::frontend

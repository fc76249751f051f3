#include "ops/attention_layout.h"

namespace kiln::ops {

std::optional<AttentionLayout> parseAttentionLayout(std::string_view name) {
  if (name == "BNSD")
    return AttentionLayout::BNSD;
  if (name == "BSND")
    return AttentionLayout::BSND;
  return std::nullopt;
}

const char *attentionLayoutName(AttentionLayout layout) {
  return layout == AttentionLayout::BSND ? "BSND" : "BNSD";
}

AttentionLayout attentionLayoutOf(const AttrMap &attrs) {
  if (!attrs.has("input_layout"))
    return AttentionLayout::BNSD;
  return parseAttentionLayout(attrs.getString("input_layout")).value_or(AttentionLayout::BNSD);
}

AttentionShape attentionShapeOf(const Shape &shape, AttentionLayout layout) {
  if (shape.size() != 4)
    return {};
  if (layout == AttentionLayout::BSND)
    return {shape[0], shape[2], shape[1], shape[3]};
  return {shape[0], shape[1], shape[2], shape[3]};
}

int64_t attentionOffset(const AttentionShape &a, AttentionLayout layout, int64_t b, int64_t n,
                        int64_t s, int64_t d) {
  if (layout == AttentionLayout::BSND)
    return ((b * a.S + s) * a.heads + n) * a.D + d;
  return ((b * a.heads + n) * a.S + s) * a.D + d;
}

} // namespace kiln::ops

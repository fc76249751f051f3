// FlashAttentionScore's input_layout (CANN's attribute of that name): how q,
// k, v and out (and dout, dq, dk, dv of the backward) lay out the batch B,
// the heads, the sequence S and the head size D. BNSD, [B, N, S, D], keeps
// each head's rows together; BSND, [B, S, N, D], is a projection's output
// split into heads as it is, so attention in BSND needs no transposes around
// it. The row statistics are [B, N, S] in either.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/attribute.h"
#include "ir/shape.h"

namespace kiln::ops {

enum class AttentionLayout : int64_t { BNSD = 0, BSND = 1 };

std::optional<AttentionLayout> parseAttentionLayout(std::string_view name);
const char *attentionLayoutName(AttentionLayout layout);
// The node's input_layout; BNSD where it has none (a graph written before
// the attribute).
AttentionLayout attentionLayoutOf(const AttrMap &attrs);

// A rank-4 tensor's extents in `layout`.
struct AttentionShape {
  int64_t B = 0, heads = 0, S = 0, D = 0;
};
AttentionShape attentionShapeOf(const Shape &shape, AttentionLayout layout);
// Element (b, n, s, d) of a tensor of extents `a`.
int64_t attentionOffset(const AttentionShape &a, AttentionLayout layout, int64_t b, int64_t n,
                        int64_t s, int64_t d);

} // namespace kiln::ops

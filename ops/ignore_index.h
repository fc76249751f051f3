// A cross-entropy loss's ignore_index: the label whose rows take no part in
// the loss (-100 by default, as PyTorch). kNoIgnoreIndex ignores none: an
// imported ONNX loss without ignore_index, where every label must be a class.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace kiln::ops {

// The lowest int64, which no model's label holds.
inline constexpr int64_t kNoIgnoreIndex = std::numeric_limits<int64_t>::min();

// Whether a row labelled `label` takes no part in the loss.
inline bool isIgnored(int64_t label, int64_t ignore_index) {
  return ignore_index != kNoIgnoreIndex && label == ignore_index;
}

// " and is not ignore_index N", for an error about a label outside the
// classes; empty where the loss ignores no label.
inline std::string notIgnoredClause(int64_t ignore_index) {
  return ignore_index == kNoIgnoreIndex
             ? std::string()
             : " and is not ignore_index " + std::to_string(ignore_index);
}

} // namespace kiln::ops

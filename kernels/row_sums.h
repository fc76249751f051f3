// The last step of a kernel whose outputs are row sums
// (compiler/codegen/kernel_program.h): each tile of rows has added its rows'
// summands into f32 partial sums; here the tiles' partials are added in tile
// order and rounded into the output as the generated kernels store.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/float16.h"

namespace kiln::kernels {

// out[j] = partials[0][j] + partials[1][j] + ... + partials[tiles - 1][j]
// (f32, in that order), rounded to `dtype` with `overflow`; `partials` is
// [tiles, elements]. Returns the float status bits the rounding raised.
uint32_t combineRowSums(const float *partials, int64_t tiles, int64_t elements, void *out,
                        DType dtype, OverflowMode overflow);

} // namespace kiln::kernels

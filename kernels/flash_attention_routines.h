// The host routines of FlashAttentionScore and its gradient
// (library_kernels.h has their arguments).
#pragma once

#include <cstdint>

extern "C" void kilnFlashAttention(void **buffers, int64_t row_begin, int64_t row_end,
                                   uint32_t *status, const int64_t *args);
extern "C" void kilnFlashAttentionGrad(void **buffers, int64_t row_begin, int64_t row_end,
                                       uint32_t *status, const int64_t *args);

// Lowering of Dropout (ops/lib/dropout.cpp): the kernel calls the host
// routine that hashes each element's index (kernels/library_kernels.h); the body,
// x * scale, stands for its cost, the mask having no expression form.
#include <bit>

#include "compiler/codegen/op_lowering.h"
#include "kernels/library_kernels.h"

namespace kiln::codegen {
namespace {

Expected<std::vector<ExprRef>> lowerDropout(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  if (shape.size() != 2)
    return ctx.error("needs x of shape [rows, cols]");
  const double p = ctx.attrs().getFloat("p");
  ctx.callLibrary(kernels::kDropoutRoutine,
                  {ctx.inputBuffer(0), ctx.inputBuffer(1), ctx.outputSlot(0),
                   static_cast<int64_t>(ctx.inputType(0).dtype),
                   static_cast<int64_t>(ctx.outputType(0).dtype), shape[1],
                   std::bit_cast<int64_t>(p), ctx.attrs().getInt("stream")});
  return std::vector<ExprRef>{ctx.input(0, LowerContext::vars(2)) *
                              fconst(static_cast<float>(1.0 / (1.0 - p)))};
}

} // namespace

KILN_REGISTER_LOWERING("Dropout", lowerDropout);

} // namespace kiln::codegen

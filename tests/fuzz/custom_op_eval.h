// Builds every op of a parsed custom-op file (the op and its gradient ops)
// and runs each on small tensors, as the interpreter would: shape
// inference, then the reference kernel.
#pragma once

#include <vector>

#include "ops/custom/custom_op.h"
#include "ops/custom/custom_op_file.h"

namespace kiln::fuzz {

inline void buildAndEvaluate(const ops::custom::CustomOpSpec &spec) {
  auto set = ops::custom::buildCustomOps(spec);
  if (!set)
    return;
  for (const ops::custom::BuiltOp &op : set->ops) {
    if (!op.impl.compute || op.impl.compute->input_ranks.size() != op.def.inputs.size())
      continue;
    std::vector<TensorType> types;
    bool small = true;
    for (int rank : op.impl.compute->input_ranks) {
      small = small && rank >= 0 && rank <= 4;
      types.push_back(TensorType{DType::F32, Shape(small ? rank : 0, 2)});
    }
    auto attrs = ops::completeAttrs(op.def, {}, "fuzz");
    if (!small || !attrs)
      continue;
    auto outputs = op.impl.infer(types, *attrs);
    if (!outputs || !op.impl.kernel)
      continue;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < types.size(); ++i) {
      Tensor t(types[i]);
      for (int64_t e = 0; e < t.numElements(); ++e)
        t.setFloat(e, 0.25f * static_cast<float>(e + i) - 1.0f, OverflowMode::InfNan);
      inputs.push_back(std::move(t));
    }
    std::vector<const Tensor *> in;
    for (const Tensor &t : inputs)
      in.push_back(&t);
    std::vector<Tensor> out;
    bool fits = true;
    for (const TensorType &t : *outputs) {
      fits = fits && t.numElements() <= 4096;
      if (fits)
        out.emplace_back(t);
    }
    if (fits)
      (void)op.impl.kernel(ops::KernelContext{}, in, out, *attrs);
  }
}

} // namespace kiln::fuzz

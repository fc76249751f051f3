#include "passes/precision/cann_op_types.h"

#include <algorithm>

#include "support/name_suggest.h"

namespace kiln::passes {

const std::vector<CannOpType> &cannOpTypes() {
  // CANN's newer versions of an op (V2, V3), its "D" variants (attributes
  // instead of constant inputs), and names of ops kiln builds from smaller
  // ones: kiln's RMSNorm is ReduceMean of x^2 and Rsqrt (the statistics that
  // need f32), then Muls that follow their producers.
  static const std::vector<CannOpType> table = {
      {"MatMulV2", {"MatMul"}},
      {"MatMulV3", {"MatMul"}},
      {"BatchMatMulV2", {"BatchMatMul"}},
      {"BatchMatMulV3", {"BatchMatMul"}},
      {"SoftmaxV2", {"Softmax"}},
      {"AddV2", {"Add"}},
      {"RealDiv", {"Div"}},
      {"Swish", {"Silu"}},
      {"SwishGrad", {"SiluGrad"}},
      {"RmsNorm", {"ReduceMean", "Rsqrt"}},
      {"RmsNormGrad", {"RsqrtGrad"}},
      {"LayerNorm", {"ReduceMean", "Rsqrt"}},
      {"LayerNormV3", {"ReduceMean", "Rsqrt"}},
      {"LayerNormGrad", {"RsqrtGrad"}},
      {"ReduceSumD", {"ReduceSum"}},
      {"ReduceMeanD", {"ReduceMean"}},
      {"GatherV2", {"Gather"}},
      {"EmbeddingDenseGrad", {"EmbeddingGrad"}},
      {"SparseSoftmaxCrossEntropyWithLogits", {"CrossEntropyLoss"}},
      {"ApplyAdamW", {"AdamW"}},
      {"TransposeD", {"Transpose"}},
      {"ConcatV2", {"Concat"}},
      {"ConcatD", {"Concat"}},
      {"SplitV", {"Split"}},
      {"SplitD", {"Split"}},
      {"SliceD", {"Slice"}},
      {"StridedSlice", {"Slice"}},
      {"PadV3", {"Pad"}},
      {"BroadcastToD", {"BroadcastTo"}},
  };
  return table;
}

Expected<std::vector<std::string>> resolveOpType(std::string_view name,
                                                 const ops::OpRegistry &registry) {
  if (registry.find(std::string(name)))
    return std::vector<std::string>{std::string(name)};
  for (const CannOpType &t : cannOpTypes()) {
    if (t.cann != name)
      continue;
    std::vector<std::string> ops;
    for (std::string_view op : t.kiln)
      if (registry.find(std::string(op)))
        ops.emplace_back(op);
    if (!ops.empty())
      return ops;
  }
  std::vector<std::string> known = registry.names();
  for (const CannOpType &t : cannOpTypes())
    known.emplace_back(t.cann);
  std::vector<std::string> near = nearestNames(name, known);
  // A CANN name is left out when the kiln op it stands for is suggested too.
  std::erase_if(near, [&](const std::string &n) {
    for (const CannOpType &t : cannOpTypes())
      if (t.cann == n)
        return std::any_of(t.kiln.begin(), t.kiln.end(), [&](std::string_view op) {
          return std::find(near.begin(), near.end(), op) != near.end();
        });
    return false;
  });
  std::string list;
  for (const std::string &n : near)
    list += (list.empty() ? "" : ", ") + n;
  return Error("unknown op type '" + std::string(name) + "'" +
               (near.empty() ? " (see 'kiln ops' and the CANN op types in docs/precision.md)"
                             : " (did you mean " + list + "?)"));
}

std::string describeOpType(std::string_view name, const std::vector<std::string> &kiln_ops) {
  if (kiln_ops.size() == 1 && kiln_ops[0] == name)
    return std::string(name);
  std::string list;
  for (const std::string &op : kiln_ops)
    list += (list.empty() ? "" : ", ") + op;
  return std::string(name) + " (kiln's " + list + ")";
}

} // namespace kiln::passes

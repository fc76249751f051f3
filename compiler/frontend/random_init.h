// Reproducible random tensors: one generator per tensor, seeded by the run's
// seed and the tensor's name, so adding or removing a tensor leaves the
// others unchanged (the property `kiln init` and `kiln make-inputs` promise).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::frontend {

// The generator for the tensor `name` under `seed`.
std::mt19937_64 generatorFor(uint64_t seed, std::string_view name);

// A tensor for every input of `graph` with `role`, by input name: float
// inputs normal(0, std_dev) stored as f32 (a run casts them to the graph's
// dtype), integer inputs zero (a valid index for any gather).
std::map<std::string, Tensor> randomGraphInputs(const Graph &graph, InputRole role, uint64_t seed,
                                                double std_dev);

// Token ids of `shape` (i64), uniform below `vocab`, from one generator
// seeded by `seed`: `kiln make-inputs`' input_ids for a decoder.
Tensor randomTokenIds(int64_t vocab, const Shape &shape, uint64_t seed);

} // namespace kiln::frontend

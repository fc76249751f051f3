#include "compiler/frontend/random_init.h"

#include <vector>

#include "support/splitmix.h"

namespace kiln::frontend {
namespace {

// FNV-1a: stable across platforms and standard libraries, unlike std::hash.
uint64_t hashName(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

} // namespace

std::mt19937_64 generatorFor(uint64_t seed, std::string_view name) {
  return std::mt19937_64(splitmix64(seed ^ splitmix64(hashName(name))));
}

std::map<std::string, Tensor> randomGraphInputs(const Graph &graph, InputRole role, uint64_t seed,
                                                double std_dev) {
  std::map<std::string, Tensor> tensors;
  for (const GraphInput &in : graph.inputs()) {
    if (in.role != role)
      continue;
    TensorType type = graph.type(in.value);
    if (!isFloat(type.dtype)) {
      tensors.emplace(in.name, Tensor(type)); // zero-filled
      continue;
    }
    type.dtype = DType::F32;
    Tensor t(type);
    float *data = t.dataAs<float>();
    std::mt19937_64 rng = generatorFor(seed, in.name);
    std::normal_distribution<double> dist(0.0, std_dev);
    for (int64_t i = 0; i < t.numElements(); ++i)
      data[i] = static_cast<float>(dist(rng));
    tensors.emplace(in.name, std::move(t));
  }
  return tensors;
}

Tensor randomTokenIds(int64_t vocab, const Shape &shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(numElements(shape)));
  for (int64_t &id : ids)
    id = token(rng);
  return Tensor::fromInts(DType::I64, shape, ids);
}

} // namespace kiln::frontend
